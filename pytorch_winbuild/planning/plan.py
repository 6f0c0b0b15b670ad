"""The build plan: a pure function of options × facts × knowledge.

Nothing here touches the machine, so a plan made from a saved facts file is the plan of the machine that wrote it;
every "no" names what to install or which flag to pass. This module orders the steps; each concern decides in its
own module (plan_model, compiler_plan, cuda_plan, generator_plan, archives_plan, environment_plan, commands_plan).
Design notes: docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytorch_winbuild.errors import ConfigurationError, WinbuildError
from pytorch_winbuild.facts.model import CudaInstall, Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.arch_list import NameTable
from pytorch_winbuild.knowledge.build_requirements import Requirement
from pytorch_winbuild.knowledge.choices import Generator, VsLine
from pytorch_winbuild.knowledge.model import Knowledge, version_tuple
from pytorch_winbuild.planning.archives_plan import archive_changes, plan_archives, python_locator
from pytorch_winbuild.planning.cmake_plan import (
    cmake_range,
    placed,
    plan_cmake,
    plan_ninja,
    tool_decisions,
    tool_path_changes,
)
from pytorch_winbuild.planning.commands_plan import build_arguments_for, plan_commands
from pytorch_winbuild.planning.compiler_plan import (
    build_compiler,
    choose_compiler,
    compiler_decisions,
    cuda_msc_range,
    vcvars_call,
    windows_compiler_changes,
)
from pytorch_winbuild.planning.context import PlanContext
from pytorch_winbuild.planning.cuda_plan import (
    arch_names,
    choose_cuda,
    cuda_changes,
    nvcc_host_changes,
    nvcc_host_decision,
    unusable_cuda_reason,
)
from pytorch_winbuild.planning.environment_plan import (
    jobs_changes,
    own_cmake_jobs,
    path_warnings,
    venv_changes,
    windows_switches,
)
from pytorch_winbuild.planning.era_choice import EraChoice, resolve_era
from pytorch_winbuild.planning.era_obstacles import Question
from pytorch_winbuild.planning.fixes import (
    Choices,
    Fix,
    FixableConfigurationError,
    FixableError,
    Way,
    checked,
    leave_out_way,
    left_out,
    python_way,
)
from pytorch_winbuild.planning.generator_plan import (
    choose_compiler_cache,
    choose_generator,
    compiler_cache_changes,
    generator_changes,
    vs_generator,
)
from pytorch_winbuild.planning.host_compiler import HostChoice, choose_host_compiler
from pytorch_winbuild.planning.installs import installed_after
from pytorch_winbuild.planning.jobs import MeasuredJobs
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.plan_model import (
    ArchiveLocator,
    CompilerChoice,
    Plan,
    PlanBuilder,
    PlannedArchive,
    PlannedTool,
    VcvarsCall,
    plan_paths,
)
from pytorch_winbuild.planning.python_choice import (
    BuildPython,
    PythonRequest,
    choose_build_python,
    installed,
    python_need,
    release_need,
    unusable,
)
from pytorch_winbuild.planning.request import PlanRequest
from pytorch_winbuild.planning.venv_plan import VenvPlan, plan_venv, tree_requirements, without_cmake


@dataclass(frozen=True)
class _Toolchain:
    """The compilers the plan's OS decided. Windows: the toolset the build runs (`compiler`), the one CUDA accepts
    (`cuda_host`), the vcvars call that enters `compiler` and CUDA's _MSC_VER range with where it was read.
    Linux: the compiler nvcc runs for host code (None: CPU, or not checked)."""

    compiler: CompilerChoice | None = None
    cuda_host: CompilerChoice | None = None
    vcvars: VcvarsCall | None = None
    msc_range: tuple[int, int] | None = None
    range_source: str = ""
    nvcc_host: HostChoice | None = None


def _check_python_path(facts: Facts, options: Options) -> None:
    """A --python path that no era can use is bad input whatever else is asked (exit 2), named before the era
    solver, with the installed Pythons that work instead (each planned by make_plan before it is shown)."""
    request, label = options.python, options.label("python")
    if request.kind != "path":
        return
    asked = [p for p in installed(facts) if request.matches(p)]
    usable = sorted({p.minor for p in installed(facts) if unusable(p) is None}, key=version_tuple, reverse=True)
    ways = tuple(python_way(PythonRequest("release", minor)) for minor in usable)
    leave = Choices((leave_out_way(options, "python"),), lead="", lead_after="")
    fix = (
        Fix((Choices(ways), leave), joiner=", or ")
        if usable
        else Fix(("pass the path of a 64-bit CPython", leave), joiner=", or ")
    )
    if not asked:
        listed = ", ".join(p.executable for p in installed(facts))
        raise FixableConfigurationError(
            f"{label} {request.value} is not one of the facts file's Pythons ({listed}).", fix=fix
        )
    reason = unusable(asked[0])
    if reason:
        raise FixableConfigurationError(f"{label} {request.value}: {reason}.", fix=fix)


def _resolve_era(
    knowledge: Knowledge, facts: Facts, options: Options, source_version: tuple[str, str] | None
) -> EraChoice:
    """The era and release the plan builds, from the era solver, told which installed CUDA each era could use."""
    asked = str(options.pytorch_version) if options.pytorch_version is not None else None
    pinned = source_version[0] if source_version else asked  # else each era's newest
    return resolve_era(
        Question(knowledge, facts, options),
        source_version,
        usable_cuda=lambda era: tuple(
            cuda.version
            for cuda in sorted(facts.cuda, key=lambda c: version_tuple(c.version), reverse=True)
            if unusable_cuda_reason(
                PlanContext(knowledge, facts, options, era, PlanBuilder(), pinned or era.newest),
                cuda,
                arch_names(knowledge, options, pinned or era.newest),
            )
            is None
        ),
    )


def _opening_decisions(
    choice: EraChoice, caller_notes: tuple[str, ...], tree_backend: str | None, plan: PlanBuilder, *, extension: bool
) -> None:
    """The plan's first lines: the release and its era, the era's source prep (a PyTorch tree's: an extension's
    plan has none), the caller's notes, the front end."""
    era = choice.era
    plan.decisions.append(f"PyTorch {choice.pytorch_version} (from {choice.source}) → era {era.name}.")
    if era.cwrap_prep and not extension:
        plan.decisions.append(
            "Source prep (seed 002, step 1): `invoke build` replaces a tools/shared/cwrap_common.py that git checked "
            "out as the text of its symbolic link (core.symlinks=false) by the file the link names, and supplies "
            "aten/src/ATen/common_with_cwrap.py there when the file is missing."
        )
    plan.decisions.extend(caller_notes)
    if tree_backend is not None:
        plan.decisions.append(
            f"Build front end: {tree_backend}, the tree's pyproject.toml [build-system] (it has no setup.py), so "
            "the generator, toolset and job count go in CMake's own variables, not tools/setup_helpers'."
        )


def _build_python(
    knowledge: Knowledge, choice: EraChoice, facts: Facts, options: Options, locate_archive: ArchiveLocator | None
) -> BuildPython:
    """The Python that builds: one the machine has, or a NuGet CPython in the cache (`locate_archive` finds it),
    in the pinned release's range (build_config/python_releases.toml), else in the era's."""
    need = python_need(knowledge, choice.era, choice.release, choice.pytorch_version, options.cmake.asked)
    return choose_build_python(
        choice.era,
        facts,
        options.python,
        cache_python=python_locator(facts.os, str(options.cache_dir), locate_archive),
        need=need,
    )


def _release_for(knowledge: Knowledge, choice: EraChoice, build_python: BuildPython) -> EraChoice:
    """An unpinned plan builds the newest release of its era that the build Python builds (2.14.1, not main, with
    Python 3.10: 2.15 needs 3.11)."""
    if choice.pinned:
        return choice
    ranges = knowledge.python_releases.within(*choice.era.pytorch)
    fitting = next((r for r in ranges if r.accepts(build_python.version)), None)
    if fitting is None or fitting is ranges[0]:
        return choice
    return replace(
        choice,
        pytorch_version=fitting.newest,
        source=f"{choice.source}; its newest release that builds with Python {build_python.minor}: "
        + release_need(fitting, fitting.newest).short,
    )


@dataclass(frozen=True)
class _Tools:
    """The build venv and the CMake and Ninja the build runs (all None for build-ext, which runs in the Python
    that has torch)."""

    venv: VenvPlan | None = None
    cmake: PlannedTool | None = None
    ninja: PlannedTool | None = None


def _build_tools(
    context: PlanContext,
    choice: EraChoice,
    build_python: BuildPython,
    cuda: CudaInstall | None,
    toolchain: _Toolchain,
    generator: Generator,
    tree_requires: tuple[str, ...],
) -> _Tools:
    """The build venv with the era's pins and the release's CMake, which the plan chooses once it knows the
    generator and CUDA whose bounds it must meet. With pip without build isolation, the tree's own build backend
    is imported from the venv: `tree_requires` go in too, markers evaluated for the build Python."""
    knowledge, era, facts, options, plan = context.knowledge, context.era, context.facts, context.options, context.plan
    if not options.build_venv:
        return _Tools()
    release = choice.pytorch_version
    unisolated = "--no-build-isolation" in build_arguments_for(era, options)
    tree_requires = tree_requirements(tree_requires, facts.os, build_python.version) if unisolated else ()
    pins = knowledge.build_requirements.requirements_for(era.name, build_python.minor)
    compiler = toolchain.compiler
    vs_name = vs_generator(knowledge, era, compiler) if generator is Generator.VS and compiler else None
    bounds = cmake_range(
        knowledge,
        era,
        release,
        generator=vs_name,
        toolset_version=bool(
            vs_name and compiler and era.toolset_variable and compiler.instance.product_line != "2015"
        ),
        cuda=cuda.version if cuda else None,
    )
    cmake, pin = plan_cmake(context, options.cmake, bounds, release, build_python.minor)
    requirements = (*pins, pin) if pin is not None else pins
    if pin is None:  # --cmake PATH: no cmake package in the venv, where a tree's backend may prefer it to PATH's
        tree_requires = without_cmake(tree_requires)
    venv = _build_venv(context, build_python, requirements, tree_requires)
    scripts = plan_paths(facts.os)(venv.python).parent
    tools = _Tools(venv, placed(cmake, facts.os, scripts), plan_ninja(facts.os, scripts, pins))
    tool_decisions(facts, (tools.cmake, tools.ninja), plan)
    return tools


def _build_venv(
    context: PlanContext,
    build_python: BuildPython,
    requirements: tuple[Requirement, ...],
    tree_requires: tuple[str, ...],
) -> VenvPlan:
    """The build venv: the era's pins and the plan's CMake, in a folder keyed by them and the interpreter."""
    era, facts, options, plan = context.era, context.facts, context.options, context.plan
    venv = plan_venv(
        facts.os,
        str(options.cache_dir),
        era.name,
        build_python.executable,
        build_python.version,
        requirements,
        tree_requires,
    )
    plan.decisions.append(
        f"Build venv: {venv.folder} (key {venv.key}: this interpreter and these requirements; reused while both "
        f"are unchanged), holding {', '.join(venv.specs)}"
        + (" (the last from the tree's pyproject.toml [build-system] requires)." if venv.tree_requires else ".")
    )
    return venv


def _refuse_visual_studio_flags(facts: Facts, options: Options) -> None:
    """--vs and --toolset on a machine without Visual Studio are a mistake, not a wish to ignore."""
    if facts.os != Platform.WINDOWS and (options.vs is not VsLine.AUTO or options.toolset):
        raise ConfigurationError(
            "--vs and --toolset choose Visual Studio, which exists only on Windows.",
            fix="leave them out on Linux, or plan for a Windows machine with --host FILE.",
        )


def _windows_compilers(context: PlanContext, cuda: CudaInstall | None) -> _Toolchain:
    """Windows: the toolset CUDA accepts, the one the build runs (the VS 2015 host case may differ) and the
    vcvars call that enters it."""
    knowledge, era, facts, options, plan = context.knowledge, context.era, context.facts, context.options, context.plan
    msc_range, range_source = cuda_msc_range(cuda, knowledge.cuda_release(cuda.version)) if cuda else (None, "")
    cuda_host = choose_compiler(context, cuda.version if cuda else None, msc_range)
    compiler = build_compiler(era, facts, options, cuda_host)
    vcvars = vcvars_call(knowledge, compiler, era.vcvars_arch)
    plan.decisions.extend(compiler_decisions(compiler, cuda_host, cuda, msc_range, range_source))
    return _Toolchain(compiler, cuda_host, vcvars, msc_range, range_source)


def _linux_host(context: PlanContext, cuda: CudaInstall | None) -> _Toolchain:
    """Linux: the compiler nvcc runs for host code, which the CUDA release must accept (nothing for CPU builds)."""
    if cuda is None:
        return _Toolchain()
    nvcc_host = choose_host_compiler(context.knowledge, context.era, context.facts, cuda)
    context.plan.decisions.append(nvcc_host_decision(cuda, nvcc_host))
    return _Toolchain(nvcc_host=nvcc_host)


def _toolchain_changes(
    context: PlanContext,
    cuda: CudaInstall | None,
    toolchain: _Toolchain,
    generator: Generator,
    cache_name: str,
    names: NameTable,
    tree_backend: str | None,
) -> None:
    """The environment of the CUDA, the compilers, the generator and the compiler cache, in that order."""
    era, facts, plan = context.era, context.facts, context.plan
    cuda_changes(context, cuda, names)
    nvcc_host_changes(cuda, toolchain.nvcc_host, plan)
    generator_changes(context, generator, toolchain.compiler, tree_backend)
    if facts.os == Platform.WINDOWS:
        windows_compiler_changes(era, facts, cuda, generator, toolchain.compiler, toolchain.cuda_host, plan)
    compiler_cache_changes(context, cache_name, cuda)


def _build_changes(
    context: PlanContext,
    cuda: CudaInstall | None,
    compiler: CompilerChoice | None,
    archives: list[PlannedArchive],
    tools: _Tools,
    tree_backend: str | None,
    measured_jobs: MeasuredJobs | None,
    fetch_step: int = 1,
) -> None:
    """The environment of the build as a whole: jobs, the era's Windows switches, the archives, the venv and
    the tools first on PATH. `fetch_step`: the number of the fetch-deps line in the plan's Commands."""
    era, facts, plan = context.era, context.facts, context.plan
    jobs_changes(context, cuda, compiler, measured_jobs)
    if tree_backend is not None:
        own_cmake_jobs(tree_backend, plan)
    if facts.os == Platform.WINDOWS:
        windows_switches(era, plan)
    archive_changes(archives, facts, plan, fetch_step)
    if tools.venv is not None:
        venv_changes(facts, tools.venv, plan)
    tool_path_changes(tools.cmake, plan)
    path_warnings(context)


def make_plan(request: PlanRequest, facts: Facts, knowledge: Knowledge) -> Plan:
    """Decide everything a build needs for `request` (planning/request.py) on the machine of `facts`. A refusal
    shows only the changes of the user's choices that plan, each applied to this request with the others kept
    (planning/fixes.py)."""
    try:
        return _make_plan(request, facts, knowledge)
    except FixableError as error:

        def works(way: Way) -> bool:
            try:
                after = installed_after(way.installs, facts)  # the machine once the way's installs are done
                _make_plan(replace(request, options=way.applied(request.options)), after, knowledge)
            except WinbuildError:
                return False
            return True

        raise checked(error, works, left_out(request.options)) from None


def _make_plan(request: PlanRequest, facts: Facts, knowledge: Knowledge) -> Plan:
    options, tree = request.options, request.tree
    locate_archive, measured_jobs = request.locate_archive, request.measured_jobs
    _check_python_path(facts, options)
    choice = _resolve_era(knowledge, facts, options, tree.version)
    era = choice.era
    build_python = _build_python(knowledge, choice, facts, options, locate_archive)
    choice = _release_for(knowledge, choice, build_python)
    names = arch_names(knowledge, options, choice.pytorch_version)
    plan = PlanBuilder(warnings=list(choice.warnings))
    _opening_decisions(choice, request.notes, tree.backend, plan, extension=options.extension)
    plan.decisions.append(f"Build Python: {build_python.label}: {build_python.reason}.")
    build_arguments = build_arguments_for(era, options)
    _refuse_visual_studio_flags(facts, options)

    context = PlanContext(knowledge, facts, options, era, plan, choice.pytorch_version)
    cuda = choose_cuda(context, names)
    toolchain = _windows_compilers(context, cuda) if facts.os == Platform.WINDOWS else _linux_host(context, cuda)
    generator = choose_generator(facts, options, plan)
    tools = _build_tools(context, choice, build_python, cuda, toolchain, generator, tree.requires)
    venv = tools.venv
    cache_name = choose_compiler_cache(context, generator)
    archives = plan_archives(context, cuda, locate_archive)

    _toolchain_changes(context, cuda, toolchain, generator, cache_name, names, tree.backend)
    fetch_step = 1 + (len(request.checkout.steps) if request.checkout else 0)  # after the source's git steps
    _build_changes(context, cuda, toolchain.compiler, archives, tools, tree.backend, measured_jobs, fetch_step)
    return Plan(
        os=facts.os,
        pytorch_version=choice.pytorch_version,
        pytorch_version_source=choice.source,
        era=era,
        python=f"{build_python.version} (64-bit) {build_python.executable}"
        + (f", in the venv {venv.folder}" if venv else ""),
        build_python=build_python,
        venv=venv,
        cmake=tools.cmake,
        ninja=tools.ninja,
        compiler=toolchain.compiler,
        cuda_host_compiler=toolchain.cuda_host,
        vcvars=toolchain.vcvars,
        cuda=cuda,
        cuda_msc_range=toolchain.msc_range,
        cuda_msc_range_source=toolchain.range_source,
        nvcc_host=toolchain.nvcc_host,
        generator="Ninja" if generator is Generator.NINJA else vs_generator(knowledge, era, toolchain.compiler),  # type: ignore[arg-type]
        compiler_cache=cache_name,
        archives=tuple(archives),
        changes=(*plan.changes, *request.entry_env),
        commands=tuple(
            plan_commands(
                context, toolchain.vcvars, cuda, archives, build_arguments, build_python, venv, request.checkout
            )
        ),
        build_arguments=build_arguments,
        decisions=tuple(plan.decisions),
        warnings=(*tree.warnings, *plan.warnings),
        source=tree.text,
        path_separator=";" if facts.os == Platform.WINDOWS else ":",
        gpus=tuple(facts.gpus or ()),
        archs=plan.archs,
        checkout=request.checkout,
    )
