"""A fix is a promise: every way out of a refusal that changes the user's choices is planned before it is shown.

A refusal that offers such ways is raised as a `FixableError` carrying them as a `Fix`: text, and for each way
the Options fields it changes and what it installs. planning/plan.py's make_plan applies each of those ways
to the same request, every other choice kept, and shows it only when that plan succeeds; when none does, it
names the choices to leave out instead. A way that installs something is planned on the machine as it will be
once installed (planning/installs.py); a checkout of another release is shown as it is.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pytorch_winbuild.errors import ConfigurationError, ToolchainError, WinbuildError
from pytorch_winbuild.knowledge.choices import (
    CmakeRequest,
    CompilerCacheChoice,
    CudaWord,
    Generator,
    VsLine,
    parse_pytorch_pin,
)
from pytorch_winbuild.knowledge.model import Era, Knowledge
from pytorch_winbuild.planning.installs import Install
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.python_choice import AUTO, PythonRequest


def unchanged(options: Options) -> Options:
    """A way that changes no choice (it installs something)."""
    return options


@dataclass(frozen=True)
class Way:
    """One way out: how the fix shows it ("--python 3.9", "install CUDA 9.0"), what it does to the options, and
    what it installs (planning/installs.py: the machine it is planned on)."""

    text: str
    applied: Callable[[Options], Options]
    installs: tuple[Install, ...] = ()

    def then(self, other: Way) -> Way:
        """Both changes, shown together ("--pytorch-version 1.13.1 --cuda cpu")."""
        return Way(
            f"{self.text} {other.text}",
            lambda options: other.applied(self.applied(options)),
            self.installs + other.installs,
        )


def install_way(text: str, installs: Sequence[Install], applied: Callable[[Options], Options] = unchanged) -> Choices:
    """A way that installs something (and may change choices too), shown as its own sentence."""
    return Choices((Way(text, applied, tuple(installs)),), lead="", lead_after="")


@dataclass(frozen=True)
class Choices:
    """Ways shown together, `lead` + "A or B" ("pass --python 3.9 or --cuda cpu"); `lead_after` when other ways
    come first ("with what this machine has, pass ...")."""

    ways: tuple[Way, ...]
    lead: str = "pass "
    lead_after: str = "with what this machine has, pass "


@dataclass(frozen=True)
class Fix:
    """The ways out of a refusal, in order: text (install this, check out that) and Choices, joined by `joiner`."""

    items: tuple[str | Choices, ...]
    joiner: str = "; or "

    def text(self) -> str:
        parts: list[str] = []
        for item in self.items:
            if isinstance(item, str):
                parts.append(item)
            elif item.ways:
                parts.append((item.lead_after if parts else item.lead) + " or ".join(way.text for way in item.ways))
        return self.joiner.join(parts) + "." if parts else ""

    def ways(self) -> tuple[Way, ...]:
        return tuple(way for item in self.items if isinstance(item, Choices) for way in item.ways)

    def keeping(self, works: Callable[[Way], bool]) -> Fix:
        """This fix with only the ways for which `works` holds (each asked once)."""
        verdicts = {way: works(way) for way in self.ways()}
        return replace(
            self,
            items=tuple(
                item if isinstance(item, str) else replace(item, ways=tuple(way for way in item.ways if verdicts[way]))
                for item in self.items
            ),
        )


class FixableError(WinbuildError):
    """A refusal whose fix offers changes of the user's choices (`fix_ways`), which make_plan checks."""

    def __init__(self, message: str, *, fix: Fix) -> None:
        super().__init__(message, fix=fix.text() or None)
        self.fix_ways = fix

    def with_fix(self, fix: Fix) -> FixableError:
        return type(self)(self.message, fix=fix)


class FixableConfigurationError(FixableError, ConfigurationError):
    """The user's own choices conflict (exit 2)."""


class FixableToolchainError(FixableError, ToolchainError):
    """Something the build needs is missing here (exit 3)."""


def checked(error: FixableError, works: Callable[[Way], bool], drops: Sequence[tuple[Way, ...]]) -> FixableError:
    """`error` with only the ways that plan (`works`). When nothing is left to do, the choices to leave out take
    their place: the first level of `drops` (one choice, then two, ...) with a way that plans, each checked."""
    kept = error.fix_ways.keeping(works)
    if kept.text():
        return error.with_fix(kept)
    for level in drops:
        plans = tuple(way.text for way in level if works(way))
        if plans:
            return error.with_fix(Fix(plans))
    return error.with_fix(Fix(("this machine plans nothing even with every choice left out: run `invoke doctor`",)))


def python_way(request: PythonRequest) -> Way:
    """--python X.Y, or --python auto."""
    return Way(f"--python {request.shown}", lambda o: replace(o, python=request))


def cuda_way(knowledge: Knowledge, version: str | None) -> Way:
    """--cuda X.Y (a release of build_config/cuda.toml), or --cuda cpu for None."""
    if version is None:
        return Way(f"--cuda {CudaWord.CPU}", lambda o: replace(o, cuda=CudaWord.CPU))
    release = knowledge.cuda[version]
    return Way(f"--cuda {version}", lambda o: replace(o, cuda=release))


def vs_way(line: VsLine) -> Way:
    """--vs 2019, or --vs auto."""
    return Way(f"--vs {line}", lambda o: replace(o, vs=line))


def toolset_way(toolset: str) -> Way:
    """--toolset 14.29."""
    return Way(f"--toolset {toolset}", lambda o: replace(o, toolset=toolset))


def version_way(era: Era, note: str = "") -> Way:
    """--pytorch-version of `era`'s newest release."""
    pin = parse_pytorch_pin(era.newest)
    return Way(f"--pytorch-version {era.newest}{note}", lambda o: replace(o, pytorch_version=pin))


@dataclass(frozen=True)
class _Choice:
    """A choice the user can leave out: its Options field, its flag's word for the default (None: none, so a
    setting is removed instead), whether the options make it, and the options without it."""

    name: str
    word: str | None
    made: Callable[[Options], bool]
    dropped: Callable[[Options], Options]


_CHOICES = (
    _Choice(
        "pytorch_version", None, lambda o: o.pytorch_version is not None, lambda o: replace(o, pytorch_version=None)
    ),
    _Choice("cuda", "auto", lambda o: o.cuda is not CudaWord.AUTO, lambda o: replace(o, cuda=CudaWord.AUTO)),
    _Choice("python", "auto", lambda o: o.python != AUTO, lambda o: replace(o, python=AUTO)),
    _Choice("vs", "auto", lambda o: o.vs is not VsLine.AUTO, lambda o: replace(o, vs=VsLine.AUTO)),
    _Choice("toolset", None, lambda o: o.toolset is not None, lambda o: replace(o, toolset=None)),
    _Choice(
        "generator", "auto", lambda o: o.generator is not Generator.AUTO, lambda o: replace(o, generator=Generator.AUTO)
    ),
    _Choice(
        "compiler_cache",
        "auto",
        lambda o: o.compiler_cache is not CompilerCacheChoice.AUTO,
        lambda o: replace(o, compiler_cache=CompilerCacheChoice.AUTO),
    ),
    _Choice("arch_list", None, lambda o: o.arch_list is not None, lambda o: replace(o, arch_list=None)),
    _Choice("cmake", "auto", lambda o: o.cmake.asked is not None, lambda o: replace(o, cmake=CmakeRequest())),
)


def left_out(options: Options) -> list[tuple[Way, ...]]:
    """Ways that leave out the choices `options` make: one of them, then any two, and so on up to all of them
    ("leave --pytorch-version, --cuda and --python out")."""
    made = [choice for choice in _CHOICES if choice.made(options)]
    return [
        tuple(_leaving(options, chosen) for chosen in itertools.combinations(made, size))
        for size in range(1, len(made) + 1)
    ]


def leave_out_way(options: Options, name: str, why: str = "") -> Way:
    """The way that leaves out the one choice `name` (an Options field), `why` added to its text."""
    way = _leaving(options, [next(choice for choice in _CHOICES if choice.name == name)])
    return Way(way.text + why, way.applied)


def _leaving(options: Options, chosen: Sequence[_Choice]) -> Way:
    """Leaving out `chosen`, as the user does it: a flag is left out; a choice made by a setting (invoke.yaml,
    -f FILE, INVOKE_WINBUILD_*) is undone by its flag's default word, which wins over the setting ("pass --cuda
    auto"), or, without one, by removing the setting."""
    flags = [options.label(c.name) for c in chosen if options.label(c.name).startswith("--")]
    parts = [f"leave {_listed(flags)} out"] if flags else []
    for choice in chosen:
        label = options.label(choice.name)
        if label.startswith("winbuild.") and choice.word is not None:
            parts.append(f"pass --{choice.name.replace('_', '-')} {choice.word} (it overrides {label})")
        elif label.startswith("winbuild."):
            parts.append(f"remove {label} (from invoke.yaml, the -f file or INVOKE_WINBUILD_{choice.name.upper()})")
        elif not label.startswith("--"):  # a nightly matrix entry's key
            parts.append(f"remove {label}")
    drop = functools.reduce(lambda first, second: lambda o: second(first(o)), [c.dropped for c in chosen])
    return Way(" and ".join(parts), drop)


def _listed(flags: list[str]) -> str:
    return flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}"
