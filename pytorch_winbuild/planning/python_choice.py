"""The build's Python: which interpreter runs the era's setup.py, chosen from the installed ones or fetched.

Two interpreters, never confused: the tool's own (>= 3.11, `Facts.python`) and the build's, which must be one the
PyTorch era accepts (build_config/eras.toml `python`). `--python` is `auto`, `X.Y` or a path; on Windows a release
that is not installed is CPython from NuGet. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Literal

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import Facts, PythonInfo
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.choices import CmakeRequest
from pytorch_winbuild.knowledge.model import Era, Knowledge, version_tuple
from pytorch_winbuild.knowledge.python_releases import PythonRange
from pytorch_winbuild.knowledge.versions import python_accepts, python_minors

if TYPE_CHECKING:  # the catalog module loads when a plan places an archive
    from pytorch_winbuild.knowledge.catalog import Archive

_MINOR = re.compile(r"([0-9])\.([0-9]{1,2})")  # ASCII digits only: "３.７" is not a release
PYTHON_HELP = "auto, a Python release X.Y (e.g. 3.6), or the path of a python executable"


@dataclass(frozen=True)
class PythonRequest:
    """A parsed --python: `auto`, a release `X.Y`, or a path."""

    kind: Literal["auto", "release", "path"] = "auto"
    value: str = ""

    @classmethod
    def parse(cls, text: str | None, label: str = "--python") -> PythonRequest:
        """Parse the user's text once, at the edge. A path is any text that is not auto or X.Y."""
        value = "auto" if text is None else str(text).strip()
        if value.lower() == "auto":
            return cls()
        if not value:
            raise ConfigurationError(f"{label} is empty.", fix=f"pass {PYTHON_HELP}, or leave it out for auto.")
        release = _MINOR.fullmatch(value)
        if release:  # "3.07" is 3.7, as Python itself numbers it
            return cls("release", f"{int(release.group(1))}.{int(release.group(2))}")
        if re.fullmatch(r"[\d.]+", value):
            raise ConfigurationError(
                f"{label} {value!r} is neither a Python release X.Y nor a path.",
                fix=f"pass e.g. {label} 3.6 (major.minor), a path to python, or auto.",
            )
        return cls("path", value)

    @property
    def shown(self) -> str:
        return "auto" if self.kind == "auto" else self.value

    def matches(self, python: PythonInfo) -> bool:
        if self.kind == "release":
            return python.minor == self.value
        if self.kind == "path":
            return _same_path(python.executable, self.value)
        return True


AUTO = PythonRequest()

# Given the NuGet archive of a Python, where its interpreter is in the plan's cache and whether it is there.
PythonLocator = Callable[["Archive"], "tuple[str, bool]"]


def _same_path(a: str, b: str) -> bool:
    windows = "\\" in a or "\\" in b or re.match(r"[A-Za-z]:", a) is not None
    if windows:
        return str(PureWindowsPath(a)).lower() == str(PureWindowsPath(b)).lower()
    return str(PurePosixPath(a)) == str(PurePosixPath(b))


def unusable(python: PythonInfo) -> str | None:
    """Why no PyTorch can be built with this interpreter, or None."""
    if python.implementation != "CPython":
        return f"it is {python.implementation}, and PyTorch builds with CPython only"
    if python.bits != 64:
        return f"it is {python.bits}-bit, and PyTorch builds and runs only with 64-bit Python"
    if python.venv is False:
        return "it has no venv module, and the build runs in a venv made from it"
    return None


def accepts(era: Era, version: str) -> bool:
    """Whether the era's setup.py and CI build with this Python release (its range's end is exclusive)."""
    return python_accepts(*era.python, version)


def era_minors(era: Era) -> list[str]:
    """The Python releases X.Y the era accepts, newest first."""
    return python_minors(*era.python)


@dataclass(frozen=True)
class PythonNeed:
    """The Python a plan must build with: a known release's range (build_config/python_releases.toml, a patch
    minimum included) or, for an unpinned plan, its era's (the union of the era's releases'); `only` narrows it to
    the releases X.Y a --cmake X.Y has wheels for."""

    who: str  # "PyTorch 1.6.0", "PyTorch 1.2-1.6"
    low: str
    end: str
    source: str = ""
    only: tuple[str, ...] | None = None
    only_why: str = ""

    def accepts(self, version: str) -> bool:
        minor = ".".join(version.split(".")[:2])
        return python_accepts(self.low, self.end, version) and (self.only is None or minor in self.only)

    @property
    def minors(self) -> list[str]:
        """Its Python releases X.Y, newest first."""
        return [m for m in python_minors(self.low, self.end) if self.only is None or m in self.only]

    @property
    def short(self) -> str:
        said = f"{self.who} builds with Python {self.low} up to, not including, {self.end}"
        return said + (f", and {self.only_why}" if self.only is not None else "")

    @property
    def text(self) -> str:
        """The range with where it was read, as errors print it."""
        return self.short + (f" ({self.source})" if self.source else "")


def era_need(era: Era) -> PythonNeed:
    return PythonNeed(f"PyTorch {era.name}", era.python[0], era.python[1])


def release_need(python: PythonRange, shown: str) -> PythonNeed:
    """A known release's range, with where it was read."""
    return PythonNeed(f"PyTorch {shown}", python.python[0], python.python[1], "; ".join(python.sources))


def python_need(
    knowledge: Knowledge, era: Era, release: tuple[int, ...] | None, shown: str, cmake: CmakeRequest | None
) -> PythonNeed:
    """What the build Python must be: the pinned `release`'s range (else the era's), and, for --cmake X.Y, one of
    the Pythons that CMake release has Windows wheels for (so the plan picks a Python that can install it)."""
    need = release_need(knowledge.python_releases.of(release), shown) if release else era_need(era)
    if cmake is None or cmake.kind != "release":
        return need
    wanted = version_tuple(cmake.value)
    only = tuple(
        minor
        for minor in need.minors
        if any(
            version_tuple(v)[: len(wanted)] == wanted for v in knowledge.build_requirements.installable("cmake", minor)
        )
    )
    shown_only = f"Python {', '.join(sorted(only, key=version_tuple))}" if only else "none of those Pythons"
    return replace(need, only=only, only_why=f"{cmake.label} {cmake.value} has Windows wheels for {shown_only}")


def installed(facts: Facts) -> tuple[PythonInfo, ...]:
    """Every Python the facts list (a schema 1-3 file or a bare probe: the running one)."""
    return facts.pythons or (facts.python,)


VENV_MODULE = "tools/Lib/venv/__init__.py"


def nuget_python(minor: str) -> Archive | None:
    """NuGet's package of CPython X.Y (knowledge.catalog.Archive) when a build venv can be made from it, else None:
    the packages hold venv and ensurepip only from 3.7.4 (build_config/deps.toml [python.layout_since]), so a
    fetched 3.5 or 3.6 could not make the venv every build runs in."""
    from pytorch_winbuild.knowledge.catalog import python_archive

    archive = python_archive(minor)
    return archive if archive is not None and VENV_MODULE in archive.layout else None


def fetchable(minor: str) -> str | None:
    """The CPython release a build can fetch from NuGet for X.Y (Windows only), or None."""
    archive = nuget_python(minor)
    return archive.version if archive is not None else None


@dataclass(frozen=True)
class BuildPython:
    """The interpreter the build venv is made from: installed, or fetched from NuGet into the cache."""

    version: str  # "3.6.8"
    executable: str  # where it is, or where `fetch-deps --python` puts it
    reason: str
    info: PythonInfo | None  # the installed one; None when fetched
    fetch_minor: str | None = None  # X.Y to fetch when it is not installed
    fetch_archive: Archive | None = None  # the NuGet package (build_config/deps.toml)
    present: bool = True  # a fetched one already in the cache

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def label(self) -> str:
        return f"Python {self.version} (64-bit) {self.executable}"


def _install_hint(os_name: Platform, minor: str) -> str:
    """How to get Python X.Y on the plan's OS (Windows fetches 3.7 and newer itself: this is for Linux, and for
    Windows releases whose NuGet package cannot make a venv)."""
    if os_name == Platform.WINDOWS:
        return f"Python {minor} (64-bit, from python.org)"
    return f"Python {minor} (`pyenv install {minor}`, or `conda create -n py{minor.replace('.', '')} python={minor}`)"


@dataclass(frozen=True)
class PythonProblem:
    """Why the era cannot get a build Python with this request; `install` is set when installing removes it."""

    text: str
    install: str | None = None  # how to get it
    install_minor: str | None = None  # the release that installing adds


def python_problem(
    era: Era, facts: Facts, request: PythonRequest, need: PythonNeed | None = None, label: str = "--python"
) -> PythonProblem | None:
    """What stops `era` (held to `need`, a known release's range, when given) from getting a build Python here
    (`label`: how the request is named, its flag or the setting it came from)."""
    need = need or era_need(era)
    if need.only == ():  # --cmake X.Y has no wheel for any Python of the range: no install helps
        return PythonProblem(need.short)
    asked = [p for p in installed(facts) if request.matches(p)]
    usable = [p for p in asked if unusable(p) is None]
    fitting = [p for p in usable if need.accepts(p.version)]
    if fitting:
        return None
    windows = facts.os == Platform.WINDOWS
    if request.kind == "path":
        if not asked:
            return PythonProblem(f"{label} {request.value} is not among the facts' Pythons")
        reason = unusable(asked[0])
        if reason:
            return PythonProblem(f"{label} {request.value}: {reason}")
        return PythonProblem(f"{need.text}, and {label} {request.value} is Python {asked[0].version}")
    if request.kind == "release":
        if not need.accepts(request.value):
            return PythonProblem(f"{need.text}, not {request.value} ({label})")
        if windows and fetchable(request.value):
            return None
        return PythonProblem(
            f"Python {request.value} ({label}) is not installed"
            + ("" if not asked else " as a usable 64-bit CPython that it accepts"),
            install=_install_hint(facts.os, request.value),
            install_minor=request.value,
        )
    if windows and any(fetchable(minor) for minor in need.minors):
        return None
    have = ", ".join(dict.fromkeys(p.version for p in usable)) or "none usable"
    minor = need.minors[0] if need.minors else need.low
    return PythonProblem(
        f"{need.text}, and this machine's Pythons are {have}",
        install=_install_hint(facts.os, minor),
        install_minor=minor,
    )


def choose_build_python(
    era: Era,
    facts: Facts,
    request: PythonRequest,
    *,
    cache_python: PythonLocator | None = None,
    need: PythonNeed | None = None,
) -> BuildPython:
    """The build's interpreter (python_problem(...) is None for this era and need: era_choice checked it).
    `cache_python(archive) -> (executable, present)` says where a fetched Python is in the plan's cache."""
    need = need or era_need(era)
    fitting = [p for p in installed(facts) if request.matches(p) and unusable(p) is None and need.accepts(p.version)]
    fitting.sort(key=lambda p: version_tuple(p.version), reverse=True)
    if fitting:
        chosen = fitting[0]
        why = {
            "auto": f"the newest installed 64-bit CPython that {need.who} accepts (Python {need.low} up to, not "
            f"including, {need.end})",
            "release": f"--python {request.value}",
            "path": f"--python {request.value}",
        }[request.kind]
        return BuildPython(chosen.version, chosen.executable, f"{why}; found by {chosen.found_by}", chosen)
    minors = [request.value] if request.kind == "release" else need.minors
    for minor in minors:
        archive = nuget_python(minor)
        if archive is None:
            continue
        executable, present = cache_python(archive) if cache_python is not None else ("", False)
        why = (
            f"--python {minor}, which is not installed"
            if request.kind == "release"
            else f"no installed 64-bit CPython fits ({need.short})"
        )
        return BuildPython(
            archive.version,
            executable,
            f"{why}: CPython {archive.version} from NuGet's `python` package"
            + (", already in the cache" if present else ", fetched into the cache"),
            None,
            fetch_minor=minor,
            fetch_archive=archive,
            present=present,
        )
    raise ConfigurationError(f"no build Python for {need.who} with --python {request.shown}.")
