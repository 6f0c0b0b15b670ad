"""What every step of one plan reads and writes, as one value: the knowledge, the machine's facts, the request's
options, the era the solver chose, and the plan being built (its decisions, warnings and changes). The concern
modules take it first, so their signatures name only what is particular to each step."""

from __future__ import annotations

from dataclasses import dataclass

from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.knowledge.model import Era, Knowledge
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.plan_model import PlanBuilder


@dataclass(frozen=True, slots=True)
class PlanContext:
    knowledge: Knowledge
    facts: Facts
    options: Options
    era: Era
    plan: PlanBuilder
    release: str  # the PyTorch release the plan builds (a version, or main)
