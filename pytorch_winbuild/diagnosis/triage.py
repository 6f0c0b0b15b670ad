"""Find the first real error in a build log, and which diagnosis rules explain it.

A failed PyTorch build ends with "ninja: build stopped: subcommand failed." thousands of lines
after the line that matters. Triage reports the first error block instead (a Ninja FAILED block
with the compiler error beneath it, a CMake Error with its message, a Python traceback with its
exception, an MSVC/nvcc/gcc/linker error line) and every rule of build_config/diagnosis.toml
whose patterns occur in the log.

Logs of a full build reach hundreds of MB, so the file is read as bytes in chunks of whole lines,
and one Hyperscan pass over each chunk finds the lines holding a literal that some pattern
requires. Only those few lines are decoded, and a regular expression only ever runs on them.
Memory is bounded whatever the input, and time linear in its length: nothing holds more than one
chunk at a time, a line longer than MAX_LINE_BYTES is cut (its start is matched and shown, the
result warns with its length in bytes), and the lines kept for preceded_by windows are bounded by
rules.MAX_WITHIN_LINES and WINDOW_CHARS. An endless input (/dev/zero, a pipe that never closes)
is read on in constant memory until it ends or the user stops it.

Rules from a file other than the shipped one run on RE2 (diagnosis.LinearPattern), in time
linear in the log; a costly one may still take microseconds per character, so each such rule
has a time budget and is skipped, with a warning, once it exceeds it.

Log text is untrusted: `to_text` and `to_json` neutralise terminal escape sequences and control
characters (terminal_text.py), while the result's data keeps the text as the log had it.
"""

from __future__ import annotations

import codecs
import functools
import io
import re
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TextIO

import hyperscan

from pytorch_winbuild.diagnosis.rules import LinearPattern, Pattern, PatternTooSlow, Rule, default_rules
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.text.redact import redact_text
from pytorch_winbuild.text.terminal_text import terminal_json, terminal_safe

CHUNK_BYTES = 2 * 1024 * 1024
# A line longer than this is cut: only its first MAX_LINE_BYTES are matched and shown, the rest is
# read and dropped, so memory stays bounded whatever the log holds (1 GiB of NUL bytes, /dev/zero).
# The longest real lines are command lines (Ninja's FAILED blocks, verbose builds): on Windows at
# most 32,767 UTF-16 characters (CreateProcess; longer ones go through response files), under
# 96 KiB of UTF-8 even if every character took 3 bytes; on Linux one argument is at most 128 KiB
# (MAX_ARG_STRLEN). The errors themselves are short lines of their own.
MAX_LINE_BYTES = 256 * 1024
# Lines kept from earlier chunks for preceded_by windows and context: at most a rule's within_lines
# (rules.MAX_WITHIN_LINES) and, past CONTEXT_LINES, at most this many characters (a window of
# 10,000 lines of 256 KiB would otherwise hold 2.5 GB).
WINDOW_CHARS = 4 * 1024 * 1024
MAX_CUT_LINES_LISTED = 5  # cut lines named in the warning
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

    def to_dict(self, posix: bool | None = None) -> dict[str, Any]:
        return {**self.rule.to_dict(posix), "line": self.line.to_dict(), "count": self.count}


@dataclass(frozen=True)
class TriageResult:
    """What the build report stores and `invoke diagnose` prints."""

    source: str
    line_count: int
    first_error: FirstError | None
    matches: tuple[RuleMatch, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())  # rules skipped for taking too long
    # The machine the log comes from: Linux/macOS (True), Windows (False), or unknown (None, `invoke
    # diagnose`): a rule's fix for that machine (Rule.fix_on), both where it differs and that is unknown.
    posix: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "source": self.source,
            "line_count": self.line_count,
            "first_error": self.first_error.to_dict() if self.first_error else None,
            "matches": [match.to_dict(self.posix) for match in self.matches],
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
            advice = [("Why", rule.explanation), ("Fix", rule.fix_on(self.posix))]
            if self.posix is None and rule.fix_posix:
                advice = [("Why", rule.explanation), ("Fix on Windows", rule.fix), ("Fix on Linux", rule.fix_posix)]
            for label, text in (*advice, ("Source", rule.source)):
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


def _clean(text: str, cut: int = 0) -> str:
    """A line as it may appear in a report: no credentials, bounded length; `cut`: the length in bytes of
    a line longer than MAX_LINE_BYTES, of which `text` is the start."""
    text = redact_text(text.rstrip())
    if cut:
        return f"{text[:MAX_LINE_CHARS]} ... [line cut: {cut} bytes long, only its first {MAX_LINE_BYTES} searched]"
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
        if not text.strip():
            text = ""  # as reported (_clean strips it), without keeping a long run of spaces
        line = LogLine(number, text)
        if not self.in_block:
            self.after.append(line)
            return len(self.after) < CONTEXT_LINES
        # Blank lines waiting to be taken count too: a run of them must not grow the list without end.
        if self.scanned + len(self.pending_blank) >= MAX_BLOCK_SCAN or not self._belongs(text):
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

    def result(self, cut_lines: dict[int, int]) -> FirstError:
        """The block; `cut_lines`: the length in bytes of each line of it that was cut, by number."""
        summary = self.summary or self.first
        if self.kind == "ninja" and self.summary is None and len(self.kept) > 2:
            summary = next((line for line in self.kept[2:] if line.text.strip()), self.first)
        if self.summary_more:
            summary = LogLine(summary.number, f"{summary.text.rstrip()} {self.summary_more}")

        def clean(lines: Iterable[LogLine]) -> tuple[LogLine, ...]:
            return tuple(LogLine(line.number, _clean(line.text, cut_lines.get(line.number, 0))) for line in lines)

        return FirstError(
            kind=self.kind,
            line_number=self.first.number,
            end_line_number=self.last_number,
            summary=LogLine(summary.number, _clean(summary.text, cut_lines.get(summary.number, 0))),
            lines=clean(self.kept),
            omitted_lines=self.scanned - len(self.kept),
            context_before=clean(self.before),
            context_after=clean((self.after + self.pending_blank)[:CONTEXT_LINES]),
        )


# --------------------------------------------------------------------------------------------
# Scanning
# --------------------------------------------------------------------------------------------


_Probe = tuple[int, Pattern]  # (rule index, one of the rule's patterns)
_Chunk = bytes | bytearray  # whole lines of the log's bytes (UTF-8, stray bytes and all)


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
        # One pass finds every line worth a closer look: Hyperscan matches all the literals (the
        # rules' and the error grammar's) at once on the log's bytes, about 5 times as fast as
        # RE2's alternation of them on decoded text. Patterns match within a line and a chunk ends
        # at a line end, so block mode needs no overlap between chunks.
        expressions = [literal.encode("utf-8") for literal in dict.fromkeys([*self.gated, *_ERROR_LITERALS])]
        self.finder = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.finder.compile(expressions=expressions, elements=len(expressions), literal=True)


@functools.lru_cache(maxsize=8)
def _scanner_for(rules: tuple[Rule, ...]) -> _Scanner:
    return _Scanner(rules)


def _scan(
    database: hyperscan.Database,
    chunk: _Chunk,
    on_match: Callable[[int, int, int, int, object], bool | None],
    scratch: hyperscan.Scratch,
) -> None:
    """Database.scan, typed for a bytearray too: the stub says str or bytes, the extension takes any buffer."""
    database.scan(chunk, match_event_handler=on_match, scratch=scratch)  # type: ignore[type-var]


def _line_bounds(chunk: _Chunk, position: int) -> tuple[int, int]:
    """Start and end offsets of the line holding `position` (end excludes the newline)."""
    start = chunk.rfind(b"\n", 0, position) + 1
    end = chunk.find(b"\n", position)
    return start, len(chunk) if end < 0 else end


_NEWLINE = ord("\n")
_SHORT_LINE_BYTES = 48  # below this average length chunk.count(b"\n") beats replace()
_SAMPLE_BYTES = 64 * 1024


def _lines_before(chunk: _Chunk, start: int, count: int) -> list[_Chunk]:
    """Up to `count` complete lines that end right before the line starting at `start`."""
    lines: list[_Chunk] = []
    newline = start - 1
    while len(lines) < count and newline >= 0 and chunk[newline] == _NEWLINE:
        line_start = chunk.rfind(b"\n", 0, newline) + 1
        lines.append(chunk[line_start:newline])
        newline = line_start - 1
    return lines[::-1]


def _recent(lines: list[str], count: int) -> list[str]:
    """The last `count` of `lines`, less the oldest ones past WINDOW_CHARS characters (the last
    CONTEXT_LINES are always kept)."""
    lines = lines[-count:]
    if sum(map(len, lines)) <= WINDOW_CHARS:
        return lines
    total = 0
    for index in range(len(lines) - 1, -1, -1):
        total += len(lines[index])
        if total > WINDOW_CHARS and len(lines) - index > CONTEXT_LINES:
            return lines[index + 1 :]
    return lines


def _newlines(chunk: _Chunk) -> int:
    """chunk.count(b"\\n"), but up to 4 times as fast on long lines (Ninja's command lines).

    count() tests every byte; replace() finds each newline with memchr, which is faster on lines
    longer than about 48 bytes and much slower on short ones (25 times on blank lines).
    The lines at the start of the chunk pick the method.
    """
    sample = chunk.count(b"\n", 0, _SAMPLE_BYTES)
    if sample * _SHORT_LINE_BYTES > _SAMPLE_BYTES:
        return sample + chunk.count(b"\n", _SAMPLE_BYTES)
    return len(chunk) - len(chunk.replace(b"\n", b""))


def _byte_offsets(chunk: _Chunk, text: str, starts: list[int]) -> dict[int, int]:
    """Where the lines that start at `starts` in `text` (the decoded chunk) start in `chunk`.

    Multi-byte and undecodable bytes make the offsets differ, never the lines: count those.
    """
    offsets: dict[int, int] = {}
    char_mark = byte_mark = 0
    for start in starts:
        for _ in range(text.count("\n", char_mark, start)):
            byte_mark = chunk.index(b"\n", byte_mark) + 1
        char_mark = start
        offsets[start] = byte_mark
    return offsets


class _LogScan:
    """State carried from chunk to chunk while one log is triaged.

    Chunks are bytes, whole lines ending in "\\n". Only the lines that are examined or reported
    are decoded, with `errors`: "replace" for a file (its stray bytes become U+FFFD, as text mode
    made them), "surrogatepass" for text given as str (diagnose_text encodes it so).
    """

    def __init__(self, rules: tuple[Rule, ...], errors: str) -> None:
        self.scanner = _scanner_for(rules)
        self.scratch = hyperscan.Scratch(self.scanner.finder)  # per log: two threads may triage at once
        self.errors = errors
        self.lines_before_chunk = 0
        self.carry: list[str] = []  # the last lines of the previous chunk, for context windows
        self.collector: _BlockCollector | None = None
        self.first_error: FirstError | None = None
        count = len(rules)
        self.first_hit: list[LogLine | None] = [None] * count
        self.hit_count = [0] * count
        self.ends_with_newline = True
        self.bytes_seen = 0
        self.spent: dict[int, float] = {}  # seconds taken by each guarded rule
        self.skipped: dict[int, str] = {}  # guarded rule index -> the warning saying why
        self.chunk_cut = 0  # the length in bytes of this chunk's first line, where it was cut
        self.cut_count = 0
        self.cut_listed: list[tuple[int, int]] = []  # (line number, bytes) of the first cut lines
        # Cut lines the first error block may show (its lines and the context before them), by number.
        self.cut_lines: dict[int, int] = {}

    def _decode(self, data: _Chunk) -> str:
        return data.decode("utf-8", self.errors)

    def _text_before(self, chunk: _Chunk, start: int, count: int) -> list[str]:
        return [self._decode(line) for line in _lines_before(chunk, start, count)]

    def _text_line(self, chunk: _Chunk, start: int) -> str:
        return self._decode(chunk[start : _line_bounds(chunk, start)[1]])

    # -- per chunk --------------------------------------------------------------------------

    def _candidates(self, chunk: _Chunk) -> list[int]:
        """End offsets in `chunk` of the literals found there, in order."""
        ends: list[int] = []

        def record(_id: int, _start: int, end: int, _flags: int, _context: object) -> None:
            ends.append(end)

        _scan(self.scanner.finder, chunk, record, self.scratch)
        ends.sort()
        return ends

    def feed(self, chunk: _Chunk, cut: int = 0) -> None:
        """Scan the next chunk; `cut`: the length in bytes of its first line where it was cut (_line_chunks)."""
        if not chunk:
            return
        self.chunk_cut = cut
        if cut:
            self._note_cut(self.lines_before_chunk + 1, cut)
        self.bytes_seen += len(chunk)
        if self.collector is not None:
            self._continue_block(chunk, 0)
        hits: dict[int, set[int]] = {}  # rule index -> start offsets of its trigger lines
        line_end = -1
        for end in self._candidates(chunk):
            if end <= line_end:
                continue  # another literal on a line already looked at
            start, line_end = _line_bounds(chunk, end - 1)
            line = self._decode(chunk[start:line_end])
            if (
                self.collector is None
                and self.first_error is None
                and any(literal in line for literal in _ERROR_LITERALS)
            ):
                kind = classify(line)
                if kind:
                    self._start_block(chunk, start, kind)
            self._gated_hits(line, start, hits)
        self._match_rules(chunk, hits)
        window = self.scanner.window
        self.carry = _recent(self.carry + self._text_before(chunk, len(chunk), window), window)
        self.lines_before_chunk += _newlines(chunk)
        self.ends_with_newline = chunk.endswith(b"\n")

    def line_count(self) -> int:
        return self.lines_before_chunk + (0 if self.ends_with_newline else 1)

    def _note_cut(self, number: int, size: int) -> None:
        self.cut_count += 1
        if len(self.cut_listed) < MAX_CUT_LINES_LISTED:
            self.cut_listed.append((number, size))
        if self.first_error is None:  # the block may show it; before a block, only as context
            if self.collector is None:
                self.cut_lines = {line: cut for line, cut in self.cut_lines.items() if line >= number - CONTEXT_LINES}
            self.cut_lines[number] = size

    def _cut_warning(self) -> str:
        listed = ", ".join(f"line {number} ({size} bytes)" for number, size in self.cut_listed)
        if self.cut_count > len(self.cut_listed):
            listed += f" and {self.cut_count - len(self.cut_listed)} more"
        if self.cut_count == 1:
            return (
                f"1 line longer than {MAX_LINE_BYTES} bytes was cut: only its first {MAX_LINE_BYTES} were searched: "
                f"{listed}."
            )
        return (
            f"{self.cut_count} lines longer than {MAX_LINE_BYTES} bytes were cut: "
            f"only their first {MAX_LINE_BYTES} were searched: {listed}."
        )

    # -- first error ------------------------------------------------------------------------

    def _start_block(self, chunk: _Chunk, start: int, kind: str) -> None:
        number = self.lines_before_chunk + chunk.count(b"\n", 0, start) + 1
        before_text = (self.carry + self._text_before(chunk, start, CONTEXT_LINES))[-CONTEXT_LINES:]
        before = [LogLine(number - len(before_text) + offset, text) for offset, text in enumerate(before_text)]
        start_end = _line_bounds(chunk, start)[1]
        self.collector = _BlockCollector(kind, LogLine(number, self._decode(chunk[start:start_end])), before)
        self._continue_block(chunk, start_end + 1, number + 1)

    def _continue_block(self, chunk: _Chunk, position: int, number: int | None = None) -> None:
        collector = self.collector
        assert collector is not None
        number = self.lines_before_chunk + 1 if number is None else number
        while position < len(chunk):
            end = chunk.find(b"\n", position)
            end = len(chunk) if end < 0 else end
            if not collector.feed(number, self._decode(chunk[position:end])):
                self._finish_block()
                return
            position, number = end + 1, number + 1

    def _finish_block(self) -> None:
        if self.collector is not None:
            self.first_error = self.collector.result(self.cut_lines)
            self.collector = None
            self.cut_lines = {}

    # -- diagnosis rules --------------------------------------------------------------------

    def _gated_hits(self, line: str, start: int, hits: dict[int, set[int]]) -> None:
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
                    matched = pattern.search(line)
                    if self._charge(rule_index, time.perf_counter() - started):
                        continue
                else:
                    matched = pattern.search(line)
                if matched:
                    hits.setdefault(rule_index, set()).add(start)

    def _ungated_hits(self, chunk: _Chunk, hits: dict[int, set[int]]) -> None:
        """Search the patterns no literal gates through the chunk's decoded text."""
        text = self._decode(chunk)
        found: dict[int, set[int]] = {}  # rule index -> start offsets of its lines in `text`
        # Past a final newline there is no line: a pattern that matches the empty string there
        # ('^$') would count a line too many, and be found there again and again.
        last = len(text) - 1 if text.endswith("\n") else len(text)
        for rule_index, pattern in self.scanner.ungated:
            position = 0
            while position <= last:
                match = pattern.search(text, position)
                if match is None or match.start() > last:
                    break
                start = text.rfind("\n", 0, match.start()) + 1
                end = text.find("\n", match.start())
                end = len(text) if end < 0 else end
                if pattern.search(text, start, end):  # the same match, held to one line
                    found.setdefault(rule_index, set()).add(start)
                position = end + 1
        for rule_index, linear in self.scanner.ungated_linear:
            if rule_index in self.skipped:
                continue
            started = time.perf_counter()
            try:
                for start in linear.line_starts(text, deadline=started + self._allowance(rule_index)):
                    found.setdefault(rule_index, set()).add(start)
            except PatternTooSlow:
                pass
            self._charge(rule_index, time.perf_counter() - started)
        if found:
            offsets = _byte_offsets(chunk, text, sorted(set().union(*found.values())))
            for rule_index, starts in found.items():
                hits.setdefault(rule_index, set()).update(offsets[start] for start in starts)

    def _match_rules(self, chunk: _Chunk, hits: dict[int, set[int]]) -> None:
        """Add the patterns no literal gates, then count each rule's lines."""
        guarded, skipped = self.scanner.guarded, self.skipped
        if self.scanner.ungated or self.scanner.ungated_linear:
            self._ungated_hits(chunk, hits)
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
                    cut = self.chunk_cut if offset == 0 else 0  # only a chunk's first line may have been cut
                    self.first_hit[rule_index] = LogLine(numbers[offset], _clean(self._text_line(chunk, offset), cut))
                self.hit_count[rule_index] += 1
            if is_guarded:
                self._charge(rule_index, time.perf_counter() - started)

    def _allowance(self, rule_index: int) -> float:
        """Seconds a guarded rule may still take."""
        allowed = USER_RULE_GRACE_SECONDS + USER_RULE_SECONDS_PER_MB * self.bytes_seen / 1e6
        return allowed - self.spent.get(rule_index, 0.0)

    def _charge(self, rule_index: int, seconds: float) -> bool:
        """Count a guarded rule's time; past its allowance the rule is skipped (True)."""
        over = self._allowance(rule_index) < seconds
        self.spent[rule_index] = self.spent.get(rule_index, 0.0) + seconds
        if over and rule_index not in self.skipped:
            rule = self.scanner.rules[rule_index]
            megabytes = self.bytes_seen / 1e6
            self.skipped[rule_index] = (
                f"rule '{rule.id}' skipped: its patterns took {self.spent[rule_index]:.1f} s on the first "
                f"{megabytes:.1f} MB of the log (allowed: {USER_RULE_GRACE_SECONDS:g} s + "
                f"{USER_RULE_SECONDS_PER_MB:g} s per MB). RE2 runs in linear time, but counted repetitions such as "
                ".{300} make every character costly: simplify the pattern."
            )
        return over

    def _preceded(self, rule: Rule, chunk: _Chunk, start: int) -> bool:
        """Does a `preceded_by` pattern match the line at `start` or one of the rule's window before it?"""
        window = self._text_before(chunk, start, rule.within_lines)
        if len(window) < rule.within_lines:  # the window reaches back into the previous chunk
            window = (self.carry + window)[-rule.within_lines :]
        window.append(self._text_line(chunk, start))
        return any(pattern.search(line) for line in window for pattern in rule.preceded_by)

    def _line_numbers(self, chunk: _Chunk, offsets: list[int]) -> dict[int, int]:
        numbers: dict[int, int] = {}
        number, previous = self.lines_before_chunk + 1, 0
        for offset in offsets:
            number += chunk.count(b"\n", previous, offset)
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
        if self.cut_count:
            warnings = (self._cut_warning(), *warnings)
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


class _Readable(Protocol):
    def readinto(self, buffer: memoryview, /) -> int | None: ...


class _TextAsUtf8:
    """A text stream (a UTF-16 log, decoded) read as UTF-8 bytes, the way _line_chunks reads a file."""

    def __init__(self, text: TextIO) -> None:
        self.text = text
        self.pending = b""

    def readinto(self, buffer: memoryview, /) -> int:
        if not self.pending:
            # At most 3 bytes a character (4 for a surrogate pair, which counts as 2 here): about a chunk.
            self.pending = self.text.read(max(1, CHUNK_BYTES // 3)).encode("utf-8", "surrogatepass")
        size = min(len(buffer), len(self.pending))
        buffer[:size] = self.pending[:size]
        self.pending = self.pending[size:]
        return size


def _log_chunks(path: Path) -> Iterator[tuple[_Chunk, int]]:
    """The log as UTF-8 in chunks of whole lines, whatever wrote it, each with the length of its first
    line where that line was cut (_line_chunks; in bytes of UTF-8, for a UTF-16 log too).

    UTF-8 (with or without a BOM) is passed on undecoded: bytes that are not UTF-8 (MSVC messages
    in the console code page) stay as they are; the patterns' literals are ASCII, so they still
    match around them. UTF-16 (PowerShell's `>`) is transcoded, from the same handle (a pipe cannot
    be opened twice). Line ends are those of text mode: "\\r\\n" and a lone "\\r" become "\\n".
    """
    with path.open("rb") as handle:
        head = handle.peek(4)[:4]  # not read: a pipe (/dev/stdin) cannot seek back
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            with io.TextIOWrapper(handle, encoding="utf-16", errors="replace", newline=None) as text:
                yield from _line_chunks(_TextAsUtf8(text))
            return
        if head.startswith(codecs.BOM_UTF8):
            handle.read(len(codecs.BOM_UTF8))
        yield from _line_chunks(handle)


_CR = ord("\r")


def _line_end(chunk: bytearray, start: int, end: int) -> int:
    """The first line end in chunk[start:end]: a "\\n", or a "\\r" with a byte after it; -1 if none."""
    newline = chunk.find(b"\n", start, end)
    cr = chunk.find(b"\r", start, end - 1 if newline < 0 else newline)
    return cr if cr >= 0 else newline


def _utf8_head(chunk: bytearray, start: int, limit: int) -> int:
    """How many bytes of chunk[start:] to keep, at most `limit`, without ending inside a UTF-8 character."""
    for keep in range(limit, max(limit - 4, 0), -1):
        if chunk[start + keep] & 0xC0 != 0x80:  # not a continuation byte: a character starts there
            return keep
    return limit  # not UTF-8 there: cut anywhere


def _line_chunks(handle: _Readable) -> Iterator[tuple[bytearray, int]]:
    """Whole lines of `handle`, about CHUNK_BYTES at a time, each read into the same buffer, in
    memory bounded by MAX_LINE_BYTES + CHUNK_BYTES however long a line is (a file of NUL bytes, an
    endless pipe, /dev/zero).

    Yields (chunk, cut): `cut` is 0, or the length in bytes of the chunk's first line when that
    line is longer than MAX_LINE_BYTES: only its first MAX_LINE_BYTES are in the chunk (they are
    matched and shown), the rest was read and dropped. Every line that is cut starts a chunk.

    A chunk is overwritten by the next one: a fresh multi-MB object per chunk costs page faults
    that take about as long as the read itself. A chunk ends after a "\\n" or a "\\r" that no "\\n"
    follows, so a log whose lines end in "\\r" alone is read in chunks too. Only what was just read
    is searched for line ends: the unfinished line carried over holds none, except a final "\\r"
    that may be the first half of a "\\r\\n".
    """
    chunk = bytearray()
    filled = 0  # bytes at the start of `chunk` read but not handed out yet: the start of a line
    cut = 0  # while a long line is cut: its length so far (less a final "\r"); its first `head` bytes are kept
    head = 0
    while True:
        size = filled + CHUNK_BYTES
        if len(chunk) < size:
            chunk.extend(bytes(size - len(chunk)))
        else:
            del chunk[size:]
        with memoryview(chunk)[filled:] as free:
            read = handle.readinto(free) or 0
        end = filled + read
        if not read:
            if filled:
                del chunk[end:]
                yield from _cut_long_lines(_text_line_ends(chunk), cut)
            return
        start = filled  # where line ends may be: what was just read, and a "\r" just before it
        if cut:  # the rest of a long line: drop it, up to its end
            stop = _line_end(chunk, head, end)
            if stop < 0:
                pending_cr = int(chunk[end - 1] == _CR)
                cut += end - head - pending_cr
                chunk[head : head + pending_cr] = b"\r" * pending_cr
                filled = head + pending_cr
                continue
            cut += stop - head
            del chunk[head:stop]
            end -= stop - head
            start = head
        newline = chunk.rfind(b"\n", start, end)
        # A "\r" in the last byte may be the first half of a "\r\n": it waits.
        cr = chunk.rfind(b"\r", newline + 1 if newline >= 0 else max(start - 1, 0), end - 1)
        lines_end = max(newline, cr) + 1
        # The start of a line that goes on in the next read, and its length so far.
        pending_cr = int(end > lines_end and chunk[end - 1] == _CR)
        tail = end - lines_end - pending_cr
        if not lines_end and tail <= MAX_LINE_BYTES:
            filled = end
            continue
        if tail <= MAX_LINE_BYTES:
            kept, next_cut, next_head = chunk[lines_end:end], 0, 0
        else:  # too long: keep its head, and drop the rest of it, this read's and the next ones'
            next_head = _utf8_head(chunk, lines_end, MAX_LINE_BYTES)
            kept = chunk[lines_end : lines_end + next_head] + b"\r" * pending_cr
            next_cut = tail
        if lines_end:
            del chunk[lines_end:]
            yield from _cut_long_lines(_text_line_ends(chunk), cut)
        chunk[: len(kept)] = kept
        filled, cut, head = len(kept), next_cut, next_head


def _cut_long_lines(chunk: bytearray, cut: int) -> Iterator[tuple[bytearray, int]]:
    """`chunk` (whole lines ending in "\\n"; its first one cut where `cut` says so) as _line_chunks yields
    it: the lines longer than MAX_LINE_BYTES that lie whole in it are cut too, each starting a chunk.

    The line at `pos` is that long when no "\\n" lies in the next MAX_LINE_BYTES + 1 bytes; each look
    finds the last newline of that window, so a chunk of ordinary lines takes CHUNK_BYTES /
    MAX_LINE_BYTES short searches, and is passed on as it is.
    """
    limit = MAX_LINE_BYTES
    start = pos = 0
    while len(chunk) - pos > limit:
        newline = chunk.rfind(b"\n", pos, pos + limit + 1)
        if newline >= 0:
            pos = newline + 1
            continue
        end = chunk.find(b"\n", pos)
        end = len(chunk) if end < 0 else end
        if pos > start:
            yield chunk[start:pos], cut
            cut = 0
        yield chunk[pos : pos + _utf8_head(chunk, pos, limit)] + chunk[end : end + 1], end - pos
        start = pos = end + 1
        cut = 0
    if not start:
        yield chunk, cut
    elif start < len(chunk):
        yield chunk[start:], cut


def _text_line_ends(chunk: bytearray) -> bytearray:
    """Line ends as text mode reads them: "\\r\\n" and a lone "\\r" become "\\n"."""
    if b"\r" not in chunk:
        return chunk
    if _has_lone_cr(chunk):
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    # A Windows log: deleting every "\r" runs on memchr, about 10 times as fast as replacing "\r\n".
    return chunk.replace(b"\r", b"")


def _has_lone_cr(chunk: bytearray) -> bool:
    """Does a "\\r" end a line by itself (a progress bar redrawing its line)?"""
    if chunk.endswith(b"\r"):
        return True
    found: list[int] = []
    database = _lone_cr_finder()
    _scan(database, chunk, lambda *_: found.append(1), hyperscan.Scratch(database))
    return bool(found)


@functools.cache
def _lone_cr_finder() -> hyperscan.Database:
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=[b"\r[^\n]"], elements=1, flags=hyperscan.HS_FLAG_SINGLEMATCH)
    return database


def triage_log(path: Path | str, rules: tuple[Rule, ...] | None = None, *, posix: bool | None = None) -> TriageResult:
    """Triage a log file: its first error block and the diagnosis rules that match it, with their fixes
    for the machine the log comes from (`posix`: TriageResult.posix)."""
    path = Path(path)
    scan = _LogScan(default_rules() if rules is None else rules, errors="replace")
    try:
        for chunk, cut in _log_chunks(path):
            scan.feed(chunk, cut)
    except OSError as exc:
        raise ConfigurationError(
            f"{path}: cannot read the log ({exc.strerror or exc}).",
            fix="pass the path of an existing, readable log file.",
        ) from None
    return replace(scan.result(str(path)), posix=posix)


def diagnose_text(
    text: str, rules: tuple[Rule, ...] | None = None, source: str = "<text>", *, posix: bool | None = None
) -> TriageResult:
    """Triage text already in memory, such as the output of a verification run (`posix`: as triage_log)."""
    scan = _LogScan(default_rules() if rules is None else rules, errors="surrogatepass")
    scan.feed(text.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8", "surrogatepass"))
    return replace(scan.result(source), posix=posix)
