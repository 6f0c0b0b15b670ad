"""Where the build venv of a plan lives and what it holds: one venv per (era, build Python, requirement set).

The folder's name carries a key made from the base interpreter and the pinned requirements, so a
changed interpreter or requirement set gets a new venv and an unchanged one is reused
(builder/build_venv.py makes and checks it). Pure: it names paths for the plan's machine.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath, PureWindowsPath

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.build_requirements import Requirement
from pytorch_winbuild.text.terminal_text import echoed

KEY_FORMAT = 1  # bump when what goes into a venv changes in a way the pins do not show
KEY_LENGTH = 12  # hex digits: short enough for Windows' path limits, far from colliding among a cache's venvs
# How requirements go into the venv, printed and run alike: no prompt, no "new pip" notice, and no byte-compiling
# of every installed module (sympy alone is ~1000 files: 30 s → 8 s for the 2.9+ set on 2 cores); the few modules
# a build imports are compiled when first imported.
PIP_INSTALL = ("-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-compile")


@dataclass(frozen=True)
class VenvPlan:
    """The build venv: made from `base` (the build Python), holding `requirements`."""

    base: str  # the build Python's executable
    folder: str  # <cache>/venvs/<era>-py<X.Y>-<key>
    python: str  # the venv's interpreter: every command of the era runs under it
    key: str
    requirements: tuple[Requirement, ...]
    tree_requires: tuple[str, ...] = ()  # the source tree's own [build-system] requires (pip without isolation)

    @property
    def specs(self) -> tuple[str, ...]:
        return (*(r.spec for r in self.requirements), *self.tree_requires)


def venv_key(base_python: str, python_version: str, requirements: tuple[str, ...]) -> str:
    """A short stable hash of what the venv is made of: the interpreter (path and full version, so an
    in-place upgrade from 3.7.9 to 3.7.16 makes a new venv) and the pins, in install order."""
    text = "\n".join([f"format {KEY_FORMAT}", base_python, python_version, *requirements])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_LENGTH]


def _safe(part: str) -> str:
    """Letters, digits, '.' and '-' only: a name every file system and shell takes as it is ('2.9+' → '2.9_')."""
    return re.sub(r"[^0-9A-Za-z.-]", "_", part)


def venv_folder(cache_dir: PurePath, era_name: str, python_minor: str, key: str) -> PurePath:
    """<cache>/venvs/<era>-py<3.X>-<key>: one folder per venv, readable in a listing of the cache."""
    return cache_dir / "venvs" / f"{_safe(era_name)}-py{_safe(python_minor)}-{_safe(key)}"


def venv_python(folder: PurePath, windows: bool) -> PurePath:
    """A venv's interpreter: Scripts\\python.exe on Windows, bin/python elsewhere (the venv module's layout)."""
    return folder / "Scripts" / "python.exe" if windows else folder / "bin" / "python"


def plan_venv(
    os_name: Platform,
    cache_dir: str,
    era_name: str,
    base_python: str,
    python_version: str,
    requirements: tuple[Requirement, ...],
    tree_requires: tuple[str, ...] = (),
) -> VenvPlan:
    """The venv of this (era, build Python, requirements) under the plan's cache folder."""
    windows = os_name == Platform.WINDOWS
    path_type: type[PurePath] = PureWindowsPath if windows else PurePosixPath
    minor = ".".join(python_version.split(".")[:2])
    key = venv_key(base_python, python_version, (*(r.spec for r in requirements), *tree_requires))
    folder = venv_folder(path_type(cache_dir), era_name, minor, key)
    return VenvPlan(
        base=base_python,
        folder=str(folder),
        python=str(venv_python(folder, windows)),
        key=key,
        requirements=requirements,
        tree_requires=tree_requires,
    )


# The most characters of [build-system] requires a plan passes to pip: the pip command is printed for cmd.exe on
# Windows, whose command line holds 8191 characters (the venv's path and pip's options take the rest); a Linux
# argument list is far longer (MAX_ARG_STRLEN is 128 KiB for one argument, ARG_MAX 2 MiB in all).
REQUIRES_LIMIT = {"windows": 6000, "linux": 65536}


def _marker_environment(os_name: Platform, python_version: str) -> dict[str, str]:
    """PEP 508's marker variables for the build Python on the plan's machine (64-bit CPython)."""
    windows = os_name == Platform.WINDOWS
    return {
        "python_version": ".".join(python_version.split(".")[:2]),
        "python_full_version": python_version,
        "implementation_name": "cpython",
        "implementation_version": python_version,
        "platform_python_implementation": "CPython",
        "os_name": "nt" if windows else "posix",
        "sys_platform": "win32" if windows else "linux",
        "platform_system": "Windows" if windows else "Linux",
        "platform_machine": "AMD64" if windows else "x86_64",
    }


def tree_requirements(requires: tuple[str, ...], os_name: Platform, python_version: str) -> tuple[str, ...]:
    """A source tree's [build-system] requires as pip gets them in the build venv: each a PEP 508 requirement
    (text from a checkout goes to pip as arguments: one pip would read as an option, such as --index-url, is
    refused), its marker evaluated for the build Python (those that do not apply are left out, the others passed
    without it: a marker's quotes and comparisons are not what a command line carries), and all of them short
    enough for the plan's command line."""
    if not requires:
        return ()  # (packaging.requirements costs a plan about 15 ms to import)
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Pep508

    environment = _marker_environment(os_name, python_version)
    kept = []
    for spec in requires:
        try:
            requirement = Pep508(spec)
        except InvalidRequirement:
            raise ConfigurationError(
                f"the source tree's pyproject.toml [build-system] requires holds {echoed(spec)!r}, which is not a "
                "PEP 508 requirement.",
                fix="correct the checkout's pyproject.toml, or check out a release.",
            ) from None
        if requirement.marker is None:
            kept.append(spec.strip())
        elif requirement.marker.evaluate(environment):
            requirement.marker = None
            kept.append(str(requirement))
    limit = REQUIRES_LIMIT[os_name]
    if sum(len(spec) + 1 for spec in kept) > limit:
        raise ConfigurationError(
            f"the source tree's pyproject.toml [build-system] requires holds {len(kept)} requirements, "
            f"{sum(len(spec) + 1 for spec in kept)} characters: more than a {os_name} command line carries to pip "
            f"(at most {limit} here).",
            fix="correct the checkout's pyproject.toml, or check out a release.",
        )
    return tuple(kept)


def without_cmake(requires: tuple[str, ...]) -> tuple[str, ...]:
    """Requirements (PEP 508, checked by tree_requirements) less CMake's PyPI package."""
    from packaging.requirements import Requirement as Pep508

    return tuple(spec for spec in requires if re.sub(r"[-_.]+", "-", Pep508(spec).name).lower() != "cmake")


def url_requirements(requires: tuple[str, ...]) -> list[str]:
    """The requirements pip would fetch from a URL (name @ url) whatever index or wheel folder it is given."""
    from packaging.requirements import Requirement as Pep508

    return [spec for spec in requires if Pep508(spec).url]
