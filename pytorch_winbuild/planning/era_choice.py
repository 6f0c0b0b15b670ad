"""Which PyTorch era a plan is for: solved from every constraint, not defaulted to the newest.

Precedence (issue 9): the source tree's own version > --pytorch-version > the newest era that fits
everything else that was asked for or is installed: --cuda, --vs, the host's Python and Visual
Studio, and (with --cuda auto) an installed CUDA that the era builds with. A pinned version whose
era conflicts with the rest is an error that names the conflict, the nearest choices that work (each
checked with the same test, the other choices kept) and what to install to keep what was asked.
A newest word (main, latest) pins the newest era, so it contradicts an older source tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PureWindowsPath
from typing import TYPE_CHECKING

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.choices import CmakeRequest, CudaChoice, CudaWord, NewestWord, VsLine, cuda_release_of
from pytorch_winbuild.knowledge.model import CudaRelease, Era, Knowledge, version_tuple
from pytorch_winbuild.knowledge.msvc import toolset_msc_ver
from pytorch_winbuild.knowledge.versions import parse_pytorch_version, release_key
from pytorch_winbuild.planning.python_choice import (
    AUTO,
    PythonRequest,
    installed,
    python_need,
    python_problem,
    unusable,
)
from pytorch_winbuild.text import quoting_bat as bat

if TYPE_CHECKING:  # packaging is imported only when a version is parsed (knowledge/versions.py)
    from packaging.version import Version

    from pytorch_winbuild.knowledge.choices import PytorchPin


@dataclass(frozen=True)
class EraChoice:
    era: Era
    pytorch_version: str  # the pinned version, or the era's newest release for an unpinned plan
    source: str  # the constraint that chose it, for the plan's "Why"
    warnings: tuple[str, ...] = ()
    pinned: bool = False  # the tree or --pytorch-version named it (a release, or a newest word such as main)
    release: tuple[int, int, int] | None = None  # the release pinned (None: unpinned, or a newest word)


@dataclass(frozen=True)
class Obstacle:
    """Why an era cannot be planned here. An obstacle with an `install` step is a fact of the machine (exit 3)
    that installing removes; the others are the user's own options conflicting with each other (exit 2)."""

    text: str
    install: str | None = None

    @property
    def host(self) -> bool:
        return self.install is not None


# An era → the installed CUDA releases it can use, newest first (the plan's own test, passed in).
UsableCuda = Callable[[Era], tuple[str, ...]]


def era_of(knowledge: Knowledge, version: Version) -> tuple[Era, str | None]:
    """The era covering `version` (a warning when it is newer than every known era)."""
    key = release_key(version)
    for era in knowledge.eras:
        if era.first <= key < era.end:
            return era, None
    newest, oldest = knowledge.eras[-1], knowledge.eras[0]
    if key >= newest.end:
        return newest, (
            f"PyTorch {version} is newer than any release pytorch-winbuild knows (era {newest.name} ends before "
            f"{newest.pytorch[1]}); the plan uses era {newest.name}'s facts. Compare them with the source's "
            "setup.py, and update build_config/eras.toml."
        )
    raise ConfigurationError(
        f"PyTorch {version} is older than any era pytorch-winbuild knows (the first, {oldest.name}, starts "
        f"at {oldest.pytorch[0]}).",
        fix=f"pass --pytorch-version {oldest.pytorch[0]} or newer, or add an era to build_config/eras.toml.",
    )


def _lines_for(knowledge: Knowledge, era: Era, cuda: CudaChoice) -> list[str]:
    """The Visual Studio lines the era knows that have a toolset `cuda` accepts (any line without CUDA)."""
    release = cuda_release_of(cuda)
    return [
        line
        for line in era.visual_studio
        if release is None
        or any(
            t.product_line == line and release.msc_range[0] <= t.msc_ver < release.msc_range[1]
            for t in knowledge.toolsets
        )
    ]


def _visual_studio(knowledge: Knowledge, lines: list[str]) -> str:
    """What to install for one of these Visual Studio lines, as the installer names it, with its C++ tools."""
    installers = [knowledge.products[line].installer for line in lines]
    return " or ".join(installers) + ("" if "C++" in installers[-1] else " with the C++ build tools")


def obstacles(
    era: Era,
    knowledge: Knowledge,
    facts: Facts | None,
    cuda: CudaChoice,
    vs: VsLine,
    python: PythonRequest = AUTO,
    pinned: tuple[int, ...] | None = None,
    cmake: CmakeRequest | None = None,
) -> list[Obstacle]:
    """What stops `era` from being planned with these options on this machine (on any machine
    when `facts` is None: fetch-deps needs no compiler, so only the options count). `pinned` is the release
    asked for (else the era's newest); `cmake` the CMake version --cmake insists on, checked against that
    release's own bounds (the plan brings a fitting CMake into the build venv otherwise)."""
    found = []
    release = cuda_release_of(cuda)
    if release is not None and release.version not in era.cuda:
        found.append(
            Obstacle(f"PyTorch {era.name} does not build with CUDA {cuda} (it builds with {', '.join(era.cuda)})")
        )
    if facts is None:
        return found
    need = python_need(knowledge, era, pinned, ".".join(map(str, pinned or ())), cmake)
    problem = python_problem(era, facts, python, need)
    if problem is not None:
        found.append(Obstacle(problem.text, install=problem.install))
    refusal = _cmake_obstacle(knowledge, era, pinned, cmake)
    if refusal is not None:
        found.append(refusal)
    if facts.os == Platform.WINDOWS:
        if (
            era.nvtoolsext == "always"
            and release
            and not release.needs_nvtx
            and release.version in era.cuda
            and not facts.nvtoolsext
        ):
            found.append(
                Obstacle(
                    f"PyTorch {era.name} links NvToolsExt even with CUDA {cuda}, whose NVTX is header-only (its CMake "
                    "stops with 'Failed to find nvToolsExt'), and this machine has no NvToolsExt",
                    install="NvToolsExt (the 'Nsight NVTX' / 'Visual Studio Integration' component of a CUDA 11.x "
                    "installer)",
                )
            )
        moved = _moved_nvtoolsext(era, facts, release)
        if moved is not None:
            found.append(moved)
        installed = sorted({v.product_line for v in facts.visual_studio})
        if vs is not VsLine.AUTO and vs not in era.visual_studio:
            found.append(
                Obstacle(f"PyTorch {era.name}'s build knows Visual Studio {', '.join(era.visual_studio)}, not {vs}")
            )
        elif vs is not VsLine.AUTO and installed and vs not in installed:
            found.append(
                Obstacle(
                    f"Visual Studio {vs} (--vs) is not installed (this machine has {', '.join(installed)})",
                    install=_visual_studio(knowledge, [vs]),
                )
            )
        elif installed and not set(installed) & set(era.visual_studio):
            lines = _lines_for(knowledge, era, cuda) or list(era.visual_studio)
            found.append(
                Obstacle(
                    f"PyTorch {era.name}'s build knows Visual Studio {', '.join(era.visual_studio)}, and "
                    f"this machine has {', '.join(installed)}",
                    install=_visual_studio(knowledge, lines),
                )
            )
    return found


def same_windows_folder(a: str, b: str) -> bool:
    """Windows folder names compare without case, whichever slash or trailing separator they were written with."""
    return PureWindowsPath(a.rstrip("\\/")) == PureWindowsPath(b.rstrip("\\/"))


def _moved_nvtoolsext(era: Era, facts: Facts, release: CudaRelease | None) -> Obstacle | None:
    """An era that links NvToolsExt from one fixed folder (eras.toml nvtoolsext_fixed) cannot use one elsewhere."""
    if not (era.nvtoolsext_fixed and release and release.needs_nvtx and release.version in era.cuda):
        return None
    folder = next((c.nvtx for c in facts.cuda if c.version == release.version and c.nvtx), None) or facts.nvtoolsext
    if not folder or same_windows_folder(folder, era.nvtoolsext_fixed):
        return None
    fixed = era.nvtoolsext_fixed
    try:
        target, source = (bat.command_argument(path, "the folder", "") for path in (fixed, folder))
        link = f"a junction there works: `mklink /J {target} {source}` in an administrator Command Prompt"
    except ConfigurationError:  # a folder no cmd quoting keeps literal: say it in words
        link = f"a copy of {folder} there works"
    return Obstacle(
        f"PyTorch {era.name} links NvToolsExt only from {fixed} (its torch/CMakeLists.txt reads no variable for "
        f"it, not NVTOOLSEXT_PATH), and this machine's is {folder}",
        install=f"NvToolsExt in {fixed} ({link})",
    )


def _cmake_obstacle(
    knowledge: Knowledge, era: Era, release: tuple[int, ...] | None, cmake: CmakeRequest | None
) -> Obstacle | None:
    """--cmake's version against the release's own bounds (its cmake_minimum_required, and CMake 4's refusal
    of old policies, which the plan lifts with CMAKE_POLICY_VERSION_MINIMUM): of the `release` pinned, else of
    the era's newest release, the one an unpinned plan builds. The generator and CUDA bounds come later."""
    version = cmake.insisted if cmake is not None else None
    if version is None:
        return None
    refusing = knowledge.cmake.range_for(era, release).refusing(version)
    if not refusing:
        return None
    return Obstacle(f"the CMake asked for ({version}) is outside its bounds: " + "; ".join(b.short for b in refusing))


def _release(shown: str) -> tuple[int, ...] | None:
    """The release a refusal shows ("1.8.1"), as obstacles() takes it; None for "main"."""
    return None if shown == "main" else version_tuple(shown)


def _installs(found: list[Obstacle]) -> list[str]:
    """What to install against the machine's obstacles (every one of `found` has an install step)."""
    return [o.install for o in found if o.install is not None]


def _toolset_fits(facts: Facts, line: str, cuda: CudaChoice) -> bool:
    """Whether an installed toolset of this Visual Studio line is one `cuda` accepts (any, for a CPU build)."""
    release = cuda_release_of(cuda)
    if release is None:
        return True
    installed = facts.cuda_by_version(release.version)
    low, high = installed.msc_range if installed and installed.msc_range else release.msc_range
    return any(
        low <= toolset_msc_ver(toolset) < high
        for vs in facts.visual_studio
        if vs.product_line == line
        for toolset in vs.toolsets
    )


def _checkout(era: Era) -> str:
    """The git ref of the era's newest release: its tag, or the main branch for the newest era."""
    return era.newest if era.newest == "main" else f"v{era.newest}"


def _closest(knowledge: Knowledge, era: Era, candidates: list[Era]) -> list[Era]:
    """Of `candidates`, the nearest older and the nearest newer than `era`, so the message names two, not all."""
    order = knowledge.eras.index(era)
    older = [e for e in candidates if knowledge.eras.index(e) < order]
    newer = [e for e in candidates if knowledge.eras.index(e) > order]
    return older[-1:] + newer[:1]


def _fix(
    knowledge: Knowledge,
    facts: Facts | None,
    cuda: CudaChoice,
    vs: VsLine,
    asked: tuple[Era, str] | None,
    tree: bool,
    usable_cuda: UsableCuda | None,
    python: PythonRequest = AUTO,
    cmake: CmakeRequest | None = None,
) -> str:
    """The ways out of a refusal, each checked with `obstacles` with the other choices kept, so none leads back
    here: what to install to keep what was asked, then the flags that plan with what is installed. `asked` is the
    pinned era and the version shown; `tree` says the source tree pins it (so --pytorch-version cannot change it)."""
    release = cuda_release_of(cuda)
    missing_cuda = [f"CUDA {cuda}"] if release and facts and facts.cuda_by_version(release.version) is None else []
    ways: list[str] = []
    if asked is not None and facts is not None:
        era, shown = asked
        found = obstacles(era, knowledge, facts, cuda, vs, python, _release(shown), cmake=cmake)
        if all(o.host for o in found):
            ways.append(f"to build PyTorch {shown} here, install {' and '.join([*_installs(found), *missing_cuda])}")
    if release and facts is not None and not tree and (asked is None or release.version not in asked[0].cuda):
        ways += _install_for_cuda(knowledge, facts, cuda, vs, asked is not None, python, cmake, missing_cuda)

    kept: list[str] = []  # flags that keep the asked CUDA, which may still have to be installed
    flags: list[str] = []
    if cmake is not None and asked is not None and facts is not None:
        era, shown = asked
        if not obstacles(era, knowledge, facts, cuda, vs, python, _release(shown)):
            ways.append("leave --cmake out (the plan then installs a CMake inside those bounds into the build venv)")
    if python != AUTO and facts is not None:
        eras = [asked[0]] if asked is not None else list(knowledge.eras)
        flags += _python_flags(knowledge, facts, cuda, vs, eras, cmake, _release(asked[1]) if asked else None)
    if asked is not None:
        era = asked[0]
        fitting = _closest(
            knowledge,
            era,
            [
                e
                for e in knowledge.eras
                if e is not era
                and not obstacles(e, knowledge, facts, cuda, vs, python, _release(e.newest), cmake=cmake)
            ],
        )
        if tree:
            ways += [
                f"check out {_checkout(e)} in the source tree (--ref {_checkout(e)} with --repo)"
                + (f" and install CUDA {cuda}" if missing_cuda else "")
                + f": PyTorch {e.name} plans here"
                for e in fitting
            ]
        elif vs is VsLine.AUTO or facts is None or _toolset_fits(facts, vs, cuda):  # --vs's toolsets stay
            kept += [f"--pytorch-version {e.newest} (PyTorch {e.name})" for e in fitting]
    if vs is not VsLine.AUTO and facts is not None and facts.os == Platform.WINDOWS:
        eras = [asked[0]] if asked is not None else list(knowledge.eras)
        lines = sorted({v.product_line for v in facts.visual_studio} - {vs})
        kept += [
            f"--vs {line}"
            for line in lines
            if _toolset_fits(facts, line, cuda)
            and any(not obstacles(e, knowledge, facts, cuda, VsLine(line), python, cmake=cmake) for e in eras)
        ]
    if kept and missing_cuda:
        ways.append(f"install CUDA {cuda} and pass {' or '.join(kept)}")
    else:
        flags += kept
    if release:
        other, install = _other_cuda(knowledge, facts, vs, asked, usable_cuda, python, cmake)
        flags += other
        ways += [install] if install else []
    if flags:
        ways.append(("with what this machine has, pass " if ways else "pass ") + " or ".join(flags))
    if not ways and facts is not None:
        ways = _without_conflicts(knowledge, facts, cuda, vs, asked, tree, python, cmake)
    if not ways and facts is not None:
        ways = _install_for_newest(knowledge, facts, cuda, vs, python, cmake)
    return "; or ".join(ways) + "."


def _install_for_cuda(
    knowledge: Knowledge,
    facts: Facts,
    cuda: CudaChoice,
    vs: VsLine,
    pinned: bool,
    python: PythonRequest,
    cmake: CmakeRequest | None,
    missing_cuda: list[str],
) -> list[str]:
    """What to install to build with the asked CUDA: for the newest era that builds with it once installed (none
    when one plans as it is: a --pytorch-version names it)."""
    for era in reversed(knowledge.eras):
        found = obstacles(era, knowledge, facts, cuda, vs, python, cmake=cmake)
        if found and all(o.host for o in found):
            return [
                f"to build with CUDA {cuda}, install {' and '.join([*_installs(found), *missing_cuda])}"
                + (f" and pass --pytorch-version {era.newest}" if pinned else "")
                + f" (PyTorch {era.name} is the newest release that builds with CUDA {cuda})"
            ]
        if not found:
            break
    return []


def _other_cuda(
    knowledge: Knowledge,
    facts: Facts | None,
    vs: VsLine,
    asked: tuple[Era, str] | None,
    usable_cuda: UsableCuda | None,
    python: PythonRequest,
    cmake: CmakeRequest | None = None,
) -> tuple[list[str], str | None]:
    """--cuda flags that plan the era(s) in question with another CUDA (installed and usable, newest first) or
    none, and, when only an uninstalled CUDA fits, the way to install it."""
    eras = [asked[0]] if asked is not None else list(knowledge.eras)
    fits = [e for e in eras if not obstacles(e, knowledge, facts, CudaWord.CPU, vs, python, cmake=cmake)]
    install = None
    if facts is None:
        versions = list(reversed(fits[0].cuda)) if fits else []
    else:
        usable = {v for e in fits for v in (usable_cuda(e) if usable_cuda else ())}
        versions = sorted(usable, key=version_tuple, reverse=True)
        to_install = [
            v
            for e in fits
            for v in e.cuda
            if not obstacles(e, knowledge, facts, knowledge.cuda[v], vs, python, cmake=cmake)
        ]
        if to_install and not versions:
            newest = max(to_install, key=version_tuple)
            install = f"install CUDA {newest} and pass --cuda {newest}"
    return [f"--cuda {v}" for v in versions] + ([f"--cuda {CudaWord.CPU}"] if fits else []), install


def _python_flags(
    knowledge: Knowledge,
    facts: Facts,
    cuda: CudaChoice,
    vs: VsLine,
    eras: list[Era],
    cmake: CmakeRequest | None,
    release: tuple[int, ...] | None = None,
) -> list[str]:
    """--python choices that plan one of `eras` (the pinned `release`, when one is) with the other choices kept,
    each checked: installed releases, newest first, else auto (which fetches one on Windows)."""
    minors = sorted({p.minor for p in installed(facts) if unusable(p) is None}, key=version_tuple, reverse=True)
    fits = [
        minor
        for minor in minors
        if any(
            not obstacles(e, knowledge, facts, cuda, vs, PythonRequest("release", minor), release, cmake=cmake)
            for e in eras
        )
    ]
    if fits:
        return [f"--python {minor}" for minor in fits[:2]]
    return (
        ["--python auto"]
        if any(not obstacles(e, knowledge, facts, cuda, vs, AUTO, release, cmake=cmake) for e in eras)
        else []
    )


def _install_for_newest(
    knowledge: Knowledge, facts: Facts, cuda: CudaChoice, vs: VsLine, python: PythonRequest, cmake: CmakeRequest | None
) -> list[str]:
    """Nothing fits and no flag helps (no usable Python on Linux, say): what to install for the newest era that
    installing alone makes plannable."""
    for era in reversed(knowledge.eras):
        found = obstacles(era, knowledge, facts, cuda, vs, python, cmake=cmake)
        if found and all(o.host for o in found):
            return [f"install {' and '.join(dict.fromkeys(_installs(found)))} (for PyTorch {era.name})"]
    return []


def _without_conflicts(
    knowledge: Knowledge,
    facts: Facts,
    cuda: CudaChoice,
    vs: VsLine,
    asked: tuple[Era, str] | None,
    tree: bool,
    python: PythonRequest = AUTO,
    cmake: CmakeRequest | None = None,
) -> list[str]:
    """When no single flag helps (--vs and the version both conflict): what to install for the asked era with --vs
    left out, and the nearest era that plans with what is installed, as one set of flags."""
    ways = []
    if asked is not None:
        found = obstacles(asked[0], knowledge, facts, cuda, VsLine.AUTO, python, _release(asked[1]), cmake=cmake)
        release = cuda_release_of(cuda)
        missing_cuda = [f"CUDA {cuda}"] if release and facts.cuda_by_version(release.version) is None else []
        if found and all(o.host for o in found):
            ways.append(
                f"to build PyTorch {asked[1]} here, leave --vs out and install "
                + " and ".join([*_installs(found), *missing_cuda])
            )
    fitting = [
        e for e in knowledge.eras if not obstacles(e, knowledge, facts, CudaWord.CPU, VsLine.AUTO, python, cmake=cmake)
    ]
    if asked is not None and asked[0] in fitting:
        era: Era | None = asked[0]
    else:
        era = next(iter((_closest(knowledge, asked[0], fitting) if asked is not None else fitting)[-1:]), None)
    if era is not None and not (tree and asked is not None and era is not asked[0]):
        changes = [] if asked is not None and era is asked[0] else [f"--pytorch-version {era.newest}"]
        changes += [
            f"--{name} {value}"
            for name, value, given in (("cuda", CudaWord.CPU, cuda), ("vs", VsLine.AUTO, vs))
            if given is not value
        ]
        ways.append(f"with what this machine has, pass {' '.join(changes)}")
    return ways


def _refuse(what: str, found: list[Obstacle], fix: str) -> ConfigurationError | ToolchainError:
    error = ToolchainError if any(o.host for o in found) else ConfigurationError
    return error(f"{what}: {'; '.join(dict.fromkeys(o.text for o in found))}.", fix=fix)


def _pinned_release(
    knowledge: Knowledge, pytorch_version: PytorchPin | None, source_version: tuple[str, str] | None
) -> tuple[Version | None, str] | None:
    """The release the source tree or --pytorch-version pins, and where that was read (None: a newest word);
    None when nothing pins one. A flag that names another era than the tree is refused."""
    pinned: tuple[Version | None, str] | None = None
    if source_version is not None:
        text, where = source_version
        pinned = parse_pytorch_version(text, where), where
        if pytorch_version is not None:
            if isinstance(pytorch_version, NewestWord):
                flag, flag_era = str(pytorch_version), knowledge.eras[-1]
            else:
                flag, flag_era = str(pytorch_version), era_of(knowledge, pytorch_version)[0]
            if flag_era is not era_of(knowledge, pinned[0])[0]:
                raise ConfigurationError(
                    f"--pytorch-version {flag} contradicts the source tree, which is PyTorch {pinned[0]} ({where}).",
                    fix="leave --pytorch-version out (the source tree says what is built), or check out the "
                    "version you want.",
                )
    elif isinstance(pytorch_version, NewestWord):
        pinned = None, f"--pytorch-version {pytorch_version}"
    elif pytorch_version is not None:
        pinned = pytorch_version, "--pytorch-version"

    return pinned


def resolve_era(
    knowledge: Knowledge,
    facts: Facts | None,
    *,
    cuda: CudaChoice,
    vs: VsLine = VsLine.AUTO,
    pytorch_version: PytorchPin | None,
    source_version: tuple[str, str] | None,
    usable_cuda: UsableCuda | None = None,
    python: PythonRequest = AUTO,
    cmake: CmakeRequest | None = None,
) -> EraChoice:
    """The era of the plan and why, or an error naming the conflict and the nearest working choices.
    `facts` None: no machine to fit (fetch-deps), only the options and the source tree count."""
    pinned = _pinned_release(knowledge, pytorch_version, source_version)
    if pinned is not None:
        version, where = pinned
        era, warning = era_of(knowledge, version) if version is not None else (knowledge.eras[-1], None)
        found = obstacles(
            era, knowledge, facts, cuda, vs, python, release_key(version) if version else None, cmake=cmake
        )
        shown = str(version) if version is not None else era.newest
        if found:
            raise _refuse(
                f"PyTorch {shown} (from {where}) cannot be planned here",
                found,
                _fix(knowledge, facts, cuda, vs, (era, shown), source_version is not None, usable_cuda, python, cmake),
            )
        key = release_key(version) if version is not None else None
        return EraChoice(era, shown, where, (warning,) if warning else (), pinned=True, release=key)

    fitting = [
        era for era in reversed(knowledge.eras) if not obstacles(era, knowledge, facts, cuda, vs, python, cmake=cmake)
    ]
    if not fitting:
        release = cuda_release_of(cuda)
        asked = [f"CUDA {cuda}"] if release else []
        found = [
            o
            for era in knowledge.eras
            if (not release or release.version in era.cuda)
            for o in obstacles(era, knowledge, facts, cuda, vs, python, cmake=cmake)
        ]
        raise _refuse(
            "no PyTorch era fits " + (" and ".join(asked) or "this machine"),
            found,
            _fix(knowledge, facts, cuda, vs, None, False, usable_cuda, python, cmake),
        )
    constraints = [f"CUDA {cuda} (--cuda)"] if cuda_release_of(cuda) else []
    if facts is not None:
        constraints.append("the installed Pythons" if python == AUTO else f"Python {python.value} (--python)")
        if facts.os == Platform.WINDOWS and facts.visual_studio:
            constraints.append("the installed Visual Studio" if vs is VsLine.AUTO else f"Visual Studio {vs} (--vs)")
    if not constraints:
        return EraChoice(fitting[0], fitting[0].newest, "the newest era (nothing asked for or installed narrows it)")
    if facts is not None and usable_cuda is not None and cuda is CudaWord.AUTO and facts.cuda:
        with_cuda = [era for era in fitting if usable_cuda(era)]
        if with_cuda:
            era = with_cuda[0]
            return EraChoice(
                era, era.newest, f"the newest era that builds with an installed CUDA and fits {', '.join(constraints)}"
            )
    era = fitting[0]
    return EraChoice(era, era.newest, f"the newest era that fits {', '.join(constraints)}")
