"""Diagnosis rules: what a known failure looks like in a log, and what to do about it.

The rules are data (build_config/diagnosis.toml) so a new report from a user becomes a new
`[[rule]]` table, not new code. This module only loads and validates them: every problem is a
ConfigurationError naming the file, the rule id and the key, because a broken rule found at
load time is far cheaper than a rule that silently never fires.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config_files import config_dir, load_toml, optional, require, string_list
from .errors import ConfigurationError

RULES_FILE = "diagnosis.toml"

# When in a user's journey the problem shows up; the build report groups matches by it.
PHASES = ("install", "build", "import", "runtime")

DEFAULT_WITHIN_LINES = 30

_RULE_KEYS = {"id", "title", "patterns", "explanation", "fix", "source", "phase", "preceded_by", "within_lines"}
_ID_SHAPE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


@dataclass(frozen=True)
class Rule:
    """One known problem: the log lines that reveal it and the advice for it.

    `patterns` are matched against single log lines. A rule with `preceded_by` fires only when
    one of those patterns matched on the same line or up to `within_lines` lines earlier, which
    is how a rule says "a broken pipe *inside a DataLoader traceback*".
    """

    id: str
    title: str
    explanation: str
    fix: str
    source: str
    phase: str | None
    patterns: tuple[re.Pattern[str], ...]
    preceded_by: tuple[re.Pattern[str], ...] = ()
    within_lines: int = DEFAULT_WITHIN_LINES

    def to_dict(self) -> dict[str, Any]:
        """The advice part, as the build report stores it (patterns stay in the rules file)."""
        return {
            "id": self.id,
            "title": self.title,
            "phase": self.phase,
            "explanation": self.explanation,
            "fix": self.fix,
            "source": self.source,
        }


def _one_paragraph(text: str) -> str:
    """TOML multi-line strings wrap for the editor; output re-wraps for the terminal."""
    return " ".join(text.split())


def _compile(pattern: str, where: str) -> re.Pattern[str]:
    # MULTILINE because the scanner matches inside a chunk bounded to one line (pos/endpos):
    # '^' must then hold right after a newline, exactly as it does at the start of a lone line.
    try:
        return re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise ConfigurationError(f"{where}: invalid regular expression {pattern!r} ({exc}).", fix="correct the pattern; remember TOML literal strings ('...') keep backslashes as written.") from None


def _compile_list(table: dict[str, Any], key: str, where: str) -> tuple[re.Pattern[str], ...]:
    patterns = string_list(table, key, where)
    if not patterns:
        raise ConfigurationError(f"{where}.{key}: expected at least one pattern.")
    return tuple(_compile(pattern, f"{where}.{key}[{index}]") for index, pattern in enumerate(patterns))


def _text(table: dict[str, Any], key: str, where: str) -> str:
    value = _one_paragraph(require(table, key, str, where))
    if not value:
        raise ConfigurationError(f"{where}.{key}: must not be empty.")
    return value


def _parse_rule(table: Any, index: int, path: Path) -> Rule:
    if not isinstance(table, dict):
        raise ConfigurationError(f"{path}: rule[{index}]: expected a table, got {type(table).__name__}.")
    rule_id = table.get("id")
    where = f"{path}: rule '{rule_id}'" if isinstance(rule_id, str) and rule_id else f"{path}: rule[{index}]"
    rule_id = require(table, "id", str, where)
    if not _ID_SHAPE.fullmatch(rule_id):
        raise ConfigurationError(f"{where}.id: expected lowercase words joined by '-', got {rule_id!r}.")
    unknown = sorted(set(table) - _RULE_KEYS)
    if unknown:
        raise ConfigurationError(f"{where}: unknown key '{unknown[0]}'.", fix=f"use only {', '.join(sorted(_RULE_KEYS))}.")
    title = require(table, "title", str, where)
    if "\n" in title.strip() or not title.strip():
        raise ConfigurationError(f"{where}.title: expected one non-empty line.")
    phase = optional(table, "phase", str, where, None)
    if phase is not None and phase not in PHASES:
        raise ConfigurationError(f"{where}.phase: expected one of {', '.join(PHASES)}, got {phase!r}.")
    preceded_by: tuple[re.Pattern[str], ...] = ()
    if "preceded_by" in table:
        preceded_by = _compile_list(table, "preceded_by", where)
    within_lines = optional(table, "within_lines", int, where, DEFAULT_WITHIN_LINES)
    if "within_lines" in table and not preceded_by:
        raise ConfigurationError(f"{where}.within_lines: only meaningful together with 'preceded_by'.")
    if within_lines < 0:
        raise ConfigurationError(f"{where}.within_lines: expected a number of lines >= 0, got {within_lines}.")
    return Rule(
        id=rule_id,
        title=title.strip(),
        explanation=_text(table, "explanation", where),
        fix=_text(table, "fix", where),
        source=_text(table, "source", where),
        phase=phase,
        patterns=_compile_list(table, "patterns", where),
        preceded_by=preceded_by,
        within_lines=within_lines,
    )


def load_rules(path: Path | str = RULES_FILE) -> tuple[Rule, ...]:
    """Read and validate a rules file; a relative name is looked up in build_config/."""
    resolved = Path(path)
    if not resolved.is_absolute() and not resolved.exists():
        resolved = config_dir() / resolved
    data = load_toml(resolved)
    unknown = sorted(set(data) - {"rule"})
    if unknown:
        raise ConfigurationError(f"{resolved}: unknown top-level key '{unknown[0]}'.", fix="rules are [[rule]] tables.")
    tables = data.get("rule")
    if not isinstance(tables, list) or not tables:
        raise ConfigurationError(f"{resolved}: expected one or more [[rule]] tables.")
    rules = tuple(_parse_rule(table, index, resolved) for index, table in enumerate(tables))
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise ConfigurationError(f"{resolved}: rule '{rule.id}' is defined twice.")
        seen.add(rule.id)
    return rules


@functools.lru_cache(maxsize=1)
def default_rules() -> tuple[Rule, ...]:
    """The shipped rules, loaded and compiled once per process."""
    return load_rules(RULES_FILE)
