"""The user's choices as typed values, and the one place their text is read.

A flag, an invoke.yaml key, an INVOKE_WINBUILD_* variable and a nightly matrix entry all arrive as
text. The parsers here turn that text into these types once, at the edge (faces/request.py for the
command line and configuration, nightly/matrix.py for matrix entries); everything below compares
enum members and reads CudaRelease records, so case, spelling and validity are settled here.
The StrEnums' values are what the user types, so printing one prints the flag's value back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal, TypeVar

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.arch_list import Arch, NameTable, parse_arch_entry, split_entries
from pytorch_winbuild.knowledge.model import CudaRelease, Knowledge
from pytorch_winbuild.knowledge.versions import parse_pytorch_version

if TYPE_CHECKING:
    from typing import TypeAlias

    from packaging.version import Version

    PytorchPin: TypeAlias = "NewestWord | Version"  # the release asked for; None in Options: each era's newest

CUDA_CHOICES_HELP = "X.Y (e.g. 9.0), 'cpu' or 'auto'"


class CudaWord(StrEnum):
    """--cuda's two words: pick the newest installed CUDA the era builds with, or build without CUDA."""

    AUTO = "auto"
    CPU = "cpu"


CudaChoice = CudaWord | CudaRelease  # a release is one pytorch-winbuild knows (build_config/cuda.toml)


class VsLine(StrEnum):
    """--vs: a Visual Studio product line, or the best installed one (tests/test_house_rules.py checks these
    are build_config/visual_studio.toml's lines)."""

    AUTO = "auto"
    VS2015 = "2015"
    VS2017 = "2017"
    VS2019 = "2019"
    VS2022 = "2022"
    VS2026 = "2026"


class Generator(StrEnum):
    """--generator: Ninja (parallel CUDA compiles), the era's Visual Studio generator, or the plan's pick."""

    NINJA = "ninja"
    VS = "vs"
    AUTO = "auto"


class CompilerCacheChoice(StrEnum):
    """--compiler-cache: one of build_config/compiler_caches.toml's tools (checked as VsLine is), none, or the
    plan's pick."""

    CLCACHE = "clcache"
    CCACHE = "ccache"
    SCCACHE = "sccache"
    NONE = "none"
    AUTO = "auto"


class Mode(StrEnum):
    """--mode: which of the era's `commands` (build_config/eras.toml) runs."""

    INSTALL = "install"
    DEVELOP = "develop"
    WHEEL = "wheel"


class NewestWord(StrEnum):
    """--pytorch-version words that mean the newest era (kept, so messages repeat what was typed)."""

    LATEST = "latest"
    MAIN = "main"
    MASTER = "master"
    NIGHTLY = "nightly"


@dataclass(frozen=True)
class ArchRequest:
    """--arch-list as typed: its text (messages repeat it) and its entries, numbers parsed and names kept.

    A name ('Ampere') stands for different numbers in different releases, so the plan expands it with
    its release's table (knowledge/arch_list.py NameTable); everything else was read here."""

    text: str
    entries: tuple[Arch | str, ...]

    def __str__(self) -> str:
        return self.text


_W = TypeVar("_W", bound=StrEnum)


def _word(kind: type[_W], value: object, label: str, fix: str | None, what: str = "") -> _W:
    """A StrEnum member from the user's text, any case, spaces around it ignored (never a newline or other
    control character: those are refused, as hostile input); `what` says what it is not."""
    text = str(value).strip(" ").lower()
    try:
        return kind(text)
    except ValueError:
        what = what or f"one of {', '.join(member.value for member in kind)}"
        raise ConfigurationError(f"{label} {value!r} is not {what}.", fix=fix) from None


def parse_cuda(value: object, knowledge: Knowledge, label: str = "--cuda") -> CudaChoice:
    """'auto', 'cpu' (any case, spaces around them ignored) or a release build_config/cuda.toml lists, exactly."""
    text = str(value)
    if text.strip(" ").lower() in tuple(CudaWord):
        return CudaWord(text.strip(" ").lower())
    major, dot, minor = text.partition(".")
    if not (dot and major.isascii() and major.isdigit() and minor.isascii() and minor.isdigit()):
        raise ConfigurationError(
            f"{label} {value!r} is not {CUDA_CHOICES_HELP}.",
            fix=f"pass e.g. {label} 9.0, {label} cpu or {label} auto.",
        )
    return knowledge.cuda_release(text, label)


def parse_vs(value: object, label: str = "--vs") -> VsLine:
    lines = ", ".join(line for line in VsLine if line is not VsLine.AUTO)
    return _word(VsLine, value, label, f"pass one of {lines} or auto.", "a Visual Studio product line")


def parse_generator(value: object, label: str = "--generator") -> Generator:
    return _word(Generator, value, label, f"pass {label} ninja (parallel CUDA compiles) or {label} vs.")


def parse_compiler_cache(value: object, label: str = "--compiler-cache") -> CompilerCacheChoice:
    return _word(CompilerCacheChoice, value, label, None)


def parse_mode(value: object, label: str = "--mode") -> Mode:
    return _word(Mode, value, label, None)


def parse_toolset(value: object, label: str = "--toolset") -> str:
    """The short MSVC toolset version the user names ('14.11', '14.29'), exactly."""
    text = str(value)
    major, dot, minor = text.partition(".")
    if not (major == "14" and dot and minor.isascii() and minor.isdigit() and 1 <= len(minor) <= 2):
        raise ConfigurationError(
            f"{label} {value!r} is not an MSVC toolset version.",
            fix=f"pass the short form, e.g. {label} 14.11 or {label} 14.29.",
        )
    return text


def parse_pytorch_pin(value: object, label: str = "--pytorch-version") -> PytorchPin:
    """A release ('2.6', 'v1.0.1') or a word for the newest era ('main', 'latest')."""
    text = str(value)
    if text in tuple(NewestWord):
        return NewestWord(text)
    return parse_pytorch_version(text, label)


def parse_arch_request(value: object, names: NameTable, label: str = "--arch-list") -> ArchRequest:
    """Entries split once (';' or spaces, as PyTorch reads them); numbers parsed, names checked against
    `names` (every release's names: which release's table applies is the plan's decision)."""
    text = str(value)
    entries: list[Arch | str] = []
    for part in split_entries(text):
        entries.append(part if part in names.names else parse_arch_entry(part, names, label))
    if not entries:
        raise ConfigurationError(
            f"{label} is empty.", fix=f"pass your GPU's compute capability, e.g. {label} 8.6, or leave {label} out."
        )
    return ArchRequest(text, tuple(entries))


CMAKE_HELP = "auto, a CMake release X.Y or X.Y.Z from PyPI (e.g. 3.31), or the path of a cmake executable"
_CMAKE_RELEASE = re.compile(r"[0-9]{1,2}\.[0-9]{1,3}(?:\.[0-9]{1,3})?")


@dataclass(frozen=True)
class CmakeRequest:
    """--cmake: the plan's pick (auto), a release from PyPI for the build venv, or an installed cmake. A path's
    `version` is what that cmake answered (the edge asks it, or reads it from the facts file)."""

    kind: Literal["auto", "release", "path"] = "auto"
    value: str = ""
    version: str = ""
    label: str = "--cmake"

    @property
    def asked(self) -> CmakeRequest | None:
        """This request when the user made one (a release or a path); None for the plan's own pick."""
        return None if self.kind == "auto" else self

    @property
    def insisted(self) -> str | None:
        """The CMake version the user insists on (a release as typed, a path's answer); None for auto."""
        return {"auto": None, "release": self.value, "path": self.version}[self.kind]


def parse_cmake(value: object, label: str = "--cmake") -> CmakeRequest:
    """'auto' (any case), X.Y or X.Y.Z (ASCII digits), else a path; empty or control characters are refused."""
    text = str(value).strip(" ")
    if text.lower() == "auto":
        return CmakeRequest(label=label)
    if not text or any(not char.isprintable() for char in text):
        raise ConfigurationError(f"{label} {value!r} is not {CMAKE_HELP}.", fix=f"pass e.g. {label} 3.31, or auto.")
    if _CMAKE_RELEASE.fullmatch(text):
        return CmakeRequest("release", text, label=label)
    if re.fullmatch(r"[\d.]+", text):
        raise ConfigurationError(
            f"{label} {value!r} is neither a CMake release X.Y[.Z] nor a path.", fix=f"pass e.g. {label} 3.31."
        )
    return CmakeRequest("path", text, label=label)


def cuda_release_of(choice: CudaChoice) -> CudaRelease | None:
    """The release a --cuda names; None for auto and cpu."""
    return choice if isinstance(choice, CudaRelease) else None
