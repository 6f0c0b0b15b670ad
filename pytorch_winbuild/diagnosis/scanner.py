"""A rule set made ready for scanning: its trigger patterns grouped by the literal each requires,
and one Hyperscan database of those literals and of the error grammar's.

Built once per rule set and shared by every log triaged with it (scanner_for caches it); apart
from log_scan.LogScan, which holds the state of one log, because this holds none.
"""

from __future__ import annotations

import functools
import re

import hyperscan

from pytorch_winbuild.diagnosis.blocks import CONTEXT_LINES, ERROR_LITERALS
from pytorch_winbuild.diagnosis.literals import pattern_literals
from pytorch_winbuild.diagnosis.rules import LinearPattern, Pattern, Rule

_Probe = tuple[int, Pattern]  # (rule index, one of the rule's patterns)


def _shared_literals(literals: set[str]) -> dict[str, str]:
    """Map each literal to the shortest other literal it contains, so one search serves both.

    Every line holding "No module named 'torch._C'" holds "No module named '", so searching
    for the second one alone finds the lines for both patterns.
    """
    by_length = sorted(literals, key=len)
    return {literal: next(other for other in by_length if other in literal) for literal in literals}


class Scanner:
    """The rules' trigger patterns grouped by the literal each one requires.

    `preceded_by` patterns are not searched for: they are checked only in the few lines before
    a trigger, which keeps common words ("multiprocessing", "setup.py") off the hot path.
    """

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        self.window = max([CONTEXT_LINES, *(rule.within_lines for rule in rules if rule.preceded_by)])
        self.gated: dict[str, list[_Probe]] = {}
        self.ungated: list[tuple[int, re.Pattern[str]]] = []
        self.ungated_linear: list[tuple[int, LinearPattern]] = []
        # Rules with an RE2 pattern: their time is counted against a budget.
        self.guarded = frozenset(
            index
            for index, rule in enumerate(rules)
            if any(isinstance(pattern, LinearPattern) for pattern in (*rule.patterns, *rule.preceded_by))
        )
        wanted: list[tuple[_Probe, tuple[str, ...]]] = []
        for index, rule in enumerate(rules):
            for pattern in rule.patterns:
                literals = pattern_literals(pattern)
                if literals is None:
                    if isinstance(pattern, LinearPattern):
                        self.ungated_linear.append((index, pattern))
                    else:
                        self.ungated.append((index, pattern))
                else:
                    wanted.append(((index, pattern), literals))
        shared = _shared_literals({literal for _, literals in wanted for literal in literals})
        for probe, literals in wanted:
            for literal in dict.fromkeys(shared[literal] for literal in literals):
                self.gated.setdefault(literal, []).append(probe)
        # One pass finds every line worth a closer look: Hyperscan matches all the literals (the
        # rules' and the error grammar's) at once on the log's bytes, about 5 times as fast as
        # RE2's alternation of them on decoded text. Patterns match within a line and a chunk ends
        # at a line end, so block mode needs no overlap between chunks.
        expressions = [literal.encode("utf-8") for literal in dict.fromkeys([*self.gated, *ERROR_LITERALS])]
        self.finder = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.finder.compile(expressions=expressions, elements=len(expressions), literal=True)


@functools.lru_cache(maxsize=8)
def scanner_for(rules: tuple[Rule, ...]) -> Scanner:
    return Scanner(rules)
