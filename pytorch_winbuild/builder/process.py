"""Run one build command: output to the console and the log, and Ctrl-C stops the whole tree.

The command starts in its own process group (a new session on Linux, CREATE_NEW_PROCESS_GROUP on
Windows), so a Ctrl-C reaches only this process, which then stops the build deliberately:
first the signal a console would send (SIGINT to the group; CTRL_BREAK_EVENT on Windows, the
only console signal a group can be sent), so Ninja and setup.py end their compilers and clean
up; then, after a grace period, every process of the tree that is still there is killed (what
`taskkill /T /F` does). The tree is read before the signal, because a child whose parent died
is no longer listed under it.

Every line is masked before anyone sees it (the log, the console, the progress bar): the exact
values of the build environment's secrets (`redact.remember_secrets`, before the command starts)
and credential patterns. Masking works on whole lines: the pipe is read line by line (a line
arrives complete however the child split its writes and however long it is), so a secret the
child writes in pieces, or that straddles the reader's buffer, is still one string to mask.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import psutil

from pytorch_winbuild.builder.memory_watch import MemoryWatch
from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.text.redact import redact_text, remember_secrets


class BuildInterrupted(Exception):
    """Ctrl-C arrived while the command ran; its process tree has been stopped."""

    def __init__(self, stopped: int, killed: int) -> None:
        super().__init__(f"{stopped} processes stopped, {killed} of them killed")
        self.stopped = stopped
        self.killed = killed


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    seconds: float


def _group_options() -> dict[str, Any]:
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def _signal_group(process: subprocess.Popen[bytes]) -> None:
    try:
        if sys.platform == "win32":
            process.send_signal(signal.CTRL_BREAK_EVENT)
        else:
            os.killpg(process.pid, signal.SIGINT)
    except (ProcessLookupError, PermissionError, OSError):
        pass  # the group is already gone


def stop_tree(process: subprocess.Popen[bytes], grace_seconds: float) -> tuple[int, int]:
    """Stop `process` and all its descendants; (how many there were, how many had to be killed)."""
    try:
        root = psutil.Process(process.pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    _signal_group(process)
    if sys.platform != "win32":
        for member in tree[1:]:
            try:
                if os.getpgid(member.pid) != process.pid:
                    member.send_signal(signal.SIGINT)  # one that left the group (setsid) gets it too
            except (psutil.Error, ProcessLookupError):
                pass
    _, alive = psutil.wait_procs(tree, timeout=grace_seconds)
    for member in alive:
        with contextlib.suppress(psutil.Error):
            member.kill()
    psutil.wait_procs(alive, timeout=grace_seconds)
    process.wait()
    return len(tree), len(alive)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")


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
    Raises BuildInterrupted after stopping the tree when Ctrl-C arrives.
    """
    remember_secrets(env)  # the build's own environment: plan and runner variables this process does not have
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            **_group_options(),
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
        for raw in process.stdout:  # complete lines (up to b"\n" or the end), never a partial chunk
            text = redact_text(_decode(raw))
            log.write(text + "\n")
            on_line(text)
        process.wait()
    except KeyboardInterrupt:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        try:
            stopped, killed = stop_tree(process, grace_seconds)
        finally:
            signal.signal(signal.SIGINT, previous)
        raise BuildInterrupted(stopped, killed) from None
    finally:
        if watch is not None:
            watch.stop()
        process.stdout.close()
        log.flush()
    return CommandResult(process.returncode, time.monotonic() - started)
