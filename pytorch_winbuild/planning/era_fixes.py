"""The ways out of a refusal of the era solver: what to install to keep what was asked, then the flags that plan with
what is installed, each checked with era_obstacles' test, the other choices kept. make_plan then plans each change
of flags whole before it is shown (planning/fixes.py).
"""

from __future__ import annotations

import functools

from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.choices import CmakeRequest, CudaWord, VsLine, cuda_release_of
from pytorch_winbuild.knowledge.model import Era, version_tuple
from pytorch_winbuild.planning.era_obstacles import (
    Obstacle,
    Question,
    UsableCuda,
    checkout_ref,
    closest,
    installs,
    obstacles,
    release_of,
    toolset_fits,
)
from pytorch_winbuild.planning.fixes import (
    Choices,
    Fix,
    FixableConfigurationError,
    FixableError,
    FixableToolchainError,
    Way,
    cuda_way,
    install_way,
    leave_out_way,
    python_way,
    unchanged,
    version_way,
    vs_way,
)
from pytorch_winbuild.planning.gpu_plan import cuda_with_driver
from pytorch_winbuild.planning.installs import Install
from pytorch_winbuild.planning.python_choice import AUTO, PythonRequest, installed, unusable


def era_fix(question: Question, asked: tuple[Era, str] | None, tree: bool, usable_cuda: UsableCuda | None) -> Fix:
    """The ways out of a refusal, each checked with `obstacles` with the other choices kept, so none leads back
    here (make_plan then plans each change of flags whole): what to install to keep what was asked, then the flags
    that plan with what is installed. `asked` is the pinned era and the version shown; `tree` says the source
    tree pins it (so --pytorch-version cannot change it)."""
    knowledge, facts, options = question.knowledge, question.facts, question.options
    cuda, vs, python = options.cuda, options.vs, options.python
    release = cuda_release_of(cuda)
    missing_cuda = _missing_cuda(question)
    ways: list[str | Choices] = []
    if asked is not None and facts is not None:
        era, shown = asked
        found = obstacles(question, era, release_of(shown))
        if all(o.host for o in found):
            needed = [*installs(found), *missing_cuda]
            ways.append(install_way(f"to build PyTorch {shown} here, install {_named(needed)}", needed))
    if release and facts is not None and not tree and (asked is None or release.version not in asked[0].cuda):
        ways += _install_for_cuda(question, asked is not None, missing_cuda)

    kept: list[Way] = []  # flags that keep the asked CUDA, which may still have to be installed
    flags: list[Way] = []
    if options.cmake.asked is not None and asked is not None and facts is not None:
        era, shown = asked
        if not obstacles(question.but(cmake=CmakeRequest()), era, release_of(shown)):
            why = ", and the plan installs a CMake inside those bounds into the build venv"
            ways.append(Choices((leave_out_way(options, "cmake", why),), lead="", lead_after=""))
    if python != AUTO and facts is not None:
        eras = [asked[0]] if asked is not None else list(knowledge.eras)
        flags += _python_flags(question, facts, eras, release_of(asked[1]) if asked else None)
    if asked is not None:
        era = asked[0]
        fitting = closest(
            knowledge,
            era,
            [e for e in knowledge.eras if e is not era and not obstacles(question, e, release_of(e.newest))],
        )
        if tree:
            ways += [
                f"check out {checkout_ref(e)} in the source tree (--ref {checkout_ref(e)} with --repo)"
                + (f" and install CUDA {cuda}" if missing_cuda else "")
                + f": PyTorch {e.name} plans here"
                for e in fitting
            ]
        elif vs is VsLine.AUTO or facts is None or toolset_fits(facts, vs, cuda):  # --vs's toolsets stay
            kept += [version_way(e, f" (PyTorch {e.name})") for e in fitting]
    if vs is not VsLine.AUTO and facts is not None and facts.os == Platform.WINDOWS:
        kept += _vs_ways(question, facts, asked)
    if kept and missing_cuda:
        lead = f"install CUDA {cuda} and pass "
        with_cuda = tuple(Way(way.text, way.applied, (*way.installs, *missing_cuda)) for way in kept)
        ways.append(Choices(with_cuda, lead=lead, lead_after=lead))
    else:
        flags += kept
    if release:
        other, install = _other_cuda(question, asked, usable_cuda)
        flags += other
        ways += [install] if install else []
    if flags:
        ways.append(Choices(tuple(flags)))
    if not ways and facts is not None:
        ways = _without_conflicts(question, facts, asked, tree)
    if not ways and facts is not None:
        ways = list(_install_for_newest(question))
    return Fix(tuple(ways))


def _vs_ways(question: Question, facts: Facts, asked: tuple[Era, str] | None) -> list[Way]:
    """--vs with another installed Visual Studio whose toolsets the CUDA accepts and that plans the era(s)."""
    eras = [asked[0]] if asked is not None else list(question.knowledge.eras)
    cuda = question.options.cuda
    lines = sorted({v.product_line for v in facts.visual_studio} - {question.options.vs})
    return [
        vs_way(VsLine(line))
        for line in lines
        if toolset_fits(facts, line, cuda) and any(not obstacles(question.but(vs=VsLine(line)), e) for e in eras)
    ]


def _missing_cuda(question: Question) -> list[Install]:
    """The asked CUDA, when the machine does not have it."""
    release, facts = cuda_release_of(question.options.cuda), question.facts
    if release is None or facts is None or facts.cuda_by_version(release.version) is not None:
        return []
    return [cuda_with_driver(question.knowledge, facts, release.version)]


def _named(installs: list[Install]) -> str:
    return " and ".join(install.text for install in installs)


def _install_for_cuda(question: Question, pinned: bool, missing_cuda: list[Install]) -> list[str | Choices]:
    """What to install to build with the asked CUDA: for the newest era that builds with it once installed (none
    when one plans as it is: a --pytorch-version names it)."""
    cuda = question.options.cuda
    for era in reversed(question.knowledge.eras):
        found = obstacles(question, era)
        if found and all(o.host for o in found):
            needed = [*installs(found), *missing_cuda]
            version = version_way(era)
            text = (
                f"to build with CUDA {cuda}, install {_named(needed)}"
                + (f" and pass {version.text}" if pinned else "")
                + f" (PyTorch {era.name} is the newest release that builds with CUDA {cuda})"
            )
            return [install_way(text, needed, version.applied if pinned else unchanged)]
        if not found:
            break
    return []


def _other_cuda(
    question: Question, asked: tuple[Era, str] | None, usable_cuda: UsableCuda | None
) -> tuple[list[Way], Choices | None]:
    """--cuda ways that plan the era(s) in question with another CUDA (installed and usable, newest first) or
    none, and, when only an uninstalled CUDA fits, the way to install it."""
    knowledge, facts = question.knowledge, question.facts
    eras = [asked[0]] if asked is not None else list(knowledge.eras)
    fits = [e for e in eras if not obstacles(question.but(cuda=CudaWord.CPU), e)]
    install = None
    if facts is None:
        versions = list(reversed(fits[0].cuda)) if fits else []
    else:
        usable = {v for e in fits for v in (usable_cuda(e) if usable_cuda else ())}
        versions = sorted(usable, key=version_tuple, reverse=True)
        to_install = [v for e in fits for v in e.cuda if not obstacles(question.but(cuda=knowledge.cuda[v]), e)]
        if to_install and not versions:
            newest = max(to_install, key=version_tuple)
            other = cuda_way(knowledge, newest)
            install = install_way(
                f"install CUDA {newest} and pass {other.text}",
                [cuda_with_driver(knowledge, facts, newest)],
                other.applied,
            )
    ways = [cuda_way(knowledge, v) for v in versions] + ([cuda_way(knowledge, None)] if fits else [])
    return ways, install


def _python_flags(
    question: Question, facts: Facts, eras: list[Era], release: tuple[int, ...] | None = None
) -> list[Way]:
    """--python choices that plan one of `eras` (the pinned `release`, when one is) with the other choices kept,
    each checked: installed releases, newest first, else auto (which fetches one on Windows)."""
    minors = sorted({p.minor for p in installed(facts) if unusable(p) is None}, key=version_tuple, reverse=True)
    fits = [
        minor
        for minor in minors
        if any(not obstacles(question.but(python=PythonRequest("release", minor)), e, release) for e in eras)
    ]
    if fits:
        return [python_way(PythonRequest("release", minor)) for minor in fits[:2]]
    return [python_way(AUTO)] if any(not obstacles(question.but(python=AUTO), e, release) for e in eras) else []


def _install_for_newest(question: Question) -> list[str | Choices]:
    """Nothing fits and no flag helps (no usable Python on Linux, say): what to install for the newest era that
    installing alone makes plannable."""
    for era in reversed(question.knowledge.eras):
        found = obstacles(question, era)
        if found and all(o.host for o in found):
            needed = installs(found)
            return [install_way(f"install {_named(needed)} (for PyTorch {era.name})", needed)]
    return []


def _without_conflicts(
    question: Question, facts: Facts, asked: tuple[Era, str] | None, tree: bool
) -> list[str | Choices]:
    """When no single flag helps (--vs and the version both conflict): what to install for the asked era with --vs
    left out, and the nearest era that plans with what is installed, as one set of flags."""
    knowledge, cuda, vs = question.knowledge, question.options.cuda, question.options.vs
    ways: list[str | Choices] = []
    if asked is not None:
        found = obstacles(question.but(vs=VsLine.AUTO), asked[0], release_of(asked[1]))
        if found and all(o.host for o in found):
            needed = [*installs(found), *_missing_cuda(question)]
            leave = leave_out_way(question.options, "vs")
            text = f"to build PyTorch {asked[1]} here, {leave.text} and install {_named(needed)}"
            ways.append(install_way(text, needed, leave.applied))
    plain = question.but(cuda=CudaWord.CPU, vs=VsLine.AUTO)
    fitting = [e for e in knowledge.eras if not obstacles(plain, e)]
    if asked is not None and asked[0] in fitting:
        era: Era | None = asked[0]
    else:
        era = next(iter((closest(knowledge, asked[0], fitting) if asked is not None else fitting)[-1:]), None)
    if era is not None and not (tree and asked is not None and era is not asked[0]):
        changes = [] if asked is not None and era is asked[0] else [version_way(era)]
        if cuda is not CudaWord.CPU:
            changes.append(cuda_way(knowledge, None))
        if vs is not VsLine.AUTO:
            changes.append(vs_way(VsLine.AUTO))
        together = functools.reduce(Way.then, changes)
        lead = "with what this machine has, pass "
        ways.append(Choices((together,), lead=lead, lead_after=lead))
    return ways


def refuse(what: str, found: list[Obstacle], fix: Fix) -> FixableError:
    error = FixableToolchainError if any(o.host for o in found) else FixableConfigurationError
    return error(f"{what}: {'; '.join(dict.fromkeys(o.text for o in found))}.", fix=fix)
