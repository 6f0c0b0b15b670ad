"""A fix is a promise: every way out of a refusal that changes the user's choices is planned before it is shown.

A refusal that offers such ways is raised as a `FixableError` carrying them as a `Fix`: text, and for each way
that only changes flags, the Options fields it changes. planning/plan.py's make_plan applies each of those ways
to the same request, every other choice kept, and shows it only when that plan succeeds; when none does, it
names the choices to leave out instead. A way that needs something installed or checked out first is shown as
it is: this machine cannot plan with what it does not have yet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pytorch_winbuild.errors import ConfigurationError, ToolchainError, WinbuildError
from pytorch_winbuild.knowledge.choices import CudaWord, VsLine, parse_pytorch_pin
from pytorch_winbuild.knowledge.model import Era, Knowledge
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.python_choice import PythonRequest


@dataclass(frozen=True)
class Way:
    """One change of the user's choices: how the fix shows it ("--python 3.9") and what it does to the options."""

    text: str
    applied: Callable[[Options], Options]

    def then(self, other: Way) -> Way:
        """Both changes, shown together ("--pytorch-version 1.13.1 --cuda cpu")."""
        return Way(f"{self.text} {other.text}", lambda options: other.applied(self.applied(options)))


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


def version_way(era: Era, note: str = "") -> Way:
    """--pytorch-version of `era`'s newest release."""
    pin = parse_pytorch_pin(era.newest)
    return Way(f"--pytorch-version {era.newest}{note}", lambda o: replace(o, pytorch_version=pin))
