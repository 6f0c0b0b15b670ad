"""Hostile input, round 3 (issue 36): what the tool runs or reads from the machine is bounded.

Real things only: interpreters that are shell scripts flooding their output, sleeping, or leaving a child
behind that holds the pipe; real FIFOs; symlinks to /dev/zero. Each case: the exit code, no traceback, the
message's size, the memory the tool used, and no process of the tree left behind.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest
from support import run_invoke

from pytorch_winbuild import child_processes
from pytorch_winbuild.builder.built_arches import built_libraries
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts import interpreter
from pytorch_winbuild.json_file import read_json
from pytorch_winbuild.planning.python_choice import PythonRequest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell scripts, FIFOs and /dev/zero")


def _script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/bash\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def _left_running(marker: str) -> list[psutil.Process]:
    """Processes whose command line holds `marker` (a sleep the script started with it as an argument)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(process.info["cmdline"] or ()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_a_flooding_child_costs_bounded_memory() -> None:
    """200 MB on stdout and stderr: each stream keeps its first and last MiB, counts the rest, and the tool's
    memory grows by a few MiB, not by the flood."""
    before = psutil.Process().memory_info().rss
    flood = "head -c 200000000 /dev/zero | tr '\\0' x; head -c 200000000 /dev/zero | tr '\\0' y >&2"
    done = child_processes.run_bounded(["/bin/sh", "-c", flood], timeout=120)
    grown = psutil.Process().memory_info().rss - before
    assert done.returncode == 0
    for text, byte in ((done.stdout, "x"), (done.stderr, "y")):
        assert len(text) < 2 * child_processes.OUTPUT_LIMIT + 100
        assert f"[... {200_000_000 - 2 * child_processes.OUTPUT_LIMIT} bytes not kept ...]" in text
        assert text.startswith(byte * 1000) and text.endswith(byte * 1000)
    assert grown < 64 * 2**20, grown


def test_a_child_that_leaves_a_grandchild_holding_the_pipe_is_answered_at_once(tmp_path: Path) -> None:
    """An interpreter that answers and backgrounds a child still holding stdout: the answer is read when it exits,
    and the child it left is stopped (no 60 s wait, no "could not be run (TimeoutExpired)")."""
    marker = f"winbuild-test-{uuid.uuid4().hex}"
    python = _script(
        tmp_path,
        "python",
        f'(exec -a {marker} sleep 1000) &\nexec {sys.executable} "$@"\n',
    )
    started = time.monotonic()
    info = interpreter.ask_python(str(python))
    assert info.version.startswith("3.") and time.monotonic() - started < 20
    assert not _left_running(marker)


def test_a_sleeping_interpreter_times_out_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = f"winbuild-test-{uuid.uuid4().hex}"
    python = _script(tmp_path, "python", f"exec -a {marker} sleep 1000\n")
    monkeypatch.setattr(interpreter, "TIMEOUT_SECONDS", 1)
    with pytest.raises(ConfigurationError) as error:
        interpreter.ask_python(str(python))
    assert "did not answer within 1 s" in error.value.message and error.value.exit_code == 2
    time.sleep(0.2)
    assert not _left_running(marker)


def test_a_flooding_interpreter_is_a_short_exit_2(tmp_path: Path) -> None:
    """--python naming a script that prints 50 MB on one line: exit 2, one short paragraph, bounded memory."""
    python = _script(tmp_path, "python", "head -c 50000000 /dev/zero | tr '\\0' z\nexit 1\n")
    done = run_invoke("build", "--dry-run", "--cuda", "cpu", "--python", str(python), cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and len(done.stderr) < 2000, len(done.stderr)
    assert "did not answer like a Python interpreter" in done.stderr
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 400 * 1024  # KiB: far below the 1-2 GB it took


def test_python_3_07_is_python_3_7_and_full_width_digits_are_refused() -> None:
    assert PythonRequest.parse("3.07") == PythonRequest("release", "3.7")
    with pytest.raises(ConfigurationError) as error:
        PythonRequest.parse("３.７")
    assert error.value.exit_code == 2 and "is neither a Python release X.Y nor a path" in error.value.message


def test_an_interpreter_answering_a_full_width_version_is_left_out_with_a_note(tmp_path: Path) -> None:
    """A python3.9 on PATH that answers "３.６.８": doctor names it as left out and carries on."""
    answer = (
        '{"version": "３.６.８", "bits": 64, "executable": "/x/python", "prefix": "/x", "implementation": "CPython", '
        '"venv": true, "pip": true, "paths": []}'
    )
    folder = tmp_path / "bin"
    folder.mkdir()
    _script(folder, "python3.9", f"echo '{answer}'\n")
    env = {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}", "PYENV_ROOT": str(tmp_path / "no-pyenv")}
    done = run_invoke("doctor", cwd=tmp_path, env=env)
    assert done.returncode in (0, 3), done.stderr
    assert "is not a version number" not in done.stdout + done.stderr
    assert f"{folder / 'python3.9'} (PATH) did not answer as a Python" in done.stdout


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _finishes(action, seconds: float = 10) -> BaseException | None:
    """Run `action` in a thread; what it raised, or AssertionError when it was still blocked after `seconds`."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
            outcome.append(None)
        except BaseException as exc:  # the outcome is what the test looks at
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return AssertionError(f"still blocked after {seconds} s")
    return outcome[0]


def test_a_fifo_is_refused_before_it_is_read(tmp_path: Path) -> None:
    outcome = _finishes(lambda: read_json(_fifo(tmp_path / "nightly-2026-11-28.json")))
    assert isinstance(outcome, OSError) and "not a regular file" in str(outcome), outcome


def test_verify_with_a_fifo_as_the_last_venv_record_does_not_hang(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "venvs").mkdir(parents=True)
    (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n# pytorch-winbuild\n")
    _fifo(cache / "venvs" / "last.json")
    done = run_invoke("verify", "--cache-dir", str(cache), cwd=tmp_path, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr


def test_build_ext_check_skips_links_and_devices(tmp_path: Path) -> None:
    """Two .so links of one size leading to /dev/zero would be hashed forever: only regular files are libraries."""
    (tmp_path / "ext.so").write_bytes(b"\x7fELF" + b"\0" * 60)
    (tmp_path / "zero_a.so").symlink_to("/dev/zero")
    (tmp_path / "zero_b.so").symlink_to("/dev/zero")
    _fifo(tmp_path / "pipe.so")
    outcome: list[list[Path]] = []
    assert _finishes(lambda: outcome.append(built_libraries(tmp_path))) is None
    assert outcome[0] == [tmp_path / "ext.so"]


def test_a_child_stopped_by_the_timeout_takes_its_tree(tmp_path: Path) -> None:
    marker = f"winbuild-test-{uuid.uuid4().hex}"
    with pytest.raises(subprocess.TimeoutExpired):
        child_processes.run_bounded(["/bin/bash", "-c", f"(exec -a {marker} sleep 1000) & wait"], timeout=1)
    time.sleep(0.2)
    assert not _left_running(marker)


@pytest.mark.parametrize(
    ("task", "flag"),
    [
        (("build", "--dry-run", "--cuda", "cpu"), "--python"),
        (("build", "--dry-run", "--cuda", "cpu"), "--cmake"),
        (("build", "--dry-run", "--cuda", "cpu"), "--source"),
        (("build", "--dry-run", "--cuda", "cpu"), "--cache-dir"),
        (("fetch-deps", "--cuda", "cpu"), "--from-dir"),
        (("fetch-deps", "--cuda", "cpu"), "--lock-file"),
        (("nightly-merge", "--part", "p"), "--output-dir"),
        (("nightly-merge", "--output-dir", "out"), "--part"),
        (("nightly-merge", "--part", "p", "--output-dir", "out"), "--previous"),
        (("nightly-site", "out"), "--stage"),
        (("nightly", "--matrix-json"), "--matrix"),
    ],
)
def test_a_name_longer_than_any_file_system_takes_is_exit_2(tmp_path: Path, task: tuple[str, ...], flag: str) -> None:
    """ENAMETOOLONG was a crash (exit 70) wherever such a path was first used: now the flag is named, exit 2."""
    done = run_invoke(*task, flag, str(tmp_path / ("x" * 300) / "file"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and f"{flag}: the name 'xxxx" in done.stderr and "300 bytes" in done.stderr
