"""The CMake and Ninja a build runs: chosen by the plan, named with where they run from and why.

The build venv carries both from PyPI, first on the build's PATH, so neither the machine's CMake nor the tool's own
decides anything. The CMake is the newest that installs on the build Python within every bound of
knowledge/cmake_range.py; `--cmake X.Y` and `--cmake PATH` are checked against the same bounds.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import PurePath

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.build_requirements import Requirement
from pytorch_winbuild.knowledge.choices import CmakeRequest
from pytorch_winbuild.knowledge.cmake_range import CmakeRange
from pytorch_winbuild.knowledge.model import Era, Knowledge, version_tuple
from pytorch_winbuild.planning.context import PlanContext
from pytorch_winbuild.planning.plan_model import PlanBuilder, PlannedTool, plan_paths
from pytorch_winbuild.planning.python_choice import era_minors

POLICY_VARIABLE = "CMAKE_POLICY_VERSION_MINIMUM"


def venv_tool(os_name: Platform, scripts: PurePath, command: str) -> str:
    """A console script of the build venv: Scripts\\cmake.exe on Windows, bin/cmake elsewhere."""
    return str(scripts / (f"{command}.exe" if os_name == Platform.WINDOWS else command))


def cmake_range(
    knowledge: Knowledge,
    era: Era,
    release: str,
    *,
    generator: str | None,
    toolset_version: bool,
    cuda: str | None,
) -> CmakeRange:
    """The bounds of a build of `release` ("main" for the newest era's own) with this generator and CUDA."""
    key = None if release == "main" else version_tuple(release)[:3]
    return knowledge.cmake.range_for(era, key, generator=generator, toolset_version=toolset_version, cuda=cuda)


def _refused(bounds: CmakeRange, version: str, what: str, release: str, fix: str) -> ConfigurationError:
    refusing = bounds.refusing(version)
    return ConfigurationError(
        f"{what} cannot build PyTorch {release}: " + "; ".join(b.text for b in refusing) + ".",
        fix=fix,
    )


def newest_cmake(knowledge: Knowledge, bounds: CmakeRange, python_minor: str, release: str) -> Requirement:
    """The newest PyPI CMake for this Python inside the bounds, one that needs no policy minimum first; exit 2
    when none is."""
    pins = knowledge.build_requirements
    plain = pins.newest("cmake", python_minor, lambda v: not bounds.refusing(v) and bounds.policy_for(v) is None)
    found = plain or pins.newest("cmake", python_minor, lambda v: not bounds.refusing(v))
    if found is None:
        listed = pins.installable("cmake", python_minor)
        shown = f"those listed for it run from {listed[0]} to {listed[-1]}" if listed else "none is listed for it"
        raise ConfigurationError(
            f"no CMake on PyPI that installs on Python {python_minor} can build PyTorch {release} with this plan "
            f"({shown}); the bounds are: {bounds.text}.",
            fix="pass --cmake PATH with an installed CMake inside those bounds, or choose another --python, "
            "--generator or --cuda.",
        )
    return found


def _release_of(knowledge: Knowledge, era: Era, request: CmakeRequest, python_minor: str) -> Requirement:
    """The PyPI release --cmake X.Y (or X.Y.Z) names for this Python: the newest of that series."""
    pins = knowledge.build_requirements
    listed = pins.installable("cmake", python_minor)
    wanted = version_tuple(request.value)
    matching = [v for v in listed if version_tuple(v)[: len(wanted)] == wanted]
    if not matching:
        series = sorted({".".join(v.split(".")[:2]) for v in listed}, key=version_tuple)
        others = [
            minor
            for minor in era_minors(era)
            if any(version_tuple(v)[: len(wanted)] == wanted for v in pins.installable("cmake", minor))
        ]
        elsewhere = f"--python {others[0]} (whose wheels it has), " if others else ""
        raise ConfigurationError(
            f"{request.label} {request.value}: no CMake release of that series with a Windows x64 wheel for "
            f"Python {python_minor} is listed (build_config/build_requirements.toml [package.cmake] has "
            f"{', '.join(series)} for it).",
            fix=f"pass {elsewhere}one of those series, a path to an installed cmake, or leave {request.label} out.",
        )
    found = pins.newest("cmake", python_minor, lambda v: v == matching[-1])
    assert found is not None
    return found


def plan_cmake(
    context: PlanContext, request: CmakeRequest, bounds: CmakeRange, release: str, python_minor: str
) -> tuple[PlannedTool, Requirement | None]:
    """The CMake the build runs and the pin the venv gets for it (None: --cmake PATH, nothing to install). A
    CMake from the venv has no executable yet: the venv's folder depends on its pins (`placed` names it)."""
    knowledge, era, facts, plan = context.knowledge, context.era, context.facts, context.plan
    ranges = f"PyTorch {release}'s bounds ({bounds.short})"
    if request.kind == "path":
        version = request.version
        if bounds.refusing(version):
            raise _refused(
                bounds,
                version,
                f"{request.label} {request.value} (CMake {version})",
                release,
                f"pass --cmake X.Y inside those bounds (a release from PyPI, into the build venv), or leave "
                f"{request.label} out for the plan's choice.",
            )
        folder = str(plan_paths(facts.os)(request.value).parent)
        tool = PlannedTool("CMake", version, request.value, request.label, f"{request.label}, within {ranges}", folder)
        requirement = None
    else:
        if request.kind == "release":
            requirement = _release_of(knowledge, era, request, python_minor)
            if bounds.refusing(requirement.version):
                best = newest_cmake(knowledge, bounds, python_minor, release)
                raise _refused(
                    bounds,
                    requirement.version,
                    f"{request.label} {request.value} (CMake {requirement.version})",
                    release,
                    f"pass --cmake {'.'.join(best.version.split('.')[:2])} or leave {request.label} out (the plan "
                    f"then picks {best.version}).",
                )
            why = f"{request.label} {request.value}, within {ranges}"
        else:
            requirement = newest_cmake(knowledge, bounds, python_minor, release)
            why = (
                f"the newest CMake on PyPI with a Windows x64 wheel for Python {python_minor} within {ranges} "
                f"({requirement.source})"
            )
        tool = PlannedTool(
            "CMake", requirement.version, "", f"pip's cmake=={requirement.version} in the build venv", why
        )
    policy = bounds.policy_for(tool.version)
    if policy is not None and policy.policy is not None:
        plan.set(
            POLICY_VARIABLE,
            policy.policy,
            f"CMake {tool.version} refuses cmake_minimum_required below {policy.policy}, which PyTorch {release}'s "
            f"tree or submodules declare; CMake 4.0+ reads this variable from the environment ({policy.source})",
        )
        plan.warnings.append(
            f"CMake {tool.version} builds PyTorch {release} only with {POLICY_VARIABLE}={policy.policy}, which the "
            "plan sets: CMake then accepts the old policies, which the release was never tested with. The variable "
            "seeds only a new build folder: a folder configured before without it needs --clean. A CMake below "
            f"{policy.end} needs neither (leave --cmake out)."
        )
    return tool, requirement


def placed(tool: PlannedTool, os_name: Platform, scripts: PurePath) -> PlannedTool:
    """A venv tool with its executable in the venv's scripts folder (one named by --cmake PATH as it is)."""
    return tool if tool.executable else replace(tool, executable=venv_tool(os_name, scripts, tool.name.lower()))


def tool_decisions(facts: Facts, tools: tuple[PlannedTool | None, ...], plan: PlanBuilder) -> None:
    """What runs, from where and why; the machine's own CMake is named when the plan does not use it."""
    for tool in tools:
        if tool is None:
            continue
        machine = facts.tools.get(tool.name.lower())
        unused = machine is not None and machine.path != tool.executable
        plan.decisions.append(
            f"{tool.name}: {tool.label}, {tool.origin}: {tool.reason}."
            + (
                f" The machine's own {tool.name.lower()} ({machine.version or 'version unknown'}, {machine.path}) is "
                "not used."
                if unused and machine is not None
                else ""
            )
        )


def tool_path_changes(cmake: PlannedTool | None, plan: PlanBuilder) -> None:
    """--cmake PATH's folder first on PATH, in front of the build venv's scripts (a tree whose [build-system]
    requires names cmake gets one in the venv too)."""
    if cmake is not None and cmake.path_first is not None:
        plan.prepend("PATH", cmake.path_first, f"the CMake {cmake.origin} names, first on PATH (before the build venv)")


def plan_ninja(os_name: Platform, scripts: PurePath, pins: tuple[Requirement, ...]) -> PlannedTool | None:
    """The Ninja the build runs: the one the era's requirements pin into the build venv."""
    pin = next((r for r in pins if r.name == "ninja"), None)
    if pin is None:
        return None
    return PlannedTool(
        "Ninja",
        pin.version,
        venv_tool(os_name, scripts, "ninja"),
        f"pip's ninja=={pin.version} in the build venv",
        f"the newest ninja listed for this Python in the era's build requirements ({pin.source})",
    )
