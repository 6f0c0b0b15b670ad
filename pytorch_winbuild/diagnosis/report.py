"""TriageResult: what a triage returns, and the two ways it is shown (JSON, human text).

The only module where text from the log meets an output: it is apart from the scan so that
neutralising that text happens in one place. Log text is untrusted: `to_text` and `to_json`
neutralise terminal escape sequences and control characters (terminal_text.py), while the
result's data keeps the text as the log had it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from pytorch_winbuild.diagnosis.model import FirstError, LogLine, RuleMatch
from pytorch_winbuild.text.terminal_text import terminal_json, terminal_safe


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

    def to_dict(self) -> dict[str, object]:
        """The report's form: JSON values, in a dict a caller may add to (`diagnose --json` adds this machine's GPUs)
        before it writes it."""
        data: dict[str, object] = {
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
