"""`invoke build --source` on mini torch: a real CMake + Ninja build behind a setup.py that reads
PyTorch's variables, run the way a user runs it (a subprocess from the repo root, no terminal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from build_support import (
    HOST_CONFIG_GUARD,
    REPO_ROOT,
    invoke_command,
    last_report,
    make_venv,
    reports,
    run_invoke,
    slow_source,
)

from pytorch_winbuild.diagnosis.triage import diagnose_text

pytestmark = pytest.mark.build

SECRET = "hunter2-do-not-log-me"


def build(
    python: Path, source: Path, cache: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_invoke(
        python, "build", "--source", str(source), "--cuda", "cpu", "--cache-dir", str(cache), *extra, env=env
    )


def test_build_installs_verifies_and_reports(venv_python: Path, mini_source: Path, tmp_path: Path) -> None:
    mkl = tmp_path / "mkl" / "include"
    mkl.mkdir(parents=True)
    (mkl / "mkl.h").write_text("/* MKL's main header, as fetch-deps extracts it */\n")
    cache = tmp_path / "cache"
    env = {"CMAKE_INCLUDE_PATH": str(mkl), "WINBUILD_TEST_API_TOKEN": SECRET}

    done = build(venv_python, mini_source, cache, "--compiler-cache", "none", "--jobs", "2", env=env)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    report = last_report(cache / "logs")
    assert report["result"] == "success" and report["exit_code"] == 0
    assert report["source"] == {
        "path": str(mini_source),
        "origin": "existing checkout",
        "repo": None,
        "ref": None,
        "commit": None,
        "seconds": 0.0,
    }
    assert report["command"][1:] == ["setup.py", "install"]
    assert {"prepare", "environment", "build", "verify"} <= set(report["phases"])
    # The plan's changes reached the build: CPU-only, Ninja, two jobs; setup.py read them.
    assert report["environment"]["USE_CUDA"] == "0"
    assert report["environment"]["CMAKE_GENERATOR"] == "Ninja"
    assert report["environment"]["MAX_JOBS"] == "2"
    assert report["environment"]["WINBUILD_TEST_API_TOKEN"] == "***"
    assert report["plan"]["era"] == "2.5+" and report["plan"]["pytorch_version"] == "2.13.0a0"
    # Verified in a fresh interpreter outside the source tree: mini torch's _C, MKL found via CMAKE_INCLUDE_PATH.
    verification = report["verification"]
    assert verification["ok"] is True
    assert verification["version"] == "2.13.0a0+mini"
    assert (
        verification["mkl"] is True and verification["cuda_available"] is False and verification["cuda_version"] is None
    )
    assert verification["dataloader"] == {"num_workers": 2, "start_method": "spawn", "batches": 4, "ok": True}
    assert not verification["cwd"].startswith(str(mini_source))
    assert report["progress"]["done"] >= 4 and report["progress"]["total"] >= 5

    log = Path(report["log"])
    assert log.parent == cache / "logs" and Path(report["report"]) == log.with_suffix(".json")
    log_text = log.read_text(encoding="utf-8")
    assert "Building CXX object CMakeFiles/_C.dir/csrc/module.cpp.o" in log_text
    assert "-DUSE_CUDA=OFF" in log_text and "MKL headers: " + str(mkl) in log_text
    assert SECRET not in log_text and SECRET not in Path(report["report"]).read_text(encoding="utf-8")
    # No terminal: sparse progress lines instead of Ninja's [n/m] lines; then the summary.
    assert "-- progress: " in done.stdout and "] Building CXX object" not in done.stdout
    assert "== pytorch-winbuild build succeeded in" in done.stdout
    assert f"report    {report['report']}" in done.stdout
    assert "DataLoader(num_workers=2, spawn) ok" in done.stdout

    # The installed module works when imported the way a user imports it.
    called = subprocess.run(
        [str(venv_python), "-c", "import torch; print(torch.add(40, 2), torch.dot([1, 2, 3], [4, 5, 6]))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert called.stdout.split() == ["42", "32"]


@pytest.mark.parametrize("cache_name", ["ccache", "sccache"])
def test_rebuild_after_clean_hits_the_compiler_cache(
    venv_python: Path, mini_source: Path, tmp_path: Path, cache_name: str
) -> None:
    cache = tmp_path / "cache"
    first = build(venv_python, mini_source, cache, "--compiler-cache", cache_name, "--no-verify")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    second = build(venv_python, mini_source, cache, "--compiler-cache", cache_name, "--no-verify", "--clean")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr

    cold, warm = reports(cache / "logs")
    assert cold["cache"]["name"] == cache_name and cold["cache"]["error"] is None
    assert cold["cache"]["misses"] >= 3 and cold["cache"]["hits"] == 0
    assert warm["cache"]["hits"] >= 3 and warm["cache"]["misses"] == 0
    assert f"{warm['cache']['hits']} hits, 0 misses (100% hits)" in second.stdout
    assert any(note.startswith(f"--clean: removed {mini_source / 'build'}") for note in warm["notes"])
    assert warm["verification"] == {"skipped": "--no-verify"}
    assert (cache / cache_name).is_dir(), "the plan keeps the cache's objects in the pytorch-winbuild cache folder"
    if cache_name == "sccache":
        assert warm["environment"]["SCCACHE_IDLE_TIMEOUT"] == "0"
        assert warm["cache"]["command"] == "sccache --show-stats --stats-format json"
        servers = [
            p
            for p in psutil.process_iter(["name", "environ"])
            if p.info["name"] == "sccache" and (p.info["environ"] or {}).get("SCCACHE_DIR") == str(cache / "sccache")
        ]
        assert servers == [], "the sccache server started for the build was stopped after it"


def test_compile_error_is_found_and_diagnosed(venv_python: Path, mini_source: Path, tmp_path: Path) -> None:
    (mini_source / "csrc" / "host_config_check.cpp").write_text(HOST_CONFIG_GUARD)
    cache = tmp_path / "cache"

    failed = build(venv_python, mini_source, cache, "--compiler-cache", "none")

    assert failed.returncode == 5, failed.stdout[-3000:] + failed.stderr
    report = last_report(cache / "logs")
    assert report["result"] == "failed" and report["exit_code"] == 5
    summary = report["first_error"]["summary"]
    assert "host_config_check.cpp:2:2: error: #error -- unsupported Microsoft Visual Studio version!" in summary["text"]
    assert report["first_error"]["kind"] == "ninja"
    assert [match["id"] for match in report["diagnosis"]] == ["cuda-unsupported-msvc"]
    assert report["verification"] is None
    log = report["log"]
    lines = Path(log).read_text(encoding="utf-8").splitlines()
    assert "unsupported Microsoft Visual Studio version" in lines[summary["number"] - 1]
    # The paragraph names the command, the log and the line, and gives the rule's fix.
    paragraph = failed.stderr.strip()
    assert paragraph.startswith("build failed: `python setup.py install` exited with status 1.")
    assert f"The first error is on line {summary['number']} of the log {log}:" in paragraph
    assert "[cuda-unsupported-msvc]" in paragraph and "Fix: Build with a toolset the CUDA accepts" in paragraph
    # The console shows the error block with context, not just the last line.
    assert f"First error (line {report['first_error']['line_number']}, ninja):" in failed.stdout
    assert "== pytorch-winbuild build FAILED in" in failed.stdout


def test_generator_change_clears_the_cmake_cache(venv_python: Path, mini_source: Path, tmp_path: Path) -> None:
    env = {**os.environ, "USE_CUDA": "0", "CMAKE_GENERATOR": "Unix Makefiles"}
    # A build folder configured by hand with another generator, as a user's earlier attempt leaves it.
    subprocess.run(
        [str(venv_python), "setup.py", "build_ext"], cwd=mini_source, env=env, capture_output=True, check=True
    )
    assert "CMAKE_GENERATOR:INTERNAL=Unix Makefiles" in (mini_source / "build" / "CMakeCache.txt").read_text()
    # Without clearing, PyTorch's setup.py logic re-runs CMake on that cache and fails the famous way.
    clash = subprocess.run(
        [str(venv_python), "setup.py", "build_ext"],
        cwd=mini_source,
        env={**env, "CMAKE_GENERATOR": "Ninja"},
        capture_output=True,
        text=True,
    )
    assert clash.returncode != 0
    assert [m.rule.id for m in diagnose_text(clash.stdout + clash.stderr).matches] == ["cmake-generator-mismatch"]
    cache = tmp_path / "cache"

    done = build(venv_python, mini_source, cache, "--compiler-cache", "none", "--no-verify")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    said = f"-- The build folder {mini_source / 'build'} was configured for Unix Makefiles, and this plan uses Ninja: removed CMakeCache.txt and CMakeFiles"
    assert said in done.stdout
    assert any(note.startswith(said[3:]) for note in last_report(cache / "logs")["notes"])
    assert "CMAKE_GENERATOR:INTERNAL=Ninja" in (mini_source / "build" / "CMakeCache.txt").read_text()
    assert json.loads((mini_source / "build" / ".pytorch-winbuild.json").read_text()) == {
        "generator": "Ninja",
        "toolset": None,
    }

    again = build(venv_python, mini_source, cache, "--compiler-cache", "none", "--no-verify")
    assert again.returncode == 0 and "was configured for" not in again.stdout


def _processes_of(folder: Path) -> list[str]:
    """Command lines of live processes that name `folder` (the build's compilers, ninja, cmake, setup.py)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        command = " ".join(process.info["cmdline"] or [])
        if str(folder) in command and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(command)
    return found


def test_ctrl_c_stops_the_whole_process_tree(venv_python: Path, mini_source: Path, tmp_path: Path) -> None:
    (mini_source / "csrc" / "slow.cpp").write_text(slow_source(60))  # minutes of compiling if never stopped
    cache = tmp_path / "cache"
    command = invoke_command(
        venv_python,
        "build",
        "--source",
        str(mini_source),
        "--cuda",
        "cpu",
        "--cache-dir",
        str(cache),
        "--compiler-cache",
        "none",
    )
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env.pop("CI", None)
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not any("cc1plus" in command and "slow.cpp" in command for command in _processes_of(mini_source)):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the compiler never started on slow.cpp"
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends to the foreground group
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)

    assert process.returncode == 130, stdout[-3000:] + stderr
    assert stderr.strip().startswith("interrupted: stopped by Ctrl-C: the build's ")
    assert "== pytorch-winbuild build interrupted in" in stdout
    report = last_report(cache / "logs")
    assert report["result"] == "interrupted" and report["exit_code"] == 130
    assert Path(report["log"]).is_file()
    time.sleep(0.5)
    assert _processes_of(mini_source) == [], "no compiler, ninja or setup.py of the build may outlive it"


def test_build_from_a_repository_clones_then_fetches(venv_python: Path, mini_source: Path, tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(mini_source), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "mini torch 2.13")
    git("tag", "v2.13.0")
    (mini_source / "version.txt").write_text("2.14.0a0\n")
    git("commit", "-q", "-am", "mini torch 2.14")
    git("tag", "v2.14.0")
    clone, cache = tmp_path / "clone", tmp_path / "cache"
    first = build(venv_python, clone, cache, "--repo", str(mini_source), "--ref", "v2.13.0", "--compiler-cache", "none")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    second = build(
        venv_python, clone, cache, "--repo", str(mini_source), "--ref", "v2.14.0", "--compiler-cache", "none"
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr

    cloned, fetched = reports(cache / "logs")
    assert (cloned["source"]["origin"], cloned["source"]["commit"]) == ("cloned", git("rev-parse", "v2.13.0"))
    assert (fetched["source"]["origin"], fetched["source"]["commit"]) == ("fetched", git("rev-parse", "v2.14.0"))
    assert (
        cloned["verification"]["version"] == "2.13.0a0+mini" and fetched["verification"]["version"] == "2.14.0a0+mini"
    )
    assert fetched["plan"]["pytorch_version"] == "2.14.0a0", "the plan reads the version of the checked-out ref"
    assert "source" in cloned["phases"]


def test_libtorch_and_wheel_builds_install_nothing(mini_source: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "env")  # a fresh one: nothing of mini torch installed in it
    cache = tmp_path / "cache"

    libtorch = build(python, mini_source, cache, "--compiler-cache", "none", "--libtorch")
    assert libtorch.returncode == 0, libtorch.stdout[-3000:] + libtorch.stderr
    report = last_report(cache / "logs")
    assert report["command"][1:] == ["tools/build_libtorch.py"]
    assert report["verification"] == {"skipped": "a LibTorch build installs no Python package to import"}
    assert list((mini_source / "build").glob("_C*.so")), "CMake built the library"

    wheel = build(python, mini_source, cache, "--compiler-cache", "none", "--mode", "wheel")
    assert wheel.returncode == 0, wheel.stdout[-3000:] + wheel.stderr
    report = last_report(cache / "logs")
    assert report["command"][1:] == ["setup.py", "bdist_wheel"]
    wheels = list((mini_source / "dist").glob("mini_torch-2.13.0a0+mini-*.whl"))
    assert len(wheels) == 1 and report["verification"]["wheel"] == str(wheels[0])
    assert report["verification"]["ok"] is True and report["verification"]["version"] == "2.13.0a0+mini"
    installed = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert installed.stdout.strip() == "2.13.0+cpu", "the wheel was checked unpacked, never installed"
