"""The nightly lock with real processes: a live holder, a dead one, a reused PID, an unreadable file."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from nightly_support import REPO_ROOT, run_nightly, write_matrix

from pytorch_winbuild.errors import BusyError
from pytorch_winbuild.nightly.lock import NightlyLock, read_holder

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytorch_winbuild.nightly.lock import NightlyLock

    with NightlyLock(Path(sys.argv[1])):
        print("held", flush=True)
        time.sleep(120)
    """
)


def _hold(lock: Path) -> subprocess.Popen[str]:
    """Another process holding the lock through the same API the nightly uses."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def _dead_pid() -> int:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    return int(finished.stdout)


def _write_lock(lock: Path, pid: int, created: float) -> None:
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(
        json.dumps(
            {
                "pid": pid,
                "started": "2026-01-01T03:00:00+00:00",
                "created": created,
                "host": socket.gethostname(),
                "command": "invoke nightly",
            }
        )
    )


def test_a_live_holder_makes_a_second_run_exit_7(mini_repo: Path, tmp_path: Path) -> None:
    cache, output = tmp_path / "cache", tmp_path / "out"
    matrix = write_matrix(
        tmp_path / "matrix.toml", [{"name": "cpu", "repo": str(mini_repo), "cuda": "cpu"}], output_dir=output
    )
    holder = _hold(cache / "nightly" / "nightly.lock")
    try:
        done = run_nightly("--matrix", str(matrix), "--cache-dir", str(cache))
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 7, done.stdout + done.stderr
    assert (
        done.stderr.startswith(
            f"busy: another nightly is running: PID {holder.pid} on {socket.gethostname()}, started "
        )
        and "Fix: wait for it to finish" in done.stderr
    )
    assert not output.exists() and not (cache / "nightly" / "src").exists()  # nothing was cloned, built or written


def test_the_lock_names_its_holder_and_is_removed_on_exit(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    with NightlyLock(lock) as held:
        holder = read_holder(lock)
        assert holder == held.holder and holder is not None
        assert holder.pid == os.getpid() and holder.host == socket.gethostname()
        with pytest.raises(BusyError, match=f"PID {os.getpid()} on "):
            NightlyLock(lock).__enter__()
    assert not lock.exists()


def test_a_dead_pid_is_taken_over_with_a_message(tmp_path: Path) -> None:
    lock, messages = tmp_path / "nightly.lock", []
    pid = _dead_pid()
    _write_lock(lock, pid, time.time() - 60)
    with NightlyLock(lock, log=messages.append):
        assert read_holder(lock).pid == os.getpid()  # type: ignore[union-attr]
    assert messages == [
        f"-- Taking over the nightly lock {lock}: its holder, PID {pid} on {socket.gethostname()}, started "
        "2026-01-01T03:00:00+00:00 (invoke nightly), is no longer running."
    ]


def test_a_reused_pid_is_not_the_holder(tmp_path: Path) -> None:
    """The PID lives, but its process started after the lock was written: a reboot reused the number."""
    lock, messages = tmp_path / "nightly.lock", []
    me = psutil.Process()
    _write_lock(lock, me.pid, me.create_time() - 3600)
    with NightlyLock(lock, log=messages.append):
        pass
    assert len(messages) == 1 and "is no longer running" in messages[0]


def test_an_unreadable_lock_is_taken_over(tmp_path: Path) -> None:
    lock, messages = tmp_path / "nightly.lock", []
    lock.write_text("{half a lock")
    with NightlyLock(lock, log=messages.append):
        pass
    assert (
        len(messages) == 1
        and messages[0].startswith(f"-- The nightly lock {lock} is unreadable (")
        and not lock.exists()
    )


def test_another_host_s_lock_counts_as_held(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    lock.write_text(
        json.dumps(
            {
                "pid": _dead_pid(),
                "started": "2026-01-01T03:00:00+00:00",
                "created": time.time(),
                "host": "runner-elsewhere",
                "command": "invoke nightly",
            }
        )
    )
    with pytest.raises(BusyError, match="on runner-elsewhere"):
        NightlyLock(lock).__enter__()
