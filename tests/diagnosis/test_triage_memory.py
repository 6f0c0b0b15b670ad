"""`invoke diagnose` holds bounded memory whatever it reads: a line with no end, an endless input.

Each test runs the real command (`python -m invoke diagnose`, as test_diagnose_cli.py does) in a
subprocess and samples its resident memory with psutil every few milliseconds; a run that passes
the bound is killed there and then, so a regression fails in about a second instead of filling
the machine (before lines were cut, 1 GiB without a line break took 2.2 GB and 57 s here, and
/dev/zero grew by about 70 MB a second without end).
"""

from __future__ import annotations

import codecs
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from support import REPO_ROOT, run_invoke

from pytorch_winbuild.diagnosis import chunks

# `python -m invoke diagnose` on a 1 kB log: about 43 MB resident (Python, Invoke, Hyperscan, RE2).
# The reader's own buffers add MAX_LINE_BYTES + CHUNK_BYTES and a few copies of a chunk.
RSS_BOUND = 150 * 1024 * 1024
# What a 16 times longer line may add to the peak: nothing but noise, since the line is cut.
GROWTH_BOUND = 16 * 1024 * 1024
SAMPLE_SECONDS = 0.01

HEAP = r"C:\pytorch\aten\src\ATen\native\cuda\Loss.cu(42): fatal error C1060: compiler is out of heap space"
FAILED = "FAILED: caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/Loss.cu.obj"


@dataclass(frozen=True)
class Run:
    peak_rss: int
    returncode: int | None  # None: still running when it was stopped
    seconds: float
    read_bytes: int  # what the process had read (Linux), 0 where psutil cannot tell
    stdout: str
    stderr: str


def _peak_so_far(process: psutil.Process) -> int:
    """The process's peak resident memory as the kernel counts it (VmHWM on Linux), else its RSS now."""
    try:
        with open(f"/proc/{process.pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return process.memory_info().rss


def watch_diagnose(*args: str, stop_after: float | None = None, timeout: float = 60) -> Run:
    """Run `python -m invoke diagnose ARGS`, sampling its memory; kill it past RSS_BOUND, `stop_after` or `timeout`."""
    command = [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), "diagnose", *args]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = psutil.Popen(command, cwd=REPO_ROOT, env=env, stdout=out, stderr=err)
        peak = read = 0
        try:
            while process.poll() is None:
                try:
                    peak = max(peak, _peak_so_far(process), process.memory_info().rss)
                    read = getattr(process.io_counters(), "read_chars", 0)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    break
                elapsed = time.perf_counter() - started
                if peak > RSS_BOUND or elapsed > timeout or (stop_after is not None and elapsed > stop_after):
                    break
                time.sleep(SAMPLE_SECONDS)
            returncode = process.poll()
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        return Run(
            peak,
            returncode,
            seconds,
            read,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


def long_line_log(path: Path, zeros: int) -> tuple[str, int]:
    """A Ninja log whose line 2 is a command line followed by `zeros` NUL bytes (a sparse hole: no disk
    used), then the failure. Returns the log's first line and the length of line 2 in bytes."""
    first = "[1/2] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/Kernel.cpp.obj\n"
    command = "cl.exe /nologo /TP -IC:\\pytorch\\aten\\src "
    with path.open("wb") as log:
        log.write((first + command).encode())
        log.seek(len(first) + len(command) + zeros)
        log.write(f" /c Kernel.cpp\n{FAILED}\ncl /nologo /c Loss.cu\n{HEAP}\nninja: build stopped.\n".encode())
    return first, len(command) + zeros + len(" /c Kernel.cpp")


def test_a_line_of_1_gib_is_cut_in_bounded_memory(tmp_path: Path) -> None:
    """Memory does not grow with the line: 64 MiB and 1 GiB without a line break peak alike, below RSS_BOUND."""
    runs = {}
    for zeros in (64 * 1024 * 1024, 1024 * 1024 * 1024):
        log = tmp_path / f"long-{zeros}.log"
        _, line_bytes = long_line_log(log, zeros)
        run = watch_diagnose(str(log), timeout=30)
        assert run.peak_rss < RSS_BOUND, f"{zeros} zeros: peak {run.peak_rss / 1e6:.0f} MB, killed"
        assert run.returncode == 0, run.stderr
        # Cut, and said so with its length; the lines after it keep their numbers.
        assert f"line 2 ({line_bytes} bytes)" in run.stdout
        assert "First error (line 3, ninja):" in run.stdout
        assert "Summary (line 5): " + HEAP in run.stdout
        assert f"[line cut: {line_bytes} bytes long, only its first {chunks.MAX_LINE_BYTES} searched]" in run.stdout
        assert "[compiler-out-of-heap]" in run.stdout
        runs[zeros] = run
    small, big = runs.values()
    growth = big.peak_rss - small.peak_rss
    assert growth < GROWTH_BOUND, f"peaks {small.peak_rss / 1e6:.0f} MB and {big.peak_rss / 1e6:.0f} MB"
    assert big.seconds < 20, f"1 GiB took {big.seconds:.1f} s"


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="/dev/zero is POSIX")
def test_dev_zero_runs_in_bounded_memory() -> None:
    """An endless input without a line break: diagnose reads on, in constant memory, until stopped."""
    run = watch_diagnose("/dev/zero", stop_after=3.0)
    assert run.peak_rss < RSS_BOUND, f"peak {run.peak_rss / 1e6:.0f} MB after {run.read_bytes / 1e6:.0f} MB read"
    assert run.returncode is None, f"ended by itself ({run.returncode}): {run.stderr[-2000:]}"
    assert run.read_bytes > 256 * 1024 * 1024, f"read only {run.read_bytes / 1e6:.0f} MB"  # reading, not stuck


def _feed_forever(pipe: Path, first: bytes, block: bytes, stop: threading.Event) -> None:
    try:
        with pipe.open("wb") as out:
            out.write(first)
            while not stop.is_set():
                out.write(block)
    except OSError:  # the reader was killed: a broken pipe
        pass


# PowerShell's `>` writes UTF-16: it is transcoded before the lines are cut (it was read up to a line end).
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX: Windows has no os.mkfifo")
@pytest.mark.parametrize("bom", [b"", codecs.BOM_UTF16_LE], ids=["utf-8", "utf-16"])
def test_an_endless_pipe_without_line_breaks_runs_in_bounded_memory(tmp_path: Path, bom: bytes) -> None:
    """A FIFO fed without end and without a line break: read on in constant memory until stopped."""
    encoding = "utf-16-le" if bom else "utf-8"
    pipe = tmp_path / "log.fifo"
    os.mkfifo(pipe)
    block = ("cl.exe /nologo -IC:\\pytorch\\include " * 30_000).encode(encoding)  # about 1 MB
    stop = threading.Event()
    writer = threading.Thread(target=_feed_forever, args=(pipe, bom, block, stop), daemon=True)
    writer.start()
    try:
        run = watch_diagnose(str(pipe), stop_after=3.0)
    finally:
        stop.set()
        if writer.is_alive():  # still waiting for a reader to open the pipe: open it, so it stops
            os.close(os.open(pipe, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(timeout=10)
    assert run.peak_rss < RSS_BOUND, f"peak {run.peak_rss / 1e6:.0f} MB after {run.read_bytes / 1e6:.0f} MB read"
    assert run.returncode is None, f"ended by itself ({run.returncode}): {run.stderr[-2000:]}"
    assert run.read_bytes > 64 * 1024 * 1024, f"read only {run.read_bytes / 1e6:.0f} MB"


def test_a_rule_with_a_window_of_a_quintillion_lines_is_refused(tmp_path: Path) -> None:
    """`within_lines = 10**18` kept the whole log for the window (433 MB for a 195 MB log): exit 2 now."""
    log = tmp_path / "build.log"
    log.write_text("starting sccache\nsccache: error: timed out\n", encoding="utf-8")
    rules = tmp_path / "rules.toml"
    rules.write_text(
        "[[rule]]\nid = 'wide'\ntitle = 'Wide window'\npatterns = ['error: timed out']\n"
        f"preceded_by = ['starting sccache']\nwithin_lines = {10**18}\n"
        "explanation = 'Why.'\nfix = 'What to do.'\nsource = 'a test'\n",
        encoding="utf-8",
    )
    done = run_invoke("diagnose", str(log), "--rules", str(rules))
    assert done.returncode == 2, done.stdout
    assert f"rule 'wide'.within_lines: expected a number of lines from 0 to 10000, got {10**18}" in done.stderr
    assert "Traceback" not in done.stderr

    rules.write_text(rules.read_text().replace(str(10**18), "10000"), encoding="utf-8")
    done = run_invoke("diagnose", str(log), "--rules", str(rules))
    assert done.returncode == 0, done.stderr
    assert "[wide] Wide window" in done.stdout
