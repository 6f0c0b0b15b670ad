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
chunk at a time, a line longer than chunks.MAX_LINE_BYTES is cut (its start is matched and shown,
the result warns with its length in bytes), and the lines kept for preceded_by windows are bounded
by rules.MAX_WITHIN_LINES and log_scan.WINDOW_CHARS. An endless input (/dev/zero, a pipe that
never closes) is read on in constant memory until it ends or the user stops it.

Rules from a file other than the shipped one run on RE2 (diagnosis.LinearPattern), in time
linear in the log; a costly one may still take microseconds per character, so each such rule
has a time budget and is skipped, with a warning, once it exceeds it.

This module holds the entry points only; the work is split by concern: chunks.py reads the log,
scanner.py makes a rule set ready (with the literals that literals.py reads out of its patterns),
log_scan.py scans one log, blocks.py knows the tools' error formats, model.py holds what was
found and report.py shows it (log text is untrusted: it is made terminal-safe there).
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
