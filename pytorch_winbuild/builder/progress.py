"""What the user sees while a build runs: its output, and how far it is.

On a terminal Ninja's `[n/m]` lines drive a tqdm bar with an ETA; without one, a plain progress line now and then.
A resumed build (builder/resume.py) first says that Ninja's count is what is left, and what the last build kept.
Everything shown passes through `redact.redact_text`, and a lock keeps the memory watch's low-memory lines and the
build's from interleaving. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from tqdm import tqdm

from pytorch_winbuild.builder.settings import ProgressSettings
from pytorch_winbuild.text.redact import redact_text


@dataclass(frozen=True)
class Step:
    done: int
    total: int
    counted: bool = field(default=True, compare=False)  # steps counted ([n/m]), not a percentage ([ 45%])


def parse_progress(line: str, settings: ProgressSettings) -> Step | None:
    """The build's position from one output line, or None when the line says nothing about it."""
    for pattern in settings.patterns:
        match = pattern.match(line)
        if match is None:
            continue
        groups = match.groupdict()
        if groups.get("percent") is not None:
            return Step(min(int(groups["percent"]), 100), 100, counted=False)
        return Step(int(groups["done"]), int(groups["total"]))
    return None


def is_interactive(stream: TextIO) -> bool:
    """A bar only for a person at a terminal; CI sets CI=true even when it fakes a terminal."""
    return stream.isatty() and not os.environ.get("CI")


def _clock_text(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class ProgressDisplay:
    """Takes every output line of the build; prints it, or turns it into progress."""

    def __init__(
        self,
        settings: ProgressSettings,
        stream: TextIO | None = None,
        *,
        interactive: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        kept_objects: int | None = None,
    ) -> None:
        """`kept_objects`: a build that continues in an existing folder, with the objects compiled before."""
        self._settings = settings
        self._stream = stream or sys.stdout
        self._interactive = is_interactive(self._stream) if interactive is None else interactive
        self._clock = clock
        self._bar: tqdm | None = None
        self._started = clock()
        self._total: int | None = None
        self._first: tuple[float, int] = (self._started, 0)  # (time, done) when this total was first seen
        self._next_percent = 0
        self._last_plain = self._started
        self._lock = threading.Lock()
        self._low_memory = False
        self._kept = kept_objects  # None once said, or when the build starts afresh
        self.last_step: Step | None = None

    def line(self, text: str) -> None:
        with self._lock:
            self._line(redact_text(text))

    def memory(self, text: str | None) -> None:
        """The memory watch's callback: `text` when available memory falls under the floor (printed
        once), None when it is back."""
        with self._lock:
            self._low_memory = text is not None
            if text is not None:
                self._print(f"-- {text}")
            if self._bar is not None:
                self._bar.set_description_str("LOW MEMORY" if self._low_memory else "", refresh=True)

    def _line(self, text: str) -> None:
        step = parse_progress(text, self._settings)
        if step is None:
            self._print(text)
            return
        self.last_step = step
        self._say_resumed(step, text)
        if step.total != self._total:
            # Ninja runs again (CMake re-configured, another target): a new count starts.
            self._total = step.total
            self._first = (self._clock(), step.done)
            self._next_percent = 0
        if self._interactive:
            self._update_bar(step, text)
        else:
            self._maybe_plain(step)

    def _say_resumed(self, step: Step, text: str) -> None:
        """Before the first count of a resumed build: Ninja counts only what is left, so its total is not the
        build's. Said at the first step that is not Ninja regenerating its own build file."""
        description = text.split("] ", 1)[-1]
        if self._kept is None or not step.counted or description.startswith(self._settings.regenerate):
            return
        kept, self._kept = self._kept, None
        self._print(
            f"-- resumed: Ninja runs the {step.total} steps left of the build; {kept} compiled "
            f"object{'' if kept == 1 else 's'} of the last build {'is' if kept == 1 else 'are'} kept."
        )

    def _print(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=self._stream)
        else:
            self._stream.write(text + "\n")
            self._stream.flush()

    def _update_bar(self, step: Step, text: str) -> None:
        if self._bar is None or self._bar.total != step.total:
            if self._bar is not None:
                self._bar.close()
            self._bar = tqdm(
                total=step.total,
                initial=step.done,
                file=self._stream,
                unit="step",
                dynamic_ncols=True,
                mininterval=0.5,
                leave=True,
            )
            if self._low_memory:
                self._bar.set_description_str("LOW MEMORY", refresh=False)
        self._bar.update(step.done - self._bar.n)
        self._bar.set_postfix_str(text.split("] ", 1)[-1][:60], refresh=False)

    def eta_seconds(self, step: Step) -> float | None:
        """Remaining time at the rate since this count began; None before any step is done."""
        start_time, start_done = self._first
        done = step.done - start_done
        if done <= 0:
            return None
        return (self._clock() - start_time) / done * (step.total - step.done)

    def _maybe_plain(self, step: Step) -> None:
        now = self._clock()
        percent = 100 * step.done // step.total if step.total else 100
        due = (
            percent >= self._next_percent
            or now - self._last_plain >= self._settings.plain_every_seconds
            or step.done == step.total
        )
        if not due:
            return
        every = self._settings.plain_every_percent
        self._next_percent = (percent // every + 1) * every
        self._last_plain = now
        eta = self.eta_seconds(step)
        eta_text = f", ETA {_clock_text(eta)}" if eta is not None else ""
        memory_text = ", LOW MEMORY" if self._low_memory else ""
        self._print(
            f"-- progress: {step.done}/{step.total} ({percent}%), elapsed {_clock_text(now - self._started)}"
            f"{eta_text}{memory_text}"
        )

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
