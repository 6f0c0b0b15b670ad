"""Which PyTorch era a plan is for: solved from every constraint, not defaulted to the newest.

Precedence (issue 9): the source tree's own version > --pytorch-version > the newest era that fits
everything else that was asked for or is installed: --cuda, --vs, the host's Python and Visual
Studio, and (with --cuda auto) an installed CUDA that the era builds with. A pinned version whose
era conflicts with the rest is an error that names the conflict and the nearest choices that work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.knowledge.model import Era, Knowledge, version_tuple
from pytorch_winbuild.knowledge.versions import NEWEST_WORDS, parse_pytorch_version, release_key

if TYPE_CHECKING:  # packaging is imported only when a version is parsed (knowledge/versions.py)
    from packaging.version import Version


@dataclass(frozen=True)
class EraChoice:
    era: Era
    pytorch_version: str  # the pinned version, or the era's newest release for an unpinned plan
    source: str  # the constraint that chose it, for the plan's "Why"
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Obstacle:
    """Why an era cannot be planned here. `host` obstacles are facts of the machine (exit 3);
    the others are the user's own options conflicting with each other (exit 2)."""

    text: str
    host: bool


# An era → whether an installed CUDA can be used by it (the plan's own test, passed in).
CudaUsable = Callable[[Era], bool]


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


def obstacles(era: Era, knowledge: Knowledge, facts: Facts | None, cuda: str, vs: str) -> list[Obstacle]:
    """What stops `era` from being planned with these options on this machine (on any machine
    when `facts` is None: fetch-deps needs no compiler, so only the options count)."""
    found = []
    if cuda not in ("auto", "cpu") and cuda not in era.cuda:
        found.append(
            Obstacle(
                f"PyTorch {era.name} does not build with CUDA {cuda} (it builds with {', '.join(era.cuda)})", host=False
            )
        )
    if facts is None:
        return found
    python = version_tuple(facts.python.version)
    if not version_tuple(era.python[0]) <= python < version_tuple(era.python[1]):
        found.append(
            Obstacle(
                f"PyTorch {era.name} builds with Python {era.python[0]} up to, not including, "
                f"{era.python[1]}, and this Python is {facts.python.version}",
                host=True,
            )
        )
    if facts.os == "windows":
        if vs != "auto" and vs not in era.visual_studio:
            found.append(
                Obstacle(
                    f"PyTorch {era.name}'s build knows Visual Studio {', '.join(era.visual_studio)}, not {vs}",
                    host=False,
                )
            )
        installed = sorted({v.product_line for v in facts.visual_studio if vs in ("auto", v.product_line)})
        if installed and not set(installed) & set(era.visual_studio):
            found.append(
                Obstacle(
                    f"PyTorch {era.name}'s build knows Visual Studio {', '.join(era.visual_studio)}, and "
                    f"this machine has {', '.join(installed)}",
                    host=True,
                )
            )
    return found


def _eras_for_cuda(knowledge: Knowledge, cuda: str) -> str:
    eras = [era for era in knowledge.eras if cuda in era.cuda]
    return ", ".join(f"{era.name} (--pytorch-version {era.newest})" for era in eras) or "none"


def _nearest(knowledge: Knowledge, facts: Facts | None, cuda: str, vs: str, era: Era) -> str:
    """The choices closest to what was asked that do plan: other versions, other CUDA releases."""
    hints = []
    if cuda not in ("auto", "cpu"):
        hints.append(f"CUDA {cuda} is built by PyTorch {_eras_for_cuda(knowledge, cuda)}")
    if facts is None:
        hints.append(f"PyTorch {era.name} builds with CUDA {', '.join(era.cuda)}")
        return "; ".join(hints) + "."
        installed = [c.version for c in facts.cuda if c.version in era.cuda]
        if installed:
            hints.append(
                f"PyTorch {era.name} builds with the installed CUDA {', '.join(installed)} (--cuda {installed[-1]})"
            )
    fitting = [e for e in knowledge.eras if not obstacles(e, knowledge, facts, "auto", vs)]
    if fitting:
        newest = fitting[-1]
        hints.append(
            f"with this machine's Python {facts.python.version}"
            + (" and Visual Studio" if facts.os == "windows" else "")
            + f" the newest PyTorch that plans is {newest.name} (--pytorch-version {newest.newest})"
        )
    else:
        hints.append(
            f"no known PyTorch builds with Python {facts.python.version}"
            + (" and the installed Visual Studio" if facts.os == "windows" else "")
            + f"; PyTorch {era.name} needs Python {era.python[0]} up to, not including, {era.python[1]}"
        )
    return "; ".join(hints) + "."


def _refuse(what: str, found: list[Obstacle], fix: str) -> ConfigurationError | ToolchainError:
    error = ToolchainError if any(o.host for o in found) else ConfigurationError
    return error(f"{what}: {'; '.join(o.text for o in found)}.", fix=fix)


def resolve_era(
    knowledge: Knowledge,
    facts: Facts | None,
    *,
    cuda: str,
    vs: str = "auto",
    pytorch_version: str | None,
    source_version: tuple[str, str] | None,
    cuda_usable: CudaUsable | None = None,
) -> EraChoice:
    """The era of the plan and why, or an error naming the conflict and the nearest working choices.
    `facts` None: no machine to fit (fetch-deps), only the options and the source tree count."""
    pinned: tuple[Version | None, str] | None = None
    if source_version is not None:
        text, where = source_version
        pinned = parse_pytorch_version(text, where), where
        if pytorch_version and pytorch_version not in NEWEST_WORDS:
            asked_version = parse_pytorch_version(pytorch_version, "--pytorch-version")
            if era_of(knowledge, asked_version)[0] is not era_of(knowledge, pinned[0])[0]:
                raise ConfigurationError(
                    f"--pytorch-version {asked_version} contradicts the source tree, which is PyTorch "
                    f"{pinned[0]} ({where}).",
                    fix="leave --pytorch-version out (the source tree says what is built), or check out the "
                    "version you want.",
                )
    elif pytorch_version in NEWEST_WORDS:
        pinned = None, f"--pytorch-version {pytorch_version}"
    elif pytorch_version:
        pinned = parse_pytorch_version(pytorch_version, "--pytorch-version"), "--pytorch-version"

    if pinned is not None:
        version, where = pinned
        era, warning = era_of(knowledge, version) if version is not None else (knowledge.eras[-1], None)
        found = obstacles(era, knowledge, facts, cuda, vs)
        shown = str(version) if version is not None else era.newest
        if found:
            raise _refuse(
                f"PyTorch {shown} (from {where}) cannot be planned here",
                found,
                _nearest(knowledge, facts, cuda, vs, era),
            )
        return EraChoice(era, shown, where, (warning,) if warning else ())

    fitting = [era for era in reversed(knowledge.eras) if not obstacles(era, knowledge, facts, cuda, vs)]
    if not fitting:
        newest = knowledge.eras[-1]
        asked = [f"CUDA {cuda}"] if cuda not in ("auto", "cpu") else []
        found = [
            o
            for era in knowledge.eras
            if (not asked or cuda in era.cuda)
            for o in obstacles(era, knowledge, facts, cuda, vs)
        ]
        raise _refuse(
            "no PyTorch era fits " + (" and ".join(asked) or "this machine"),
            found,
            _nearest(knowledge, facts, cuda, vs, newest),
        )
    constraints = [f"CUDA {cuda} (--cuda)"] if cuda not in ("auto", "cpu") else []
    if facts is not None:
        constraints.append(f"Python {facts.python.version}")
        if facts.os == "windows" and facts.visual_studio:
            constraints.append("the installed Visual Studio" if vs == "auto" else f"Visual Studio {vs} (--vs)")
    if not constraints:
        return EraChoice(fitting[0], fitting[0].newest, "the newest era (nothing asked for or installed narrows it)")
    if facts is not None and cuda_usable is not None and cuda == "auto" and facts.cuda:
        with_cuda = [era for era in fitting if cuda_usable(era)]
        if with_cuda:
            era = with_cuda[0]
            return EraChoice(
                era, era.newest, f"the newest era that builds with an installed CUDA and fits {', '.join(constraints)}"
            )
    era = fitting[0]
    return EraChoice(era, era.newest, f"the newest era that fits {', '.join(constraints)}")
