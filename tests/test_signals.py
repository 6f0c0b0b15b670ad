"""Stop signals stop the whole child tree, write what Ctrl-C writes, and exit with the signal's code (issue 29).

Everything here is real: `python -m invoke build-ext` whose setup.py starts a `sleep 300` grandchild, `invoke
fetch-deps` during a real 7-Zip extraction of an archive made at test time, and a signal sent with os.kill to
the tool's own process, as `kill -TERM PID`, `timeout`, `docker stop`, systemd and a CI cancel do (not to its
process group, as a terminal's Ctrl-C does). What must hold: the exit code 128 + the signal's number, the
report saying what stopped the build, no process of the child tree left (by pid and by process group), and the
cache lock free only once the children are gone. Also: a setup.py printing 256 MiB without a newline leaves the
tool's memory bounded (its RSS sampled all along with psutil).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from support import REPO_ROOT

from pytorch_winbuild import child_processes
from pytorch_winbuild.builder.process import LINE_LIMIT, bounded_lines, line_text
from pytorch_winbuild.child_processes import StopSignal, stop_signals
from pytorch_winbuild.text.redact import REDACTED, forget_secrets, remember_secret

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process groups")

MKL = "mkl_2020.2.254.7z"


def start_tool(*args: str) -> subprocess.Popen[str]:
    """`python -m invoke ARGS` in its own session (so the test can clean up after a failure), no terminal."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env.pop("CI", None)
    return subprocess.Popen(
        [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )


def wait_for_child(tool: subprocess.Popen[str], wanted, seconds: float = 60) -> psutil.Process:
    """The first descendant of the tool for which `wanted(its command line)` holds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert tool.poll() is None, tool.communicate()
        try:
            for child in psutil.Process(tool.pid).children(recursive=True):
                try:
                    if wanted(child.cmdline()):
                        return child
                except psutil.Error:
                    continue
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.01)
    raise AssertionError("the child never started")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_members(pgid: int) -> list[str]:
    """Live processes of the process group `pgid`."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(" ".join(process.info["cmdline"] or []))
        except (ProcessLookupError, PermissionError):
            continue
    return found


def clean_up(tool: subprocess.Popen[str], pids: list[int]) -> None:
    """After a failed test: nothing of it may keep running."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    if tool.poll() is None:
        os.killpg(tool.pid, signal.SIGKILL)
        tool.wait()


def descendant(wanted, seconds: float = 30) -> psutil.Process:
    """The first descendant of this (the test's) process whose command line `wanted` accepts."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for child in psutil.Process().children(recursive=True):
            with_command = None
            try:
                with_command = child.cmdline()
            except psutil.Error:
                continue
            if wanted(with_command):
                return child
        time.sleep(0.01)
    raise AssertionError("the child never started")


# ---------------------------------------------------------------------------------------------- the helper


def test_a_child_waited_for_in_another_thread_is_stopped_by_sigterm_with_its_tree() -> None:
    """7-Zip runs in fetch-deps' extraction pool: the signal lands in the main thread, and the pool's thread
    stops its child's whole group (a shell and its `sleep`) and raises the same stop."""
    raised: list[BaseException] = []

    def extract() -> None:
        try:
            child_processes.run(["sh", "-c", "sleep 30 & wait"])
        except BaseException as exc:
            raised.append(exc)

    with stop_signals():
        worker = threading.Thread(target=extract)
        worker.start()
        sleep = descendant(lambda command: command == ["sleep", "30"])
        shell = sleep.parent()
        with pytest.raises(StopSignal) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)  # the handler raises here
        worker.join(timeout=30)
        started_after = None
        try:
            child_processes.run(["true"])
        except StopSignal as exc:
            started_after = exc
    assert (caught.value.signal_name, caught.value.exit_code) == ("SIGTERM", 143)
    assert not worker.is_alive() and len(raised) == 1 and isinstance(raised[0], StopSignal)
    assert not alive(sleep.pid) and shell is not None and not alive(shell.pid)
    assert started_after is not None, "once stopped, the tool starts no child"


def test_a_child_that_keeps_the_terminal_is_still_stopped_with_its_tree() -> None:
    """git may prompt on the terminal, so it stays in the tool's process group; its tree is signalled one by one."""

    def send_when_started() -> None:
        descendant(lambda command: command == ["sleep", "31"])
        os.kill(os.getpid(), signal.SIGTERM)

    with stop_signals():
        sender = threading.Thread(target=send_when_started)
        sender.start()
        with pytest.raises(StopSignal):
            child_processes.run(["sh", "-c", "sleep 31 & wait"], terminal=True, capture_output=True)
        sender.join()
    assert not any(
        command == ["sleep", "31"] for command in (p.info["cmdline"] for p in psutil.process_iter(["cmdline"]))
    )


# ---------------------------------------------------------------------------------------------- build-ext

SETUP_SLEEPS = """\
import subprocess
print("setup.py started", flush=True)
subprocess.run(["sleep", "300"])
"""


@pytest.mark.parametrize(("signum", "name"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP")])
def test_a_stop_signal_stops_build_ext_and_its_grandchild_and_writes_the_report(
    tmp_path: Path, signum: int, name: str
) -> None:
    extension = tmp_path / "ext"
    extension.mkdir()
    (extension / "setup.py").write_text(SETUP_SLEEPS, encoding="utf-8")
    logs = tmp_path / "logs"
    tool = start_tool(
        "build-ext", str(extension), "--cache-dir", str(tmp_path / "cache"), "--log-dir", str(logs),
        "--compiler-cache", "none",
    )  # fmt: skip
    tree: list[int] = []
    try:
        sleep = wait_for_child(tool, lambda command: command[:2] == ["sleep", "300"])
        setup = sleep.parent()
        assert setup is not None and "setup.py" in setup.cmdline()
        tree = [setup.pid, sleep.pid]
        group = os.getpgid(setup.pid)
        os.kill(tool.pid, signum)  # `kill -TERM PID`: the tool alone, not its process group
        stdout, stderr = tool.communicate(timeout=60)
        survivors = [pid for pid in tree if alive(pid)]
        in_group = group_members(group)
    finally:
        clean_up(tool, tree)

    assert tool.returncode == 128 + signum, stdout[-3000:] + stderr
    assert survivors == [] and in_group == [], "no process of the build's tree may outlive the tool"
    assert stderr.strip().startswith(f"interrupted: stopped by {name}: the build's 2 processes were stopped"), stderr
    assert "Traceback" not in stderr
    assert "== pytorch-winbuild build-ext interrupted in" in stdout
    reports = sorted(logs.glob("*.json"))
    assert len(reports) == 1, "the report is written, as for Ctrl-C"
    report = json.loads(reports[0].read_text(encoding="utf-8"))
    assert report["result"] == "interrupted" and report["exit_code"] == 128 + signum
    assert f"stopped by {name}" in report["error"]
    assert "setup.py started" in Path(report["log"]).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------- fetch-deps


@pytest.fixture(scope="module")
def slow_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MKL-shaped .7z that 7-Zip takes seconds to extract: 6 MB of random bytes with PPMd, which decodes at
    about 4 MB/s (made in as long, with 7-Zip)."""
    work = tmp_path_factory.mktemp("slow")
    tree = work / "tree"
    (tree / "include").mkdir(parents=True)
    (tree / "lib").mkdir()
    (tree / "include" / "mkl.h").write_text("#define MKL_VERSION 1\n")
    (tree / "lib" / "mkl.dll").write_bytes(os.urandom(6_000_000))
    served = work / "served"
    served.mkdir()
    subprocess.run(
        ["7zz", "a", "-m0=PPMd", str(served / MKL), "include", "lib"], cwd=tree, check=True, capture_output=True
    )
    return served


def lock_is_free(path: Path) -> bool:
    from filelock import FileLock, Timeout

    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    lock.release()
    return True


@pytest.mark.network
@pytest.mark.parametrize(("signum", "words"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")])
def test_a_stop_signal_during_extraction_stops_7zip_before_the_cache_lock_is_released(
    slow_archive: Path, tmp_path: Path, signum: int, words: str
) -> None:
    cache = tmp_path / "cache"
    tool = start_tool(
        "fetch-deps", "--cuda", "cpu", "--mkl-version", "2020.2.254", "--from-dir", str(slow_archive),
        "--cache-dir", str(cache), "--lock-file", str(tmp_path / "deps.lock"),
    )  # fmt: skip
    seven: list[int] = []
    try:
        extracting = wait_for_child(tool, lambda command: len(command) > 1 and command[1] == "x")
        seven = [extracting.pid]
        time.sleep(0.3)  # well into the extraction (seconds long)
        assert alive(extracting.pid)
        os.kill(tool.pid, signum)
        deadline = time.monotonic() + 60
        while not lock_is_free(cache / ".lock"):
            assert time.monotonic() < deadline, "the cache lock was never released"
            time.sleep(0.005)
        extracting_when_free = alive(extracting.pid)
        _, stderr = tool.communicate(timeout=60)
    finally:
        clean_up(tool, seven)

    assert tool.returncode == 128 + signum, stderr
    assert not extracting_when_free, "the cache lock was free while 7-Zip still wrote into the cache"
    assert not alive(extracting.pid)
    assert f"interrupted: stopped by {words}." in stderr and "Traceback" not in stderr
    assert not (cache / "deps" / "mkl_2020.2.254").exists(), "a stopped run installs nothing"
    assert [p.name for p in (cache / "deps").iterdir()] == [], "the work folder is removed"
    assert (cache / "downloads" / MKL).is_file(), "the verified archive is kept for the next run"


# ---------------------------------------------------------------------------------------------- long lines

FLOOD_MIB = 256
SETUP_FLOODS = f"""\
import sys
chunk = b"x" * (1 << 20)
for _ in range({FLOOD_MIB}):
    sys.stdout.buffer.write(chunk)
sys.stdout.buffer.write(b"\\nafter the flood\\n")
"""


def test_a_line_of_256_mib_without_a_newline_leaves_the_memory_bounded(tmp_path: Path) -> None:
    extension = tmp_path / "ext"
    extension.mkdir()
    (extension / "setup.py").write_text(SETUP_FLOODS, encoding="utf-8")
    logs = tmp_path / "logs"
    tool = start_tool(
        "build-ext", str(extension), "--cache-dir", str(tmp_path / "cache"), "--log-dir", str(logs),
        "--compiler-cache", "none",
    )  # fmt: skip
    peak = [0]
    process = psutil.Process(tool.pid)

    def sample() -> None:
        while tool.poll() is None:
            try:
                peak[0] = max(peak[0], process.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        stdout, stderr = tool.communicate(timeout=120)
    finally:
        clean_up(tool, [])
        sampler.join()

    assert tool.returncode == 0, stdout[-3000:] + stderr
    print(f"peak RSS of `invoke build-ext`: {peak[0] / 2**20:.0f} MiB")
    assert 0 < peak[0] < 160 * 2**20, f"the tool's RSS reached {peak[0] / 2**20:.0f} MiB"
    note = f"[... pytorch-winbuild cut this line: {FLOOD_MIB * 2**20:,} bytes long]"
    assert note in stdout and len(stdout) < 2 * LINE_LIMIT, "the console gets the line's start and a note"
    log = json.loads(sorted(logs.glob("*.json"))[0].read_text(encoding="utf-8"))["log"]
    lines = Path(log).read_text(encoding="utf-8").splitlines()
    cut = next(line for line in lines if line.startswith("xxx"))
    assert cut.endswith(note) and len(cut) <= LINE_LIMIT + len(note) + 1
    assert "after the flood" in lines, "the lines after it are whole"


def test_a_cut_line_never_shows_part_of_a_secret() -> None:
    """A credential straddling the cut is dropped with the line's tail, as it could not be masked whole."""
    forget_secrets()
    secret = "tok-" + "s" * 300 + "-end"
    remember_secret(secret)
    try:
        for offset in (1, 10, 200, len(secret) - 1):
            line = b"a" * (LINE_LIMIT - offset) + secret.encode() + b"b" * 100 + b"\nnext line\n"
            (head, dropped), (second, none) = list(bounded_lines(io.BytesIO(line)))
            assert len(head) == LINE_LIMIT and dropped == len(secret) - offset + 100
            text = line_text(head, dropped)
            assert "tok-" not in text and "sss" not in text and REDACTED not in text
            assert text.endswith("bytes long]") and line_text(second, none) == "next line"
        whole = b"a" * 100 + secret.encode() + b"\n"
        assert [line_text(*item) for item in bounded_lines(io.BytesIO(whole))] == ["a" * 100 + REDACTED]
    finally:
        forget_secrets()
