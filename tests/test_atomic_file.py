"""A file written through atomic_file is the old one or the new one, never half, and no temporary stays."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import REPO_ROOT

from pytorch_winbuild import atomic_file


def test_the_new_text_replaces_the_old_whole(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("old")
    atomic_file.write_text(target, "new\n", newline="\n")
    assert target.read_bytes() == b"new\n"
    assert os.listdir(tmp_path) == ["record.json"]


def test_a_write_that_fails_halfway_keeps_the_old_file_and_leaves_nothing(tmp_path: Path) -> None:
    """A lone surrogate cannot be encoded as UTF-8: the write fails after the file was created."""
    target = tmp_path / "record.json"
    target.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        atomic_file.write_text(target, "a" * 100_000 + "\udc80")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["record.json"]


def test_a_missing_folder_is_the_callers_to_make(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_file.write_text(tmp_path / "absent" / "record.json", "x")


def test_a_text_gets_the_newlines_asked_for(tmp_path: Path) -> None:
    target = tmp_path / "script.bat"
    atomic_file.write_text(target, "a\nb\n", newline="\r\n")
    assert target.read_bytes() == b"a\r\nb\r\n"
    atomic_file.write_text(target, "a\nb\n")
    assert target.read_bytes() == ("a\nb\n".replace("\n", os.linesep)).encode()


def test_json_is_written_whole_and_indented(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_file.write_json(target, {"entry": "cpu-py311", "wheel": "torch-2.0+cpu.whl"}, newline="\n")
    assert target.read_text(encoding="utf-8") == '{\n  "entry": "cpu-py311",\n  "wheel": "torch-2.0+cpu.whl"\n}\n'
    atomic_file.write_json(target, {"host": "büro"}, ensure_ascii=True, newline="\n")
    assert json.loads(target.read_bytes()) == {"host": "büro"} and b"\\u00fc" in target.read_bytes()
    assert os.listdir(tmp_path) == ["state.json"]


@pytest.mark.skipif(os.name == "nt", reason="Windows keeps no permission bits but read-only")
def test_a_file_gets_the_permissions_asked_for(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        private, shared, kept = tmp_path / "cache.json", tmp_path / "index.html", tmp_path / "build_env.sh"
        atomic_file.write_bytes(private, b"x")
        atomic_file.write_bytes(shared, b"x", mode=atomic_file.SHARED)
        kept.write_bytes(b"old")
        os.chmod(kept, 0o775)  # group-writable: more than the umask lets a new file have
        atomic_file.write_text(kept, "new", mode=atomic_file.SHARED, keep_mode=True)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644
    assert stat.S_IMODE(kept.stat().st_mode) == 0o775 and kept.read_text() == "new"


def test_a_copy_is_a_hard_link_where_it_can_be_and_replaces_the_old_file(tmp_path: Path) -> None:
    source, target = tmp_path / "torch.whl", tmp_path / "channel" / "torch.whl"
    source.write_bytes(b"wheel")
    target.parent.mkdir()
    target.write_bytes(b"an older wheel")
    atomic_file.copy(source, target)
    assert target.read_bytes() == b"wheel" and os.path.samefile(source, target)
    assert os.listdir(target.parent) == ["torch.whl"]


def test_a_copy_of_a_missing_file_leaves_the_old_one_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "torch.whl"
    target.write_bytes(b"old")
    with pytest.raises(FileNotFoundError):
        atomic_file.copy(tmp_path / "absent.whl", target)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["torch.whl"]


def test_a_folder_is_replaced_by_a_rename(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "lib.dll").write_bytes(b"dll")
    atomic_file.replace(tmp_path / "work", tmp_path / "mkl")
    assert os.listdir(tmp_path) == ["mkl"] and (tmp_path / "mkl" / "lib.dll").read_bytes() == b"dll"


# --------------------------------------------------------------------------------------------
# A rename refused for a moment (Windows, while a reader holds the target open)
# --------------------------------------------------------------------------------------------

REPLACE = (
    "import sys, time\nfrom pytorch_winbuild import atomic_file\nstart = time.monotonic()\n"
    "try:\n    atomic_file.replace(sys.argv[1], sys.argv[2])\nexcept PermissionError:\n    print('refused')\n"
    "print(round(time.monotonic() - start, 2))\n"
)


def _drop_root_file_access() -> None:
    """In the child: give up CAP_DAC_OVERRIDE, so that root, like any user, cannot rename in a read-only folder."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(24, 1, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, CAP_DAC_OVERRIDE
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@contextlib.contextmanager
def _refused(folder: Path, target: Path) -> Iterator[Callable[[], None]]:
    """While it lasts, a rename over `target` is refused, as on Windows while a server reads it (there: it is held open;
    elsewhere: its folder is read-only); the function given ends the refusal early."""
    if os.name == "nt":
        stream = target.open("rb")  # opened without FILE_SHARE_DELETE: no rename may replace it
        release: Callable[[], None] = stream.close
    else:
        folder.chmod(0o555)
        release = functools.partial(folder.chmod, 0o755)
    try:
        yield release
    finally:
        release()


def _replace_in_child(source: Path, target: Path) -> subprocess.Popen[str]:
    as_plain_user = _drop_root_file_access if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    return subprocess.Popen(
        [sys.executable, "-c", REPLACE, str(source), str(target)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=as_plain_user,
    )


def test_a_rename_refused_for_a_moment_is_tried_again(tmp_path: Path) -> None:
    folder = tmp_path / "simple"
    folder.mkdir()
    source, target = folder / ".index.html.1.tmp", folder / "index.html"
    source.write_text("new")
    target.write_text("old")
    with _refused(folder, target) as release:
        child = _replace_in_child(source, target)
        time.sleep(0.5)  # the child has started and been refused at least once
        release()
        out, _ = child.communicate(timeout=60)
    assert child.returncode == 0 and "refused" not in out, out
    assert target.read_text() == "new" and os.listdir(folder) == ["index.html"]


def test_a_rename_refused_for_longer_raises_and_changes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "simple"
    folder.mkdir()
    source, target = folder / ".index.html.1.tmp", folder / "index.html"
    source.write_text("new")
    target.write_text("old")
    with _refused(folder, target):
        child = _replace_in_child(source, target)
        out, _ = child.communicate(timeout=60)
    assert out.splitlines()[0] == "refused" and float(out.splitlines()[1]) >= sum(atomic_file.REPLACE_RETRIES[:-1])
    assert target.read_text() == "old" and source.read_text() == "new"
