"""Find the first real error in a build log, and which diagnosis rules explain it.

A failed PyTorch build ends with "ninja: build stopped: subcommand failed." thousands of lines
after the line that matters. Triage reports the first error block instead (a Ninja FAILED block
with the compiler error beneath it, a CMake Error with its message, a Python traceback with its
exception, an MSVC/nvcc/gcc/linker error line) and every rule of build_config/diagnosis.toml
whose patterns occur in the log.

Logs of a full build reach hundreds of MB, so the file is read in chunks of whole lines and
searched with str.find for a literal that each pattern requires; a regular expression only ever
runs on the few lines that contain its literal. Nothing holds more than one chunk at a time.

Rules from a file other than the shipped one run on RE2 (diagnosis.LinearPattern), in time
linear in the log; a costly one may still take microseconds per character, so each such rule
has a time budget and is skipped, with a warning, once it exceeds it.

Log text is untrusted: `to_text` and `to_json` neutralise terminal escape sequences and control
characters (terminal_text.py), while the result's data keeps the text as the log had it.
"""

from __future__ import annotations

import codecs
import functools
import re
import textwrap
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import re2

from pytorch_winbuild.diagnosis.rules import LinearPattern, Pattern, PatternTooSlow, Rule, default_rules
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.text.redact import redact_text
from pytorch_winbuild.text.terminal_text import terminal_json, terminal_safe

CHUNK_CHARS = 4 * 1024 * 1024
CONTEXT_LINES = 3
MAX_BLOCK_LINES = 40  # lines of the first error block kept for the report
MAX_BLOCK_SCAN = 2000  # a block longer than this is cut (a runaway template error)
MAX_LINE_CHARS = 1000  # Ninja prints whole compiler command lines; keep reports readable
MIN_LITERAL_CHARS = 4
# Time a rule with RE2 patterns may take: a grace period, then a share per MB of log read so far.
# An ordinary pattern needs a few hundredths of a second per MB; one that costs more than
# USER_RULE_SECONDS_PER_MB (10 MB/s) is skipped once it is past the grace period.
USER_RULE_GRACE_SECONDS = 2.0
USER_RULE_SECONDS_PER_MB = 0.1

# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogLine:
    """A line of the log with its 1-based line number."""

    number: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "text": self.text}


@dataclass(frozen=True)
class FirstError:
    """The first error block of a log.

    `kind` says which tool's error format was recognised: ninja, cmake, traceback, exception,
    vcvars, msvc, link, nvcc, compiler (gcc/clang/nvcc device code), tool (`tool: error:`, pip's
    `ERROR:`), shell (command not found), make, cuda (THCudaCheck). `summary` is the single most
    telling line: the compiler error under a Ninja FAILED line, the exception of a traceback,
    the message of a CMake Error.
    """

    kind: str
    line_number: int
    end_line_number: int
    summary: LogLine
    lines: tuple[LogLine, ...]
    omitted_lines: int
    context_before: tuple[LogLine, ...]
    context_after: tuple[LogLine, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "line_number": self.line_number,
            "end_line_number": self.end_line_number,
            "summary": self.summary.to_dict(),
            "lines": [line.to_dict() for line in self.lines],
            "omitted_lines": self.omitted_lines,
            "context_before": [line.to_dict() for line in self.context_before],
            "context_after": [line.to_dict() for line in self.context_after],
        }


@dataclass(frozen=True)
class RuleMatch:
    """A diagnosis rule that fired: its first matching line and on how many lines it fired."""

    rule: Rule
    line: LogLine
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {**self.rule.to_dict(), "line": self.line.to_dict(), "count": self.count}


@dataclass(frozen=True)
class TriageResult:
    """What the build report stores and `invoke diagnose` prints."""

    source: str
    line_count: int
    first_error: FirstError | None
    matches: tuple[RuleMatch, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())  # rules skipped for taking too long

    def to_dict(self) -> dict[str, Any]:
        data = {
            "source": self.source,
            "line_count": self.line_count,
            "first_error": self.first_error.to_dict() if self.first_error else None,
            "matches": [match.to_dict() for match in self.matches],
        }
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data

    def to_json(self) -> str:
        """JSON as the build report stores it; DEL and C1 controls are \\u-escaped like C0."""
        return terminal_json(self.to_dict(), indent=2)

    def to_text(self, width: int = 100) -> str:
        """The human summary: the first error block, then each matching rule's advice.

        Safe to print: escape sequences from the log are removed, other control characters
        shown as \\xNN (terminal_text.terminal_safe).
        """

        def safe(text: str) -> str:
            return terminal_safe(text, keep="\t")

        out = [f"{terminal_safe(self.source, keep='')}: {self.line_count} lines"]
        out += [f"Warning: {safe(warning)}" for warning in self.warnings]
        if self.first_error is None:
            out.append("No error block found.")
        else:
            error = self.first_error
            out += ["", f"First error (line {error.line_number}, {error.kind}):"]
            # The widest line number shown. A block that ends the log has no context after it.
            last_shown = error.context_after[-1].number if error.context_after else error.end_line_number
            digits = len(str(last_shown))

            def show(lines: tuple[LogLine, ...], marker: str) -> None:
                out.extend(f" {marker} {line.number:>{digits}} | {safe(line.text)}" for line in lines)

            show(error.context_before, " ")
            show(error.lines, ">")
            if error.omitted_lines:
                out.append(f"   {'':>{digits}} | ... {error.omitted_lines} more lines of this block ...")
            show(error.context_after, " ")
            out.append(f"  Summary (line {error.summary.number}): {safe(error.summary.text.strip())}")
        if not self.matches:
            out += ["", "No diagnosis rule matched."]
        for match in self.matches:
            rule = match.rule
            times = f" ({match.count} lines)" if match.count > 1 else ""
            out += [
                "",
                f"[{rule.id}] {safe(rule.title)}",
                f"  line {match.line.number}{times}: {safe(match.line.text.strip())}",
            ]
            for label, text in (("Why", rule.explanation), ("Fix", rule.fix), ("Source", rule.source)):
                out.append(
                    textwrap.fill(safe(text), width=width, initial_indent=f"  {label}: ", subsequent_indent="    ")
                )
        return terminal_safe("\n".join(out))  # a no-op, unless a line above forgot safe()


# --------------------------------------------------------------------------------------------
# Literal gates: a plain substring every match of a pattern must contain
# --------------------------------------------------------------------------------------------

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


def _gate(pattern: Pattern) -> tuple[str, ...] | None:
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


# --------------------------------------------------------------------------------------------
# The error grammar of the tools a PyTorch build runs
# --------------------------------------------------------------------------------------------

_ERROR_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("ninja", r"^\s*FAILED: "),
        ("cmake", r"^\s*CMake Error\b"),
        ("traceback", r"^\s*Traceback \(most recent call last\):"),
        ("vcvars", r"^\s*\[ERROR:[^\]]+\]"),
        (
            "link",
            r"\b(?:fatal )?error LNK\d{4}\b|\bundefined reference to\b|\bld(?:\.\w+)?: cannot find "
            r"|\bmultiple definition of\b",
        ),
        ("msvc", r"\b(?:fatal )?error (?:C|D|U|MSB)\d{4}\b|\bCommand line error D\d{4}\b"),
        ("nvcc", r"\bnvcc (?:fatal|error)\s*:"),
        (
            "compiler",
            r"^\s*\S.*?:\d+(?::\d+)?: (?:fatal )?error: |\(\d+(?:,\d+)?\): (?:catastrophic )?error(?: #\d+(?:-D)?)?: ",
        ),
        ("tool", r"^\s*(?:[\w.+-]+: )?(?:fatal )?error: |^\s*ninja: fatal: |^\s*ERROR: "),
        ("shell", r"is not recognized as an internal or external command|: command not found\s*$"),
        ("make", r"^\s*(?:g?make|mingw32-make|nmake)(?:\[\d+\])?: \*\*\* "),
        ("cuda", r"\bTHCudaCheck FAIL\b"),
        ("exception", r"^\s*(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)(?::\s|:?\s*$)"),
    )
)

# Every line some kind above recognises contains one of these.
_ERROR_LITERALS = (
    "FAILED: ",
    "Traceback (most recent",
    "rror",  # error, Error, fatal error, make's "Error 1", THCudaCheck's "error="
    "RROR",
    "Exception",
    "fatal",  # nvcc fatal, ninja: fatal
    "undefined reference to",
    "cannot find ",
    "multiple definition of",
    "is not recognized as an internal",
    "command not found",
    ": *** ",  # make: *** No rule to make target
)

_NINJA_BLOCK_END = re.compile(r"^\s*(?:\[\d+/\d+\] |ninja: build stopped|FAILED: )")
_CMAKE_CALL_STACK = re.compile(r"^\s*Call Stack \(most recent call first\):")
# Blocks whose extent is their indentation: the header, then lines indented deeper.
_INDENTED_KINDS = ("cmake", "traceback", "exception")


# pip announces a failed sub-build with these lines and prints the sub-build's own output (the
# real first error) below them, so they never count as the first error themselves.
_WRAPPER_LINES = re.compile(
    r"^\s*(?:error: (?:subprocess-exited-with-error|metadata-generation-failed)|ERROR: Failed building wheel for )"
)


def classify(line: str) -> str | None:
    """The kind of error this line starts, or None for an ordinary line."""
    if _WRAPPER_LINES.search(line):
        return None
    for kind, pattern in _ERROR_KINDS:
        if pattern.search(line):
            return kind
    return None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _clean(text: str) -> str:
    """A line as it may appear in a report: no credentials, bounded length."""
    text = redact_text(text.rstrip())
    if len(text) > MAX_LINE_CHARS:
        text = f"{text[:MAX_LINE_CHARS]} ... [{len(text) - MAX_LINE_CHARS} more characters]"
    return text


class _BlockCollector:
    """Takes the lines from the first error on and decides where its block ends.

    Fed one line at a time (a block can straddle two chunks); `feed` returns False once the
    block and the context after it are complete.
    """

    def __init__(self, kind: str, first: LogLine, before: list[LogLine]) -> None:
        self.kind = kind
        self.first = first
        self.before = before
        self.base_indent = _indent(first.text)
        self.kept: list[LogLine] = []
        self.scanned = 0
        self.last_number = first.number
        # The telling line: the error beneath a Ninja FAILED line and the exception closing a
        # traceback are found later; every other block is summed up by its first line.
        self.summary: LogLine | None = None if kind in ("ninja", "traceback") else first
        self.summary_more = ""  # the message under a header that ends in ':'
        self.pending_blank: list[LogLine] = []
        self.after: list[LogLine] = []
        self.in_block = True
        self._take(first)

    def feed(self, number: int, text: str) -> bool:
        line = LogLine(number, text)
        if not self.in_block:
            self.after.append(line)
            return len(self.after) < CONTEXT_LINES
        if self.scanned >= MAX_BLOCK_SCAN or not self._belongs(text):
            self.in_block = False
            self.after, self.pending_blank = self.pending_blank, []
            return self.feed(number, text)
        if not text.strip() and self.kind in _INDENTED_KINDS:
            self.pending_blank.append(line)  # part of the block only if an indented line follows
            return True
        if self.kind == "traceback" and self.summary is None and _indent(text) <= self.base_indent:
            self.summary = line  # the exception line that closes the frames
        for blank in self.pending_blank:
            self._take(blank)
        self.pending_blank = []
        self._take(line)
        return True

    def _belongs(self, text: str) -> bool:
        """Does this line, following the block so far, still belong to it?"""
        if self.kind == "ninja":
            return not _NINJA_BLOCK_END.match(text)
        if self.kind not in _INDENTED_KINDS:
            return False
        if not text.strip() or _indent(text) > self.base_indent:
            return True
        if self.kind == "cmake":
            return bool(_CMAKE_CALL_STACK.match(text))
        return self.kind == "traceback" and self.summary is None

    def _take(self, line: LogLine) -> None:
        self.scanned += 1
        self.last_number = line.number
        if len(self.kept) < MAX_BLOCK_LINES:
            self.kept.append(line)
        summary = self.summary
        if summary is None:
            if self.kind == "ninja" and self.scanned > 2 and classify(line.text) not in (None, "ninja"):
                self.summary = line  # the compiler error beneath FAILED and its command line
        elif (
            not self.summary_more
            and line.number > summary.number
            and line.text.strip()
            and summary.text.rstrip().endswith(":")
        ):
            self.summary_more = line.text.strip()  # "RuntimeError:" + its indented message

    def result(self) -> FirstError:
        summary = self.summary or self.first
        if self.kind == "ninja" and self.summary is None and len(self.kept) > 2:
            summary = next((line for line in self.kept[2:] if line.text.strip()), self.first)
        if self.summary_more:
            summary = LogLine(summary.number, f"{summary.text.rstrip()} {self.summary_more}")

        def clean(lines: Iterable[LogLine]) -> tuple[LogLine, ...]:
            return tuple(LogLine(line.number, _clean(line.text)) for line in lines)

        return FirstError(
            kind=self.kind,
            line_number=self.first.number,
            end_line_number=self.last_number,
            summary=LogLine(summary.number, _clean(summary.text)),
            lines=clean(self.kept),
            omitted_lines=self.scanned - len(self.kept),
            context_before=clean(self.before),
            context_after=clean((self.after + self.pending_blank)[:CONTEXT_LINES]),
        )


# --------------------------------------------------------------------------------------------
# Scanning
# --------------------------------------------------------------------------------------------


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_Probe = tuple[int, Pattern]  # (rule index, one of the rule's patterns)


def _shared_literals(literals: set[str]) -> dict[str, str]:
    """Map each literal to the shortest other literal it contains, so one search serves both.

    Every line holding "No module named 'torch._C'" holds "No module named '", so searching
    for the second one alone finds the lines for both patterns.
    """
    by_length = sorted(literals, key=len)
    return {literal: next(other for other in by_length if other in literal) for literal in literals}


class _Scanner:
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
                literals = _gate(pattern)
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
        # One pass finds every line worth a closer look: RE2 compiles the alternation of all the
        # literals (the rules' and the error grammar's) into one automaton that reads each
        # character once, where a str.find per literal would read the chunk ~90 times.
        every_literal = dict.fromkeys([*self.gated, *_ERROR_LITERALS])
        self.finder = re2.compile("|".join(re2.escape(literal) for literal in every_literal))


@functools.lru_cache(maxsize=8)
def _scanner_for(rules: tuple[Rule, ...]) -> _Scanner:
    return _Scanner(rules)


def _line_bounds(chunk: str, position: int) -> tuple[int, int]:
    """Start and end offsets of the line holding `position` (end excludes the newline)."""
    start = chunk.rfind("\n", 0, position) + 1
    end = chunk.find("\n", position)
    return start, len(chunk) if end < 0 else end


def _lines_before(chunk: str, start: int, count: int) -> list[str]:
    """Up to `count` complete lines that end right before the line starting at `start`."""
    lines: list[str] = []
    newline = start - 1
    while len(lines) < count and newline >= 0 and chunk[newline] == "\n":
        line_start = chunk.rfind("\n", 0, newline) + 1
        lines.append(chunk[line_start:newline])
        newline = line_start - 1
    return lines[::-1]


class _LogScan:
    """State carried from chunk to chunk while one log is triaged."""

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.scanner = _scanner_for(rules)
        self.lines_before_chunk = 0
        self.carry: list[str] = []  # the last lines of the previous chunk, for context windows
        self.collector: _BlockCollector | None = None
        self.first_error: FirstError | None = None
        count = len(rules)
        self.first_hit: list[LogLine | None] = [None] * count
        self.hit_count = [0] * count
        self.ends_with_newline = True
        self.chars_seen = 0
        self.spent: dict[int, float] = {}  # seconds taken by each guarded rule
        self.skipped: dict[int, str] = {}  # guarded rule index -> the warning saying why

    # -- per chunk --------------------------------------------------------------------------

    def feed(self, chunk: str) -> None:
        if not chunk:
            return
        self.chars_seen += len(chunk)
        if self.collector is not None:
            self._continue_block(chunk, 0)
        hits: dict[int, set[int]] = {}  # rule index -> start offsets of its trigger lines
        line_end = -1
        for found in self._candidates(chunk):
            if found.start() <= line_end:
                continue  # another literal on a line already looked at
            start, line_end = _line_bounds(chunk, found.start())
            line = chunk[start:line_end]
            if (
                self.collector is None
                and self.first_error is None
                and any(literal in line for literal in _ERROR_LITERALS)
            ):
                kind = classify(line)
                if kind:
                    self._start_block(chunk, start, kind)
            self._gated_hits(chunk, start, line_end, line, hits)
        self._match_rules(chunk, hits)
        window = self.scanner.window
        self.carry = (self.carry + _lines_before(chunk, len(chunk), window))[-window:]
        self.lines_before_chunk += chunk.count("\n")
        self.ends_with_newline = chunk.endswith("\n")

    def line_count(self) -> int:
        return self.lines_before_chunk + (0 if self.ends_with_newline else 1)

    # -- first error ------------------------------------------------------------------------

    def _start_block(self, chunk: str, start: int, kind: str) -> None:
        number = self.lines_before_chunk + chunk.count("\n", 0, start) + 1
        before_text = (self.carry + _lines_before(chunk, start, CONTEXT_LINES))[-CONTEXT_LINES:]
        before = [LogLine(number - len(before_text) + offset, text) for offset, text in enumerate(before_text)]
        start_end = _line_bounds(chunk, start)[1]
        self.collector = _BlockCollector(kind, LogLine(number, chunk[start:start_end]), before)
        self._continue_block(chunk, start_end + 1, number + 1)

    def _continue_block(self, chunk: str, position: int, number: int | None = None) -> None:
        collector = self.collector
        assert collector is not None
        number = self.lines_before_chunk + 1 if number is None else number
        while position < len(chunk):
            end = chunk.find("\n", position)
            end = len(chunk) if end < 0 else end
            if not collector.feed(number, chunk[position:end]):
                self._finish_block()
                return
            position, number = end + 1, number + 1

    def _finish_block(self) -> None:
        if self.collector is not None:
            self.first_error = self.collector.result()
            self.collector = None

    # -- diagnosis rules --------------------------------------------------------------------

    def _candidates(self, chunk: str) -> Iterator[Any]:
        """The finder's matches in `chunk`, in order. RE2 reads UTF-8, which cannot hold a lone
        surrogate (text decoded with surrogateescape): those become U+FFFD, one character for
        one, so every offset stays the same."""
        try:
            yield from self.scanner.finder.finditer(chunk)
        except UnicodeEncodeError:
            yield from self.scanner.finder.finditer(_LONE_SURROGATE.sub("\ufffd", chunk))

    def _gated_hits(self, chunk: str, start: int, end: int, line: str, hits: dict[int, set[int]]) -> None:
        """Run the patterns whose literal this line holds; record the line for those that match."""
        guarded, skipped = self.scanner.guarded, self.skipped
        for literal, probes in self.scanner.gated.items():
            if literal not in line:
                continue
            for rule_index, pattern in probes:
                if rule_index in guarded:
                    if rule_index in skipped:
                        continue
                    started = time.perf_counter()
                    matched = pattern.search(chunk, start, end)
                    if self._charge(rule_index, time.perf_counter() - started):
                        continue
                else:
                    matched = pattern.search(chunk, start, end)
                if matched:
                    hits.setdefault(rule_index, set()).add(start)

    def _match_rules(self, chunk: str, hits: dict[int, set[int]]) -> None:
        """Add the patterns no literal gates (searched on their own), then count each rule's lines."""
        guarded, skipped = self.scanner.guarded, self.skipped
        for rule_index, pattern in self.scanner.ungated:
            # Past a final newline there is no line: a pattern that matches the empty string
            # there ('^$') would count a line too many, and be found there again and again.
            last = len(chunk) - 1 if chunk.endswith("\n") else len(chunk)
            position = 0
            while position <= last:
                found = pattern.search(chunk, position)
                if found is None or found.start() > last:
                    break
                start, end = _line_bounds(chunk, found.start())
                if pattern.search(chunk, start, end):  # the same match, held to one line
                    hits.setdefault(rule_index, set()).add(start)
                position = end + 1
        for rule_index, linear in self.scanner.ungated_linear:
            if rule_index in skipped:
                continue
            started = time.perf_counter()
            try:
                for start in linear.line_starts(chunk, deadline=started + self._allowance(rule_index)):
                    hits.setdefault(rule_index, set()).add(start)
            except PatternTooSlow:
                pass
            self._charge(rule_index, time.perf_counter() - started)
        for rule_index in skipped:
            hits.pop(rule_index, None)
        if not hits:
            return
        numbers = self._line_numbers(chunk, sorted(set().union(*hits.values())))
        for rule_index, offsets in hits.items():
            rule = self.scanner.rules[rule_index]
            is_guarded = rule_index in guarded
            started = time.perf_counter()
            for offset in sorted(offsets):
                if is_guarded and time.perf_counter() - started > self._allowance(rule_index):
                    break
                if rule.preceded_by and not self._preceded(rule, chunk, offset):
                    continue
                if self.first_hit[rule_index] is None:
                    text = chunk[offset : _line_bounds(chunk, offset)[1]]
                    self.first_hit[rule_index] = LogLine(numbers[offset], _clean(text))
                self.hit_count[rule_index] += 1
            if is_guarded:
                self._charge(rule_index, time.perf_counter() - started)

    def _allowance(self, rule_index: int) -> float:
        """Seconds a guarded rule may still take."""
        allowed = USER_RULE_GRACE_SECONDS + USER_RULE_SECONDS_PER_MB * self.chars_seen / 1e6
        return allowed - self.spent.get(rule_index, 0.0)

    def _charge(self, rule_index: int, seconds: float) -> bool:
        """Count a guarded rule's time; past its allowance the rule is skipped (True)."""
        over = self._allowance(rule_index) < seconds
        self.spent[rule_index] = self.spent.get(rule_index, 0.0) + seconds
        if over and rule_index not in self.skipped:
            rule = self.scanner.rules[rule_index]
            megabytes = self.chars_seen / 1e6
            self.skipped[rule_index] = (
                f"rule '{rule.id}' skipped: its patterns took {self.spent[rule_index]:.1f} s on the first "
                f"{megabytes:.1f} MB of the log (allowed: {USER_RULE_GRACE_SECONDS:g} s + "
                f"{USER_RULE_SECONDS_PER_MB:g} s per MB). RE2 runs in linear time, but counted repetitions such as "
                ".{300} make every character costly: simplify the pattern."
            )
        return over

    def _preceded(self, rule: Rule, chunk: str, start: int) -> bool:
        """Does a `preceded_by` pattern match the line at `start` or one of the rule's window before it?"""
        window = _lines_before(chunk, start, rule.within_lines)
        if len(window) < rule.within_lines:  # the window reaches back into the previous chunk
            window = (self.carry + window)[-rule.within_lines :]
        window.append(chunk[start : _line_bounds(chunk, start)[1]])
        return any(pattern.search(line) for line in window for pattern in rule.preceded_by)

    def _line_numbers(self, chunk: str, offsets: list[int]) -> dict[int, int]:
        numbers: dict[int, int] = {}
        number, previous = self.lines_before_chunk + 1, 0
        for offset in offsets:
            number += chunk.count("\n", previous, offset)
            numbers[offset] = number
            previous = offset
        return numbers

    # -- end --------------------------------------------------------------------------------

    def result(self, source: str) -> TriageResult:
        self._finish_block()
        matches = [
            RuleMatch(rule, first, self.hit_count[index])
            for index, (rule, first) in enumerate(zip(self.scanner.rules, self.first_hit, strict=True))
            if first is not None and index not in self.skipped
        ]
        matches.sort(key=lambda match: match.line.number)
        warnings = tuple(self.skipped[index] for index in sorted(self.skipped))
        return TriageResult(
            source=source,
            line_count=self.line_count(),
            first_error=self.first_error,
            matches=tuple(matches),
            warnings=warnings,
        )


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def _open_log(path: Path) -> TextIO:
    """Open a log as text whatever wrote it: UTF-8, UTF-16 (PowerShell's `>`), or a code page.

    Undecodable bytes (MSVC messages in the console code page) become U+FFFD; the patterns
    are ASCII, so they still match around them.
    """
    with path.open("rb") as probe:
        head = probe.read(4)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    elif head.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    else:
        encoding = "utf-8"
    return path.open("r", encoding=encoding, errors="replace", newline=None)


def _chunks(handle: TextIO) -> Iterator[str]:
    """Whole lines, about CHUNK_CHARS characters at a time."""
    while True:
        chunk = handle.read(CHUNK_CHARS)
        if not chunk:
            return
        if not chunk.endswith("\n"):
            chunk += handle.readline()
        yield chunk


def triage_log(path: Path | str, rules: tuple[Rule, ...] | None = None) -> TriageResult:
    """Triage a log file: its first error block and the diagnosis rules that match it."""
    path = Path(path)
    scan = _LogScan(default_rules() if rules is None else rules)
    try:
        with _open_log(path) as handle:
            for chunk in _chunks(handle):
                scan.feed(chunk)
    except OSError as exc:
        raise ConfigurationError(
            f"{path}: cannot read the log ({exc.strerror or exc}).",
            fix="pass the path of an existing, readable log file.",
        ) from None
    return scan.result(str(path))


def diagnose_text(text: str, rules: tuple[Rule, ...] | None = None, source: str = "<text>") -> TriageResult:
    """Triage text already in memory, such as the output of a verification run."""
    scan = _LogScan(default_rules() if rules is None else rules)
    scan.feed(text.replace("\r\n", "\n").replace("\r", "\n"))
    return scan.result(source)
