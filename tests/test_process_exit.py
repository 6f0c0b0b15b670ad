"""A successful command ends without Python's teardown, and loses nothing a normal exit gives.

Everything runs as a user runs it, in a real process: `python -m invoke` with a tasks file that
loads our collection and leaves three observers behind (an object whose finalizer runs only in
Python's teardown, an atexit handler, and optionally a non-daemon thread), and the console script's
`main()`. The observers write files, so what each exit did is read from the disk afterwards.
"""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import REPO_ROOT

from pytorch_winbuild.faces import process_exit

OBSERVERS = """
import atexit, os, threading

EVENTS = os.environ["EXIT_EVENTS"]

def note(name, _open=os.open, _write=os.write, _close=os.close, _join=os.path.join):
    handle = _open(_join(EVENTS, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    _write(handle, b"ran")
    _close(handle)

class Teardown:
    def __del__(self):  # module globals are released only in Python's teardown
        note("teardown")

KEEP = Teardown()
atexit.register(note, "atexit")
if os.environ.get("WAITING_THREAD"):
    # Still running when the command returns, however loaded the machine: it ends when the main thread has
    # stopped, which the normal exit's threading._shutdown() does before it waits for the other threads.
    threading.Thread(target=lambda: (threading.main_thread().join(), note("thread"))).start()
"""


def _events(tmp_path: Path) -> Path:
    events = tmp_path / "events"
    events.mkdir()
    return events


def run_observed(
    tmp_path: Path, *args: str, python_flags: list[str] | None = None, **env: str
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`python [FLAGS] -m invoke ARGS` from a folder whose tasks.py is our collection plus the observers."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "tasks.py").write_text(OBSERVERS + "\nfrom pytorch_winbuild.faces.tasks import namespace as ns\n")
    events = _events(tmp_path)
    done = subprocess.run(
        [sys.executable, *(python_flags or []), "-m", "invoke", "--search-root", str(root), *args],
        cwd=REPO_ROOT,
        env={**os.environ, "EXIT_EVENTS": str(events), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, {path.name for path in events.iterdir()}


def test_a_successful_command_skips_the_teardown_but_runs_atexit(tmp_path: Path) -> None:
    done, events = run_observed(tmp_path, "env", "--cuda", "cpu", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert events == {"atexit"}
    # the output went through a pipe (block-buffered) and arrives whole, up to its last key: it was flushed
    plan = json.loads(done.stdout)
    assert list(plan)[-1] == "warnings" and plan["env"]


def test_a_failed_command_exits_the_usual_way(tmp_path: Path) -> None:
    done, events = run_observed(tmp_path, "build", "--cuda", "99.9", "--dry-run")
    assert done.returncode == 2, done.stderr
    assert "99.9" in done.stderr
    assert events == {"atexit", "teardown"}  # the observers work: the normal exit releases the module


def test_a_running_thread_is_waited_for(tmp_path: Path) -> None:
    done, events = run_observed(tmp_path, "build", "--cuda", "cpu", "--dry-run", WAITING_THREAD="1")
    assert done.returncode == 0, done.stderr
    assert events == {"thread", "atexit", "teardown"}


@pytest.mark.parametrize(
    "python_flags", [["-X", "dev"], ["-i"]], ids=["development mode", "interactive prompt afterwards"]
)
def test_a_process_being_examined_exits_the_usual_way(python_flags: list[str], tmp_path: Path) -> None:
    done, events = run_observed(tmp_path, "build", "--cuda", "cpu", "--dry-run", python_flags=python_flags)
    assert done.returncode == 0, done.stderr
    assert events == {"atexit", "teardown"}


def test_a_profiler_gets_its_report(tmp_path: Path) -> None:
    """`python -m cProfile -o FILE -m invoke ...` writes FILE after the command returns."""
    report = tmp_path / "profile.out"
    done, events = run_observed(
        tmp_path, "build", "--cuda", "cpu", "--dry-run", python_flags=["-m", "cProfile", "-o", str(report)]
    )
    assert done.returncode == 0, done.stderr
    assert "teardown" in events
    assert any("build" in str(function) for function in pstats.Stats(str(report)).stats)  # type: ignore[attr-defined]


def test_a_reader_that_goes_away_still_gives_exit_0() -> None:
    """`invoke build --dry-run | head -c1`: the plan's print fails, the command stops quietly."""
    process = subprocess.Popen(
        [sys.executable, "-m", "invoke", "build", "--cuda", "cpu", "--dry-run"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(1)
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0
    assert "Traceback" not in stderr and "Exception ignored" not in stderr


def test_the_console_script_ends_the_same_way(tmp_path: Path) -> None:
    events = _events(tmp_path)
    script = OBSERVERS + textwrap.dedent(
        """
        import sys
        from pytorch_winbuild.faces.program import main
        sys.argv = ["pytorch-winbuild", *sys.argv[1:]]
        main()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "build", "--cuda", "cpu", "--dry-run"],
        cwd=tmp_path,
        env={**os.environ, "EXIT_EVENTS": str(events)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Plan for" in done.stdout
    assert {path.name for path in events.iterdir()} == {"atexit"}


def test_an_in_process_program_does_not_end_the_process() -> None:
    """The tests themselves run Programs in-process: only the command line's own Program ends it."""
    from invoke import Program

    from pytorch_winbuild.faces.tasks import namespace

    program = Program(namespace=namespace)
    assert not process_exit.owns_process(program)


@pytest.mark.parametrize("daemon", [True, False])
def test_only_non_daemon_threads_hold_the_exit(daemon: bool) -> None:
    import threading

    release = threading.Event()
    thread = threading.Thread(target=release.wait, daemon=daemon)
    thread.start()
    try:
        assert process_exit._other_threads_running() is (not daemon)
    finally:
        release.set()
        thread.join()
