"""Literal gates: the plain substrings of which every match of a regular expression holds one.

A reader of regular-expression syntax (Python's re, and the RE2 syntax it would misread), apart
from the scan that uses its answers: it knows nothing of logs. The scanner searches a log for
these literals with one Hyperscan pass, so a pattern only ever runs on the few lines holding one.
"""

from __future__ import annotations

import re

from pytorch_winbuild.diagnosis.rules import LinearPattern, Pattern

MIN_LITERAL_CHARS = 4

_QUANTIFIER = re.compile(r"[*+?]|\{(\d*)(?:,(\d*))?\}")
# What follows a backslash: a hex, unicode or named character, a group number, or one character.
_ESCAPE = re.compile(r"x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|\d+|.", re.DOTALL)
_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def _skip_class(pattern: str, start: int) -> int:
    """Index just past the character class that opens at `start`."""
    index = start + 1
    if index < len(pattern) and pattern[index] == "^":
        index += 1
    if index < len(pattern) and pattern[index] == "]":
        index += 1
    while index < len(pattern) and pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    return index + 1


def _skip_group(pattern: str, start: int) -> int:
    """Index just past the group that opens at `start` (nested groups and classes included)."""
    depth = 0
    index = start
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = _skip_class(pattern, index)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return index


def _split_top_level(pattern: str) -> list[str]:
    """The branches of a top-level alternation (one branch when there is none)."""
    branches, start, index = [], 0, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
        elif char == "[":
            index = _skip_class(pattern, index)
        elif char == "(":
            index = _skip_group(pattern, index)
        elif char == "|":
            branches.append(pattern[start:index])
            index += 1
            start = index
        else:
            index += 1
    branches.append(pattern[start:index])
    return branches


def _branch_literal(branch: str) -> str:
    """The longest run of plain characters that every match of `branch` contains."""
    runs: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(branch):
        char = branch[index]
        atom: str | None
        if char == "\\":
            escape = _ESCAPE.match(branch, index + 1)
            escaped = escape.group(0) if escape else ""
            # An escaped ASCII letter or digit starts a class, anchor, character code or group
            # reference; any other escaped character stands for itself.
            atom = escaped if len(escaped) == 1 and not (escaped.isascii() and escaped.isalnum()) else None
            index = escape.end() if escape else index + 1
        elif char == "[":
            atom, index = None, _skip_class(branch, index)
        elif char == "(":
            atom, index = None, _skip_group(branch, index)
        elif char in ".^$":
            atom, index = None, index + 1
        else:
            atom, index = char, index + 1
        quantifier = _QUANTIFIER.match(branch, index)
        if quantifier:
            index = quantifier.end()
            if index < len(branch) and branch[index] in "?+":  # lazy or possessive
                index += 1
        if atom is None:
            runs.append("".join(current))
            current = []
        elif quantifier is None:
            current.append(atom)
        else:
            text = quantifier.group(0)
            optional = text in ("*", "?") or (text.startswith("{") and quantifier.group(1) in ("", "0"))
            if not optional:
                current.append(atom)
            runs.append("".join(current))
            current = []
    runs.append("".join(current))
    return max(runs, key=len)


# RE2 syntax that _branch_literal would misread as literal text: \p{Greek}, \Q...\E, \x{1F600},
# [[:alpha:]], and a case-insensitive flag after the start ((?i) anywhere, (?Ui), (?i:...)).
_RE2_ONLY_SYNTAX = re.compile(r"\\[pPQC]|\\x\{|\[:|\(\?[a-zA-Z]*i")


def pattern_literals(pattern: Pattern) -> tuple[str, ...] | None:
    """required_literals for a compiled pattern; none for RE2 syntax the reader does not know."""
    if isinstance(pattern, LinearPattern) and _RE2_ONLY_SYNTAX.search(pattern.pattern):
        return None
    return required_literals(pattern.pattern)


def required_literals(pattern: str) -> tuple[str, ...] | None:
    """Substrings of which every match of `pattern` contains at least one, or None.

    None means the pattern must be searched as a regular expression (case-insensitive or
    verbose flags, or no plain run of MIN_LITERAL_CHARS characters): correct, but slower.
    """
    flags = _GLOBAL_FLAGS.match(pattern)
    if flags and ("i" in flags.group(1) or "x" in flags.group(1)):
        return None
    if flags:
        pattern = pattern[flags.end() :]
    literals = tuple(dict.fromkeys(_branch_literal(branch) for branch in _split_top_level(pattern)))
    if any(len(literal) < MIN_LITERAL_CHARS for literal in literals):
        return None
    return literals
