"""What stops an era from being planned here: the user's own choices conflicting (exit 2), or the machine lacking
something that installing removes (exit 3). The era solver (era_choice.py) and its fixes (era_fixes.py) ask the
same test, so a fix never leads back to the refusal it answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import PureWindowsPath
from typing import TYPE_CHECKING

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.choices import (
    CmakeRequest,
    CudaChoice,
    VsLine,
    cuda_release_of,
)
from pytorch_winbuild.knowledge.model import CudaRelease, Era, Knowledge, version_tuple
from pytorch_winbuild.knowledge.msvc import toolset_msc_ver
from pytorch_winbuild.knowledge.versions import release_key
from pytorch_winbuild.planning.installs import (
    NVTOOLSEXT,
    Install,
    nvtoolsext_install,
    python_install,
    visual_studio_install,
)
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.python_choice import (
    PythonRequest,
    python_need,
    python_problem,
)
from pytorch_winbuild.text import quoting_bat as bat

if TYPE_CHECKING:  # packaging is imported only when a version is parsed (knowledge/versions.py)
    from packaging.version import Version


@dataclass(frozen=True)
class Obstacle:
    """Why an era cannot be planned here. An obstacle with an `install` step is a fact of the machine (exit 3)
    that installing removes; the others are the user's own options conflicting with each other (exit 2)."""

    text: str
    install: Install | None = None

    @property
    def host(self) -> bool:
        return self.install is not None


# An era → the installed CUDA releases it can use, newest first (the plan's own test, passed in).
UsableCuda = Callable[[Era], tuple[str, ...]]


@dataclass(frozen=True)
class Question:
    """What the era solver asks of each era: these options (--cuda, --vs, --python, --cmake, and how messages name
    them) on this machine (`facts` None: on any machine, for fetch-deps, which needs no compiler). A fix asks it
    again with one choice changed (`but`), the others kept."""

    knowledge: Knowledge
    facts: Facts | None
    options: Options

    def but(
        self,
        *,
        cuda: CudaChoice | None = None,
        vs: VsLine | None = None,
        python: PythonRequest | None = None,
        cmake: CmakeRequest | None = None,
    ) -> Question:
        """The same question with the choices given changed (--cmake to `CmakeRequest()`: the plan's pick)."""
        options = self.options
        options = options if cuda is None else replace(options, cuda=cuda)
        options = options if vs is None else replace(options, vs=vs)
        options = options if python is None else replace(options, python=python)
        options = options if cmake is None else replace(options, cmake=cmake)
        return replace(self, options=options)


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


def _visual_studio(knowledge: Knowledge, lines: list[str], cuda: CudaChoice) -> Install:
    """The newest of these Visual Studio lines, as its installer names it, with its C++ tools, and the toolset
    component `cuda` needs when it refuses the line's newest toolset (CUDA 9.0 and Visual Studio 2017: 14.11)."""
    line = lines[-1]
    release = cuda_release_of(cuda)
    toolsets = sorted((t for t in knowledge.toolsets if t.product_line == line), key=lambda t: t.msc_ver)
    accepted = [t for t in toolsets if release is None or release.msc_range[0] <= t.msc_ver < release.msc_range[1]]
    component = accepted[-1] if accepted and accepted[-1] != toolsets[-1] else None
    installer = knowledge.products[line].installer
    text = installer + ("" if "C++" in installer else " with the C++ build tools")
    text += f" and its component '{component.component}'" if component else ""
    return visual_studio_install(knowledge, line, text, component)


def obstacles(question: Question, era: Era, pinned: tuple[int, ...] | None = None) -> list[Obstacle]:
    """What stops `era` from being planned with the question's options on its machine (on any machine when its
    `facts` are None: fetch-deps needs no compiler, so only the options count). `pinned` is the release asked for
    (else the era's newest); --cmake's version is checked against that release's own bounds (the plan brings a
    fitting CMake into the build venv otherwise)."""
    knowledge, facts, options = question.knowledge, question.facts, question.options
    cuda, vs, cmake = options.cuda, options.vs, options.cmake.asked
    found = []
    release = cuda_release_of(cuda)
    if release is not None and release.version not in era.cuda:
        found.append(
            Obstacle(f"PyTorch {era.name} does not build with CUDA {cuda} (it builds with {', '.join(era.cuda)})")
        )
    if facts is None:
        return found
    need = python_need(knowledge, era, pinned, ".".join(map(str, pinned or ())), cmake)
    problem = python_problem(era, facts, options.python, need, options.label("python"))
    if problem is not None:
        minor, hint = problem.install_minor, problem.install
        install = python_install(facts.os, minor, hint) if minor and hint else None
        found.append(Obstacle(problem.text, install=install))
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
                    install=nvtoolsext_install(
                        NVTOOLSEXT,
                        "NvToolsExt (the 'Nsight NVTX' / 'Visual Studio Integration' component of a CUDA 11.x "
                        "installer)",
                    ),
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
                    f"Visual Studio {vs} ({options.label('vs')}) is not installed (this machine has "
                    f"{', '.join(installed)})",
                    install=_visual_studio(knowledge, [vs], cuda),
                )
            )
        elif installed and not set(installed) & set(era.visual_studio):
            lines = _lines_for(knowledge, era, cuda) or list(era.visual_studio)
            found.append(
                Obstacle(
                    f"PyTorch {era.name}'s build knows Visual Studio {', '.join(era.visual_studio)}, and "
                    f"this machine has {', '.join(installed)}",
                    install=_visual_studio(knowledge, lines, cuda),
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
        install=nvtoolsext_install(fixed, f"NvToolsExt in {fixed} ({link})"),
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


def release_of(shown: str) -> tuple[int, ...] | None:
    """The release a refusal shows ("1.8.1"), as obstacles() takes it; None for "main"."""
    return None if shown == "main" else version_tuple(shown)


def installs(found: list[Obstacle]) -> list[Install]:
    """What to install against the machine's obstacles (every one of `found` has an install step), each once."""
    return list({o.install.text: o.install for o in found if o.install is not None}.values())


def toolset_fits(facts: Facts, line: str, cuda: CudaChoice) -> bool:
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


def checkout_ref(era: Era) -> str:
    """The git ref of the era's newest release: its tag, or the main branch for the newest era."""
    return era.newest if era.newest == "main" else f"v{era.newest}"


def closest(knowledge: Knowledge, era: Era, candidates: list[Era]) -> list[Era]:
    """Of `candidates`, the nearest older and the nearest newer than `era`, so the message names two, not all."""
    order = knowledge.eras.index(era)
    older = [e for e in candidates if knowledge.eras.index(e) < order]
    newer = [e for e in candidates if knowledge.eras.index(e) > order]
    return older[-1:] + newer[:1]
