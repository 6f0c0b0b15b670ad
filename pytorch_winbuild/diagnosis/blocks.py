"""The error grammar of the tools a PyTorch build runs, and the first error block it finds.

`classify` says which tool's error a line starts (Ninja, CMake, a traceback, MSVC, nvcc, the
linker...); BlockCollector follows that block to its end, by each tool's own layout. Apart from
the scan because it works on decoded lines one at a time, whatever chunk or encoding they came
from, and holds what a build's error looks like, not how a log is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pytorch_winbuild.diagnosis import chunks
from pytorch_winbuild.diagnosis.model import FirstError, LogLine
from pytorch_winbuild.text.redact import redact_text

CONTEXT_LINES = 3  # lines shown before and after the first error block
MAX_BLOCK_LINES = 40  # lines of the first error block kept for the report
MAX_BLOCK_SCAN = 2000  # a block longer than this is cut (a runaway template error)
MAX_LINE_CHARS = 1000  # Ninja prints whole compiler command lines; keep reports readable

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
ERROR_LITERALS = (
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


def clean_line(text: str, cut: int = 0) -> str:
    """A line as it may appear in a report: no credentials, bounded length; `cut`: the length in bytes of
    a line longer than chunks.MAX_LINE_BYTES, of which `text` is the start."""
    text = redact_text(text.rstrip())
    if cut:
        searched = chunks.MAX_LINE_BYTES
        return f"{text[:MAX_LINE_CHARS]} ... [line cut: {cut} bytes long, only its first {searched} searched]"
    if len(text) > MAX_LINE_CHARS:
        text = f"{text[:MAX_LINE_CHARS]} ... [{len(text) - MAX_LINE_CHARS} more characters]"
    return text


class BlockCollector:
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
            text = ""  # as reported (clean_line strips it), without keeping a long run of spaces
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
            return tuple(LogLine(line.number, clean_line(line.text, cut_lines.get(line.number, 0))) for line in lines)

        return FirstError(
            kind=self.kind,
            line_number=self.first.number,
            end_line_number=self.last_number,
            summary=LogLine(summary.number, clean_line(summary.text, cut_lines.get(summary.number, 0))),
            lines=clean(self.kept),
            omitted_lines=self.scanned - len(self.kept),
            context_before=clean(self.before),
            context_after=clean((self.after + self.pending_blank)[:CONTEXT_LINES]),
        )
