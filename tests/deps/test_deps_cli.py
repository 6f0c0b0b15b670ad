"""`invoke fetch-deps` and `invoke clean` as a user runs them: real processes, real exit codes."""

from __future__ import annotations

import fcntl
import os
import pty
import shlex
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import py7zr
import pytest
from deps_support import MAGMA_BCJ2, MKL, REPO_ROOT, FaultServer, Made, make_tree, pack_py7zr, run_cli

pytestmark = pytest.mark.network


def fetch_deps(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "fetch-deps", "--cache-dir", str(tmp_path / "cache"), "--lock-file", str(tmp_path / "deps.lock"), *args
    )


def assert_user_error(result: subprocess.CompletedProcess[str], code: int, *phrases: str) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    for phrase in phrases:
        assert phrase in result.stderr


def test_cold_then_warm_prints_folders_and_variables(
    server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm run is checked for what makes it fast, not timed (a loaded machine would fail a clock
    here; scripts/bench_fetch.py measures it against `invoke --version`): no request, and none of the
    cold path's libraries imported, as Python's own -X importtime reports."""
    cold = fetch_deps(
        tmp_path, "--cuda", "10.1", "--mkl-version", "2020.2.254", "--magma-version", "2.5.4", "--mirror", server.url
    )
    assert cold.returncode == 0, cold.stderr
    mkl = tmp_path / "cache" / "deps" / "mkl_2020.2.254"
    magma = tmp_path / "cache" / "deps" / "magma_2.5.4_cuda101_release"
    assert f"MKL 2020.2.254: {mkl} (downloaded" in cold.stdout
    assert f"MAGMA 2.5.4 cuda101 release: {magma} (downloaded" in cold.stdout
    exports = [line.strip() for line in cold.stdout.splitlines() if line.startswith("  export ")]
    show = 'printf "%s|" "$CMAKE_INCLUDE_PATH" "$LIB" "$MAGMA_HOME"'
    shell = subprocess.run(
        ["bash", "-c", "\n".join([*exports, show])], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True
    )
    assert shell.stdout == f"{mkl / 'include'}|{mkl / 'lib'}|{magma}|"  # what bash sets from the printed lines
    assert "%LIB%" not in cold.stdout and 'set "' not in cold.stdout
    assert cold.stderr.count(": downloading (") == 2 and "%|" not in cold.stderr  # not a terminal: plain lines
    served = len(server.requests)

    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # -X importtime: one stderr line per module imported
    warm = fetch_deps(
        tmp_path, "--cuda", "10.1", "--mkl-version", "2020.2.254", "--magma-version", "2.5.4", "--mirror", server.url
    )
    assert warm.returncode == 0, warm.stderr
    timings = [line for line in warm.stderr.splitlines() if line.startswith("import time:")]
    assert warm.stdout.count("already in the cache") == 2 and len(timings) == len(warm.stderr.splitlines())
    assert len(server.requests) == served  # zero bytes, zero requests
    imported = {line.rsplit("|", 1)[1].strip() for line in timings}
    assert "pytorch_winbuild.deps.fetch" in imported  # the report is the real one
    assert not imported & {"requests", "urllib3", "py7zr", "tqdm", "pytorch_winbuild.deps.pipeline"}


def test_without_cuda_only_mkl_and_a_note_that_magma_needs_it(server: FaultServer, tmp_path: Path) -> None:
    result = fetch_deps(tmp_path, "--mirror", server.url)
    assert result.returncode == 0, result.stderr
    assert "MAGMA was not fetched" in result.stdout and "--cuda X.Y" in result.stdout
    assert [r.name for r in server.requests] == [MKL]
    cpu = fetch_deps(tmp_path, "--cuda", "cpu", "--mirror", server.url)
    assert cpu.returncode == 0 and "MAGMA" not in cpu.stdout
    dry = run_cli("fetch-deps", "--dry-run", "--cache-dir", str(tmp_path / "dry"))  # the README: "the output says so"
    assert dry.returncode == 0 and "MAGMA would not be fetched" in dry.stdout and "--cuda X.Y" in dry.stdout
    pinned = run_cli("fetch-deps", "--dry-run", "--cuda", "cpu", "--mkl-version", "2018.2.185")
    assert pinned.returncode == 0 and "defaults" not in pinned.stdout and "MAGMA" not in pinned.stdout


def test_mirror_from_invoke_configuration_environment(
    server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INVOKE_WINBUILD_MIRROR", server.url)
    result = fetch_deps(tmp_path, "--cuda", "9.0", "--mkl-version", "2020.2.254", "--no-magma")
    assert result.returncode == 0, result.stderr
    assert [r.name for r in server.requests] == [MKL]


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (["--cuda", "9.1"], ["configuration error: no MAGMA release archive for CUDA 9.1", "--no-magma"]),
        (
            ["--cuda", "9.0", "--magma-version", "2.4.0", "--magma-debug"],
            ["no MAGMA debug archive for CUDA 9.0", "2.4.0 release"],
        ),
        (["--mkl-version", "2019.0"], ["unknown MKL version '2019.0'"]),
        (["--cuda", "ten"], ["--cuda 'ten' is not X.Y (e.g. 9.0), 'cpu' or 'auto'"]),
        (["--mirror", "ftp://mirror.example/"], ["is not an http://, https:// or file:// URL"]),
        (["--mirror", "http://127.0.0.1:9/", "--from-dir", "."], ["--mirror and --from-dir were both given"]),
    ],
)
def test_bad_options_exit_2(tmp_path: Path, args: list[str], phrases: list[str]) -> None:
    assert_user_error(fetch_deps(tmp_path, *args), 2, *phrases)
    assert not (tmp_path / "cache" / "deps").exists()


def test_missing_file_on_the_mirror_exits_4(server: FaultServer, tmp_path: Path) -> None:
    del server.files[MAGMA_BCJ2]
    result = fetch_deps(tmp_path, "--cuda", "10.1", "--mkl-version", "2020.2.254", "--mirror", server.url)
    assert_user_error(result, 4, "dependency error:", "HTTP 404", "Fix: a mirror is a flat folder")
    assert not (tmp_path / "cache" / "deps" / "magma_2.5.4_cuda101_release").exists()
    assert (tmp_path / "cache" / "deps" / "mkl_2020.2.254").is_dir()


def test_checksum_mismatch_exits_4_and_update_lock_accepts(server: FaultServer, made: Made, tmp_path: Path) -> None:
    size = made.files[MKL].stat().st_size
    (tmp_path / "deps.lock").write_text(f'["{MKL}"]\nsha256 = "{"f" * 64}"\nsize = {size}\n', encoding="utf-8")
    result = fetch_deps(tmp_path, "--mirror", server.url)
    assert_user_error(result, 4, f"checksum mismatch for {MKL}", "--update-lock")
    assert not (tmp_path / "cache" / "deps" / "mkl_2020.2.254").exists()
    accepted = fetch_deps(tmp_path, "--mirror", server.url, "--update-lock")
    assert accepted.returncode == 0, accepted.stderr
    assert "f" * 64 not in (tmp_path / "deps.lock").read_text(encoding="utf-8")


def test_unsafe_entry_exits_4_and_writes_nothing(server: FaultServer, tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree", "mkl", 50_000)
    (tmp_path / "payload.txt").write_text("escaped")
    evil = pack_py7zr(tree, tmp_path / "evil" / MKL)
    with py7zr.SevenZipFile(evil, "a") as archive:
        archive.write(tmp_path / "payload.txt", arcname="../../escaped.txt")
    server.files[MKL] = evil
    result = fetch_deps(tmp_path, "--mirror", server.url)
    assert_user_error(result, 4, "'../../escaped.txt' with a '..' component", "not a genuine MKL/MAGMA archive")
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "cache" / "escaped.txt").exists()
    assert not (tmp_path / "cache" / "deps").exists()  # refused before any folder was made
    assert not (tmp_path / "cache" / "downloads" / MKL).exists()


def test_clean_removes_what_it_says(server: FaultServer, tmp_path: Path) -> None:
    assert fetch_deps(tmp_path, "--mirror", server.url).returncode == 0
    cache = tmp_path / "cache"
    assert_user_error(run_cli("clean", "--cache-dir", str(cache)), 2, "--deps", "--downloads")

    deps = run_cli("clean", "--deps", "--cache-dir", str(cache))
    assert deps.returncode == 0, deps.stderr
    assert f"removed {cache / 'deps'}" in deps.stdout
    assert not (cache / "deps").exists() and (cache / "downloads" / MKL).is_file()

    again = fetch_deps(tmp_path, "--mirror", server.url)
    assert "extracted from downloads/" in again.stdout and len(server.requests) == 1

    downloads = run_cli("clean", "--downloads", "--cache-dir", str(cache))
    assert downloads.returncode == 0 and not (cache / "downloads").exists() and (cache / "deps").is_dir()
    assert "nothing to remove" in run_cli("clean", "--downloads", "--cache-dir", str(cache)).stdout


def test_two_fetch_deps_at_once_download_each_file_once(server: FaultServer, tmp_path: Path) -> None:
    for name in (MKL, MAGMA_BCJ2):
        server.fault(name).seconds_per_chunk = 0.05
    command = [
        sys.executable,
        "-m",
        "invoke",
        "fetch-deps",
        "--cuda",
        "10.1",
        "--mkl-version",
        "2020.2.254",
        "--mirror",
        server.url,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--lock-file",
        str(tmp_path / "deps.lock"),
    ]
    runs = [
        subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert len(server.gets(MKL)) == 1 and len(server.gets(MAGMA_BCJ2)) == 1
    assert sum("waiting for another pytorch-winbuild run" in err for _, err in outputs) == 1
    assert sum(out.count("already in the cache") for out, _ in outputs) == 2


def _full_disk_session(tmp_path: Path, server: FaultServer, size: str) -> tuple[str, list[str]]:
    """Run fetch-deps twice with the cache on a tmpfs of `size` (grown to 200 MB in between), in a private
    mount namespace."""
    cache = tmp_path / "cache"
    cache.mkdir()
    fetch = [
        sys.executable,
        "-m",
        "invoke",
        "fetch-deps",
        "--mirror",
        server.url,
        "--cache-dir",
        str(cache),
        "--lock-file",
        str(tmp_path / "deps.lock"),
    ]
    script = "\n".join(
        [
            f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(cache))} || exit 90",
            f"{shlex.join(fetch)} >{tmp_path}/out1 2>{tmp_path}/err1; echo rc1=$?",
            f"echo deps: $(ls -A {shlex.quote(str(cache))}/deps 2>/dev/null)",
            f"echo downloads: $(ls -A {shlex.quote(str(cache))}/downloads 2>/dev/null)",
            f"mount -o remount,size=200m {shlex.quote(str(cache))} || exit 91",
            f"{shlex.join(fetch)} >{tmp_path}/out2 2>{tmp_path}/err2; echo rc2=$?",
        ]
    )
    result = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout, [(tmp_path / name).read_text() for name in ("out1", "err1", "out2", "err2")]


def test_full_disk_while_downloading_exits_4_frees_the_partial_file_and_the_next_run_succeeds(
    server: FaultServer, tmp_path: Path
) -> None:
    listing, (_out1, err1, out2, err2) = _full_disk_session(tmp_path, server, "256k")
    assert "rc1=4" in listing, err1
    assert "dependency error: the disk holding" in err1 and "is full" in err1 and "Traceback" not in err1
    assert "deps:\n" in listing  # nothing extracted
    assert "downloads:\n" in listing  # a failed download leaves no .part behind (issue 11): the space is given back
    assert "rc2=0" in listing, err2
    _first, second = server.gets(MKL)
    assert second.range is None and second.status == 200  # started afresh
    assert "(downloaded" in out2


def test_disk_too_small_to_extract_exits_4_and_keeps_the_download(server: FaultServer, tmp_path: Path) -> None:
    listing, (_out1, err1, out2, err2) = _full_disk_session(tmp_path, server, "8m")
    assert "rc1=4" in listing, err1
    assert f"extracting {MKL} needs" in err1 and "MB free" in err1
    assert "deps:\n" in listing and f"downloads: {MKL}\n" in listing
    assert "rc2=0" in listing, err2
    assert "(extracted from downloads/" in out2 and len(server.gets(MKL)) == 1


def test_progress_bar_on_a_terminal(server: FaultServer, tmp_path: Path) -> None:
    """With stderr on a terminal, tqdm draws a bar per download (in CI logs: plain lines, tested above)."""
    main_fd, terminal_fd = pty.openpty()
    fcntl.ioctl(terminal_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a 120-column terminal
    command = [
        sys.executable,
        "-m",
        "invoke",
        "fetch-deps",
        "--cuda",
        "10.1",
        "--mkl-version",
        "2020.2.254",
        "--mirror",
        server.url,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--lock-file",
        str(tmp_path / "deps.lock"),
    ]
    run = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=terminal_fd, text=True)
    os.close(terminal_fd)
    screen = b""
    while True:
        try:
            data = os.read(main_fd, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        screen += data
    run.wait(timeout=60)
    os.close(main_fd)
    text = screen.decode("utf-8", "replace")
    assert run.returncode == 0, text
    assert "100%" in text and "B/s" in text and MKL in text and MAGMA_BCJ2 in text
    assert "extracted with" in text  # log lines go through tqdm.write, above the bars


def test_ctrl_c_stops_cleanly_and_the_next_run_resumes(server: FaultServer, made: Made, tmp_path: Path) -> None:
    server.fault(MKL).seconds_per_chunk = 0.2
    command = [
        sys.executable,
        "-m",
        "invoke",
        "fetch-deps",
        "--mirror",
        server.url,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--lock-file",
        str(tmp_path / "deps.lock"),
    ]
    run = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not any(r.sent > 0 for r in server.gets(MKL)) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=30)
    assert run.returncode == 130, stderr
    assert "interrupted: stopped by Ctrl-C" in stderr and "Traceback" not in stderr
    partial = tmp_path / "cache" / "downloads" / f"{MKL}.part"
    kept = partial.stat().st_size
    assert 0 < kept < made.files[MKL].stat().st_size
    assert not (tmp_path / "cache" / "deps" / "mkl_2020.2.254").exists()

    server.fault(MKL).seconds_per_chunk = 0
    again = fetch_deps(tmp_path, "--mirror", server.url)
    assert again.returncode == 0, again.stderr
    last = server.gets(MKL)[-1]
    assert (last.range, last.status) == (f"bytes={kept}-", 206)
