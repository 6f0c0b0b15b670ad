"""Run one build command: output to the console and the log, and a stop signal stops the whole tree.

The command starts in the tool's tree (child_processes.py); a stop signal goes to its group first, and what is left is
killed after a grace period. Every line is masked (redact) before the log, the console or the bar sees it: read whole,
line by line, and kept up to LINE_LIMIT bytes so memory stays bounded. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO

from pytorch_winbuild.builder.memory_watch import MemoryWatch
from pytorch_winbuild.child_processes import popen, stop_cause, stop_signal_number, stop_tree
from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.text.redact import longest_secret, redact_text, remember_secrets

LINE_LIMIT = 1024 * 1024  # bytes of one output line that are kept: Ninja's longest (a failed command) is ~32 KiB
CUT_MARGIN = 256  # at least this much of a cut line's end is dropped too, in case it holds part of a credential


class BuildInterrupted(Exception):
    """A stop signal (Ctrl-C, SIGTERM, ...) arrived while the command ran; its process tree has been stopped."""

    def __init__(self, stopped: int, killed: int, cause: str = "Ctrl-C", exit_code: int = 130) -> None:
        super().__init__(f"{stopped} processes stopped, {killed} of them killed")
        self.stopped = stopped
        self.killed = killed
        self.cause = cause  # "Ctrl-C", "SIGTERM", ...
        self.exit_code = exit_code


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    seconds: float


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")


def bounded_lines(stream: IO[bytes], limit: int = LINE_LIMIT) -> Iterator[tuple[bytes, int]]:
    """Each line of `stream` (up to b"\n" or the end) as (its first `limit` bytes at most, how many bytes of
    it were read past those and dropped). Never holds more than `limit` bytes of a line."""
    while True:
        head = stream.readline(limit)
        if not head:
            return
        dropped = 0
        if len(head) == limit and not head.endswith(b"\n"):
            while True:
                more = stream.readline(limit)
                if not more:
                    break
                if more.endswith(b"\n"):
                    dropped += len(more) - 1  # the line's end is not part of it
                    break
                dropped += len(more)
        yield head, dropped


def line_text(head: bytes, dropped: int) -> str:
    """The line as the log and the console show it: masked; a cut one as its first part and its length."""
    text = redact_text(_decode(head))
    if not dropped:
        return text
    keep = max(0, len(text) - max(CUT_MARGIN, longest_secret()))
    return f"{text[:keep]} [... pytorch-winbuild cut this line: {len(head) + dropped:,} bytes long]"


def run_streamed(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: TextIO,
    on_line: Callable[[str], None],
    grace_seconds: float,
    watch: MemoryWatch | None = None,
) -> CommandResult:
    """Run `command`, writing each output line (credentials redacted) to `log` and to `on_line`.

    `watch` samples the command's process tree from its start until it ends, fails or is
    interrupted (its thread is joined before this returns or raises).
    Raises BuildInterrupted after stopping the tree when a stop signal arrives (Ctrl-C, SIGTERM, ...);
    any other exception stops the tree too before it goes on.
    """
    remember_secrets(env)  # the build's own environment: plan and runner variables this process does not have
    started = time.monotonic()
    try:
        process = popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except OSError as exc:
        raise ToolchainError(
            redact_text(f"could not start `{' '.join(command)}` in {cwd}: {exc}."),
            fix="check that the program exists and the folder is readable.",
        ) from None
    assert process.stdout is not None
    if watch is not None:
        watch.start(process.pid)
    try:
        for head, dropped in bounded_lines(process.stdout):  # whole lines (to b"\n" or the end), never a partial chunk
            text = line_text(head, dropped)
            log.write(text + "\n")
            on_line(text)
        process.wait()
    except KeyboardInterrupt as stop:  # Ctrl-C, or a StopSignal (SIGTERM, SIGHUP, SIGBREAK)
        stopped, killed = stop_tree(process, grace_seconds, stop_signal_number(stop))
        cause, exit_code = stop_cause(stop)
        raise BuildInterrupted(stopped, killed, cause, exit_code) from None
    except BaseException:
        stop_tree(process, grace_seconds)  # the log's disk is full, ...: the build must not go on unseen
        raise
    finally:
        if watch is not None:
            watch.stop()
        process.stdout.close()
        log.flush()
    return CommandResult(process.returncode, time.monotonic() - started)
