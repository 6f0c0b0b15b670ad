"""One nightly at a time: a lock file naming its holder (PID, start time, host, command).

A run that finds the lock held by a live process stops with BusyError (exit 7) and says who
holds it. A lock whose holder is gone (a crash, a reboot, a killed scheduled task) is taken over
with a message, so one bad night does not block every night after it. Reading, judging and
replacing the lock file happens under a short OS-level lock (filelock), so two runs starting
together cannot both take over the same stale lock.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import psutil
from filelock import AcquireReturnProxy, FileLock, Timeout

from pytorch_winbuild import atomic_file
from pytorch_winbuild.errors import BusyError
from pytorch_winbuild.json_file import read_json

GUARD_TIMEOUT_SECONDS = 30.0
# A process created later than the lock was written cannot be its holder (the PID was reused).
CREATE_TIME_TOLERANCE_SECONDS = 1.0
# A PID is a Windows DWORD (Linux's are below 2**22): any other number in the file is damage, not a holder.
MAX_PID = 2**32 - 1
# A lock written "later" than now by more than this is damage, not a clock set back (it would make any
# process with that PID its holder forever).
MAX_CLOCK_SKEW_SECONDS = 24 * 3600.0
MAX_LOCK_BYTES = 64 * 1024  # the file is one small object; a larger one is not a lock of ours


@dataclass(frozen=True)
class LockHolder:
    pid: int
    started: str  # ISO time, for people
    created: float  # seconds since the epoch, compared with the process's creation time
    host: str
    command: str

    def describe(self) -> str:
        return f"PID {self.pid} on {self.host}, started {self.started} ({self.command})"


def current_holder() -> LockHolder:
    now = time.time()
    return LockHolder(
        pid=os.getpid(),
        started=datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
        created=now,
        host=socket.gethostname(),
        command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200],
    )


def read_holder(path: Path) -> LockHolder | None:
    """The holder recorded in the lock file; None when there is no file. Raises ValueError when unreadable
    or damaged: a PID that no process can have, a creation time that is not a time (the caller takes such a
    lock over, so one damaged file cannot stop every later night)."""
    try:
        data = read_json(path, max_bytes=MAX_LOCK_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(str(exc)) from None
    try:
        pid, created = data["pid"], data["created"]
        holder = LockHolder(int(pid), str(data["started"]), float(created), str(data["host"]), str(data["command"]))
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"missing or malformed field {exc}") from None
    if isinstance(pid, bool) or not isinstance(pid, int) or not 1 <= pid <= MAX_PID:
        raise ValueError(f"pid {str(pid)[:40]} is not a process number (1 to {MAX_PID})")
    if not 0 <= holder.created <= time.time() + MAX_CLOCK_SKEW_SECONDS:
        raise ValueError(f"created {str(created)[:40]} is not the time a process started")
    return holder


def holder_alive(holder: LockHolder) -> bool:
    """True while the holder's process exists (another host's run cannot be checked: it counts as alive)."""
    if holder.host != socket.gethostname():
        return True
    try:
        process = psutil.Process(holder.pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return process.create_time() <= holder.created + CREATE_TIME_TOLERANCE_SECONDS
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # it exists; another user's process


def _write(path: Path, holder: LockHolder) -> None:
    atomic_file.write_json(path, asdict(holder), ensure_ascii=True, mode=atomic_file.SHARED)


class NightlyLock:
    """`with NightlyLock(path):` holds the nightly lock for the block, or raises BusyError."""

    def __init__(self, path: Path, log: Callable[[str], None] = print) -> None:
        self.path = path
        self.log = log
        self.holder = current_holder()
        self._guard = FileLock(str(path) + ".guard")

    def _guarded(self) -> AcquireReturnProxy:
        try:
            return self._guard.acquire(timeout=GUARD_TIMEOUT_SECONDS)
        except Timeout:
            raise BusyError(
                f"another nightly is starting or stopping right now ({self.path}.guard stayed locked for "
                f"{GUARD_TIMEOUT_SECONDS:.0f} s).",
                fix="wait a minute and run again.",
            ) from None

    def __enter__(self) -> NightlyLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._guarded():
            try:
                holder = read_holder(self.path)
            except ValueError as problem:
                self.log(f"-- The nightly lock {self.path} is unreadable ({problem}); taking it over.")
                holder = None
            if holder is not None:
                if holder_alive(holder):
                    raise BusyError(
                        f"another nightly is running: {holder.describe()} holds {self.path}.",
                        fix="wait for it to finish (one nightly at a time shares the cache and the output "
                        "folder); if that process is not a nightly, delete the lock file.",
                    )
                self.log(
                    f"-- Taking over the nightly lock {self.path}: its holder, {holder.describe()}, is no "
                    "longer running."
                )
            _write(self.path, self.holder)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        with self._guarded():
            try:
                holder = read_holder(self.path)
            except ValueError:
                return
            if holder == self.holder:
                self.path.unlink()
