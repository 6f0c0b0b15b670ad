"""--lock-file names a regular file, or one to create (issue 29 point 2). A device node became a regular file
holding the lock's text (as root, `--lock-file /dev/null` would replace the system's), a FIFO hung the run with
nothing printed, and a symlink was replaced itself while its target kept the old text. Now: a device, pipe or
folder is refused with exit 2 before anything is read or written, and a link is written through, as
`invoke env --output` does. Real nodes: a character device made with mknod (the null device's numbers, in a
test folder), a FIFO made with mkfifo, a real symlink; a real download from a local server records the entry."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from deps_support import FaultServer, run_cli

pytestmark = pytest.mark.network

ARGS = ("--cuda", "cpu", "--mkl-version", "2020.2.254")


def _fetch(tmp_path: Path, lock: Path, server_url: str):
    return run_cli(
        "fetch-deps",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--lock-file",
        str(lock),
        "--mirror",
        server_url,
        *ARGS,
        timeout=60,
    )


def _device(path: Path) -> Path:
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # tests run as root (CI and here): mknod is allowed
    return path


@pytest.mark.parametrize("kind", ["device", "fifo", "folder"])
def test_a_lock_file_that_is_not_a_regular_file_is_refused(server: FaultServer, tmp_path: Path, kind: str):
    lock = tmp_path / "deps.lock"
    if kind == "device":
        _device(lock)
    elif kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    before = os.stat(lock)
    result = _fetch(tmp_path, lock, server.url)  # a hang here is a timeout failure, as the FIFO did
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"the lock file {lock} is not a regular file" in result.stderr and "Traceback" not in result.stderr
    after = os.stat(lock)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert not (tmp_path / "cache" / "downloads").exists() or not any((tmp_path / "cache" / "downloads").iterdir())


def test_a_symlinked_lock_file_is_written_through(server: FaultServer, tmp_path: Path):
    target = tmp_path / "shared" / "deps.lock"
    target.parent.mkdir()
    target.write_text("# the team's lock\n", encoding="utf-8")
    link = tmp_path / "deps.lock"
    link.symlink_to(target)
    result = _fetch(tmp_path, link, server.url)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and link.resolve() == target
    recorded = target.read_text(encoding="utf-8")
    assert recorded.startswith("# the team's lock\n") and '["mkl_2020.2.254.7z"]' in recorded
