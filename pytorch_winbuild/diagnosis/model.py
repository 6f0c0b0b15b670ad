"""The findings of a triage: log lines, the first error block, and the rules that fired.

Plain data with its JSON form (`to_dict`, what the build report stores). Apart from the scan that
finds them and the report that shows them, so that the block collector, the scanner and the
report all share these types without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytorch_winbuild.diagnosis.rules import Rule
from pytorch_winbuild.json_file import JsonObject


@dataclass(frozen=True)
class LogLine:
    """A line of the log with its 1-based line number."""

    number: int
    text: str

    def to_dict(self) -> JsonObject:
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

    def to_dict(self) -> JsonObject:
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

    def to_dict(self, posix: bool | None = None) -> JsonObject:
        return {**self.rule.to_dict(posix), "line": self.line.to_dict(), "count": self.count}
