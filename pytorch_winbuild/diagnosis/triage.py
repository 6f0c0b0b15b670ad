"""Find the first real error in a build log, and which diagnosis rules explain it.

A failed build ends thousands of lines after the line that matters, so triage reports the first error block and every
matching rule, in bounded memory and linear time: chunks of whole lines, one Hyperscan pass each, a regex only on the
lines it flags. Entry points only: chunks, scanner, literals, log_scan, blocks, model and report do the work.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytorch_winbuild.diagnosis.chunks import log_chunks
from pytorch_winbuild.diagnosis.log_scan import LogScan
from pytorch_winbuild.diagnosis.report import TriageResult
from pytorch_winbuild.diagnosis.rules import Rule, default_rules
from pytorch_winbuild.errors import ConfigurationError


def triage_log(path: Path | str, rules: tuple[Rule, ...] | None = None, *, posix: bool | None = None) -> TriageResult:
    """Triage a log file: its first error block and the diagnosis rules that match it, with their fixes
    for the machine the log comes from (`posix`: TriageResult.posix)."""
    path = Path(path)
    scan = LogScan(default_rules() if rules is None else rules, errors="replace")
    try:
        for chunk, cut in log_chunks(path):
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
    scan = LogScan(default_rules() if rules is None else rules, errors="surrogatepass")
    scan.feed(text.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8", "surrogatepass"))
    return replace(scan.result(source), posix=posix)
