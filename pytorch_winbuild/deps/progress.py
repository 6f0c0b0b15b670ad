"""Download (or copy) progress: a tqdm bar on a terminal, a few plain log lines in CI logs."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, Protocol

from pytorch_winbuild.text.redact import redact_text
from pytorch_winbuild.text.terminal_text import terminal_line

if TYPE_CHECKING:  # tqdm is imported only when a bar is drawn
    from tqdm import tqdm


def human_size(size: float) -> str:
    """1536 → '1.5 KB'."""
    for unit in ("B", "KB", "MB"):
        if abs(size) < 1024:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


class Progress(Protocol):
    """What a download reports while it runs."""

    def start(self, total: int | None, done: int) -> None: ...

    def advance(self, count: int) -> None: ...

    def close(self, complete: bool) -> None: ...


class LogProgress:
    """One line when a download (or a copy from a folder) starts, one every `interval` seconds, one when it
    completes."""

    def __init__(self, name: str, log: Callable[[str], None], interval: float = 30.0, copying: bool = False) -> None:
        self.name = name
        self.log = log
        self.interval = interval
        self.verbs = ("copying", "copied") if copying else ("downloading", "received")
        self.total: int | None = None
        self.done = 0
        self.received = 0
        self.started = 0.0
        self.last = 0.0

    def start(self, total: int | None, done: int) -> None:
        self.total, self.done = total, done
        self.started = self.last = time.monotonic()
        size = human_size(total) if total else "unknown size"
        resumed = f", resuming at {human_size(done)}" if done else ""
        self.log(f"{self.name}: {self.verbs[0]} ({size}{resumed})")

    def advance(self, count: int) -> None:
        self.done += count
        self.received += count
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            share = f" ({100 * self.done // self.total}%)" if self.total else ""
            self.log(f"{self.name}: {human_size(self.done)}{share}")

    def close(self, complete: bool) -> None:
        if not complete:
            return  # the retry or error message says what happened
        elapsed = max(time.monotonic() - self.started, 1e-6)
        self.log(
            f"{self.name}: {self.verbs[1]} {human_size(self.received)} in {elapsed:.1f} s "
            f"({human_size(self.received / elapsed)}/s)"
        )


class BarProgress:
    """A tqdm bar per download; bars of parallel downloads stay in their own rows."""

    def __init__(self, name: str, row: int) -> None:
        self.name = name
        self.row = row
        self.bar: tqdm[NoReturn] | None = None  # a bar of counts, over no iterable

    def start(self, total: int | None, done: int) -> None:
        from tqdm import tqdm

        if self.bar is not None:
            self.bar.close()
        self.bar = tqdm(
            total=total,
            initial=done,
            desc=self.name,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            position=self.row,
            leave=True,
            file=sys.stderr,
        )

    def advance(self, count: int) -> None:
        if self.bar is not None:
            self.bar.update(count)

    def close(self, complete: bool) -> None:
        if self.bar is not None:
            self.bar.close()


def make_progress(name: str, row: int, log: Callable[[str], None], copying: bool = False) -> Progress:
    """A bar when stderr is a terminal, sparse log lines otherwise (CI logs, redirected output); `copying`
    for a file taken from a folder (--from-dir, a file:// mirror), which is not downloaded."""
    if sys.stderr.isatty():
        return BarProgress(name, row)
    return LogProgress(name, log, copying=copying)


def log_line(message: str) -> None:
    """A log line on stderr that does not break tqdm bars; credentials never reach it, and neither does
    what a server or a path put in the message (a status line's escape sequences, a line break)."""
    text = terminal_line(redact_text(message))
    if sys.stderr.isatty():
        from tqdm import tqdm

        tqdm.write(text, file=sys.stderr)
    else:
        print(text, file=sys.stderr, flush=True)
