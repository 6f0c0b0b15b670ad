"""Which PyTorch era a plan is for: solved from every constraint, not defaulted to the newest.

Precedence (issue 9): the source tree's own version > --pytorch-version > the newest era that fits
everything else that was asked for or is installed: --cuda, --vs, the host's Python and Visual
Studio, and (with --cuda auto) an installed CUDA that the era builds with. A pinned version whose
era conflicts with the rest is an error that names the conflict, the nearest choices that work (each
checked with the same test, the other choices kept) and what to install to keep what was asked.
A newest word (main, latest) pins the newest era, so it contradicts an older source tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.choices import CudaWord, NewestWord, VsLine, cuda_release_of
from pytorch_winbuild.knowledge.model import Era, Knowledge
from pytorch_winbuild.knowledge.versions import parse_pytorch_version, release_key
from pytorch_winbuild.planning.era_fixes import era_fix, refuse
from pytorch_winbuild.planning.era_obstacles import Question, UsableCuda, era_of, obstacles
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.python_choice import AUTO

if TYPE_CHECKING:  # packaging is imported only when a version is parsed (knowledge/versions.py)
    from packaging.version import Version


@dataclass(frozen=True)
class EraChoice:
    era: Era
    pytorch_version: str  # the pinned version, or the era's newest release for an unpinned plan
    source: str  # the constraint that chose it, for the plan's "Why"
    warnings: tuple[str, ...] = ()
    pinned: bool = False  # the tree or --pytorch-version named it (a release, or a newest word such as main)
    release: tuple[int, int, int] | None = None  # the release pinned (None: unpinned, or a newest word)


def _pinned_release(
    knowledge: Knowledge, options: Options, source_version: tuple[str, str] | None
) -> tuple[Version | None, str] | None:
    """The release the source tree or --pytorch-version pins, and where that was read (None: a newest word);
    None when nothing pins one. A flag that names another era than the tree is refused."""
    pytorch_version, label = options.pytorch_version, options.label("pytorch_version")
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
                    f"{label} {flag} contradicts the source tree, which is PyTorch {pinned[0]} ({where}).",
                    fix=f"leave {label} out (the source tree says what is built), or check out the version you want.",
                )
    elif isinstance(pytorch_version, NewestWord):
        pinned = None, f"{label} {pytorch_version}"
    elif pytorch_version is not None:
        pinned = pytorch_version, label

    return pinned


def resolve_era(
    question: Question, source_version: tuple[str, str] | None, usable_cuda: UsableCuda | None = None
) -> EraChoice:
    """The era of the plan and why, or an error naming the conflict and the nearest working choices.
    The question's `facts` None: no machine to fit (fetch-deps), only the options and the source tree count."""
    knowledge, facts, options = question.knowledge, question.facts, question.options
    cuda, vs, python = options.cuda, options.vs, options.python
    pinned = _pinned_release(knowledge, options, source_version)
    if pinned is not None:
        version, where = pinned
        era, warning = era_of(knowledge, version) if version is not None else (knowledge.eras[-1], None)
        found = obstacles(question, era, release_key(version) if version else None)
        shown = str(version) if version is not None else era.newest
        if found:
            raise refuse(
                f"PyTorch {shown} (from {where}) cannot be planned here",
                found,
                era_fix(question, (era, shown), source_version is not None, usable_cuda),
            )
        key = release_key(version) if version is not None else None
        return EraChoice(era, shown, where, (warning,) if warning else (), pinned=True, release=key)

    fitting = [era for era in reversed(knowledge.eras) if not obstacles(question, era)]
    if not fitting:
        release = cuda_release_of(cuda)
        asked = [f"CUDA {cuda}"] if release else []
        found = [
            o
            for era in knowledge.eras
            if (not release or release.version in era.cuda)
            for o in obstacles(question, era)
        ]
        raise refuse(
            "no PyTorch era fits " + (" and ".join(asked) or "this machine"),
            found,
            era_fix(question, None, False, usable_cuda),
        )
    constraints = [f"CUDA {cuda} ({options.label('cuda')})"] if cuda_release_of(cuda) else []
    if facts is not None:
        constraints.append(
            "the installed Pythons" if python == AUTO else f"Python {python.value} ({options.label('python')})"
        )
        if facts.os == Platform.WINDOWS and facts.visual_studio:
            constraints.append(
                "the installed Visual Studio" if vs is VsLine.AUTO else f"Visual Studio {vs} ({options.label('vs')})"
            )
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
