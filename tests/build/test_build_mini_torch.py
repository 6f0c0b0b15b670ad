"""`invoke build` on mini torch: a real CMake + Ninja build behind a setup.py that reads PyTorch's
variables, run the way a user runs it (a subprocess from the repo root, no terminal).

mini torch's version.txt says 2.13.0a0, so the plan picks the 2.9+ era, whose install command is
PyTorch's own since mid-2025: `python -m pip install --no-build-isolation -v .` (setup.py install
and develop are deprecated there), and `pip wheel` for --mode wheel."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from build_support import (
    HOST_CONFIG_GUARD,
    REPO_ROOT,
    copy_fixture,
    git,
    invoke_command,
    last_report,
    make_venv,
    reports,
    run_invoke,
    slow_source,
)

from pytorch_winbuild.builder.build_venv import last_venv
from pytorch_winbuild.diagnosis.triage import diagnose_text

pytestmark = pytest.mark.build

SECRET = "hunter2-do-not-log-me"


def build(
    python: Path, source: Path, cache: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_invoke(
        python, "build", "--source", str(source), "--cuda", "cpu", "--cache-dir", str(cache), *extra, env=env
    )


def test_build_from_a_repository_end_to_end(venv_python: Path, tmp_path: Path) -> None:
    """`invoke build --repo URL --ref TAG` as a user runs it, nothing stood in for: git clones the
    repository, the plan reads the checked-out version, the environment is built, setuptools (through
    pip) runs CMake, Ninja and g++ through ccache (the plan's choice on Linux), a fresh interpreter
    outside the clone imports the installed package, and the report says all of it. Then the next
    tag is pushed and built in the same clone: fetched, rebuilt, checked again."""
    work = copy_fixture("mini_torch", tmp_path / "mini torch")  # the maintainers' working copy
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "mini torch 2.13")
    git(work, "tag", "v2.13.0")
    upstream = tmp_path / "upstream repos" / "pytorch.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(upstream))
    url = upstream.as_uri()  # file:///.../upstream%20repos/pytorch.git
    mkl = tmp_path / "mkl" / "include"
    mkl.mkdir(parents=True)
    (mkl / "mkl.h").write_text("/* MKL's main header, as fetch-deps extracts it */\n")
    cache = tmp_path / "winbuild cache"  # a space, as Windows user folders have
    env = {"CMAKE_INCLUDE_PATH": str(mkl), "WINBUILD_TEST_API_TOKEN": SECRET}

    def build_ref(ref: str) -> subprocess.CompletedProcess[str]:
        return run_invoke(
            venv_python, "build", "--repo", url, "--ref", ref, "--cuda", "cpu", "--cache-dir", str(cache),
            "--jobs", "2", env=env,
        )  # fmt: skip

    done = build_ref("v2.13.0")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    report = last_report(cache / "logs")
    clone = cache / "src" / "pytorch"  # the cache's clone folder, named after the repository
    assert report["result"] == "success" and report["exit_code"] == 0
    commit = git(work, "rev-parse", "v2.13.0")
    assert {key: value for key, value in report["source"].items() if key != "seconds"} == {
        "path": str(clone),
        "origin": "cloned",
        "repo": url,
        "ref": "v2.13.0",
        "commit": commit,
    }
    assert git(clone, "rev-parse", "HEAD") == commit and git(clone, "remote", "get-url", "origin") == url
    pip_install = ["-m", "pip", "install", "--no-build-isolation", "-v", "."]  # the 2.9+ era's install
    built_by = report["plan"]["venv"]["python"]  # the build venv made under the cache, not the tool's Python
    assert Path(built_by).is_relative_to(cache / "venvs")
    assert report["command"] == [built_by, *pip_install] and report["cwd"] == str(clone)
    phases = {"source", "prepare", "environment", "cache reset", "build", "cache stats", "verify"}
    assert phases <= set(report["phases"])
    # The plan read the clone's version, and its changes reached the build: CPU-only, Ninja, two
    # jobs, ccache in front of every compile; setup.py read them.
    plan = report["plan"]
    assert plan["era"] == "2.9+" and plan["pytorch_version"] == "2.13.0a0" and plan["compiler_cache"] == "ccache"
    environment = report["environment"]
    assert environment["USE_CUDA"] == "0" and environment["CMAKE_GENERATOR"] == "Ninja"
    assert environment["MAX_JOBS"] == "2"
    assert environment["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache" and environment["CCACHE_DIR"] == str(cache / "ccache")
    assert environment["WINBUILD_TEST_API_TOKEN"] == "***"
    assert report["cache"]["name"] == "ccache" and report["cache"]["error"] is None
    assert report["cache"]["misses"] >= 3 and report["cache"]["hits"] == 0
    # Verified in a fresh interpreter of the build's Python, outside the clone: mini torch's _C as
    # installed into the environment's site-packages, MKL found via CMAKE_INCLUDE_PATH.
    verification = report["verification"]
    assert verification["ok"] is True and verification["interpreter"] == built_by
    assert verification["version"] == "2.13.0a0+mini"
    assert (
        verification["mkl"] is True and verification["cuda_available"] is False and verification["cuda_version"] is None
    )
    assert verification["dataloader"] == {"num_workers": 2, "start_method": "spawn", "batches": 4, "ok": True}
    assert not verification["cwd"].startswith(str(clone))
    installed = Path(verification["location"])
    assert installed.is_relative_to(Path(built_by).parent.parent) and not installed.is_relative_to(clone)
    assert report["progress"]["done"] >= 4 and report["progress"]["total"] >= 5

    log = Path(report["log"])
    assert log.parent == cache / "logs" and Path(report["report"]) == log.with_suffix(".json")
    log_text = log.read_text(encoding="utf-8")
    assert "Building CXX object CMakeFiles/_C.dir/csrc/module.cpp.o" in log_text
    assert "-DUSE_CUDA=OFF" in log_text and "MKL headers: " + str(mkl) in log_text
    assert "Successfully installed mini-torch-2.13.0a0+mini" in log_text
    assert SECRET not in log_text and SECRET not in Path(report["report"]).read_text(encoding="utf-8")
    # No terminal: sparse progress lines instead of Ninja's [n/m] lines; then the summary.
    assert "-- progress: " in done.stdout and "] Building CXX object" not in done.stdout
    assert "== pytorch-winbuild build succeeded in" in done.stdout
    assert f"report    {report['report']}" in done.stdout
    assert "DataLoader(num_workers=2, spawn) ok" in done.stdout

    # The installed module works when imported the way a user imports it, and `invoke verify` says so.
    called = subprocess.run(
        [built_by, "-c", "import torch; print(torch.add(40, 2), torch.dot([1, 2, 3], [4, 5, 6]))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert called.stdout.split() == ["42", "32"]
    verified = run_invoke(sys.executable, "verify", "--python", built_by)
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr
    assert json.loads(verified.stdout)["version"] == "2.13.0a0+mini"

    # The next release is pushed; the same command with its tag fetches into the clone and rebuilds.
    (work / "version.txt").write_text("2.14.0a0\n")
    git(work, "commit", "-q", "-am", "mini torch 2.14")
    git(work, "tag", "v2.14.0")
    git(work, "push", "-q", str(upstream), "main", "v2.14.0")

    again = build_ref("v2.14.0")

    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    fetched = last_report(cache / "logs")
    assert (fetched["source"]["origin"], fetched["source"]["commit"]) == ("fetched", git(work, "rev-parse", "v2.14.0"))
    assert fetched["source"]["path"] == str(clone) and git(clone, "rev-parse", "HEAD") == fetched["source"]["commit"]
    assert fetched["plan"]["pytorch_version"] == "2.14.0a0", "the plan reads the version of the checked-out ref"
    assert fetched["verification"]["ok"] is True and fetched["verification"]["version"] == "2.14.0a0+mini"
    assert len(reports(cache / "logs")) == 2


def test_libtorch_rebuild_after_clean_hits_the_compiler_cache(
    venv_python: Path, mini_source: Path, tmp_path: Path
) -> None:
    """--libtorch (tools/build_libtorch.py: CMake and Ninja, no setuptools, nothing installed) through
    sccache, whose server the build starts and must stop. ccache's way in (the same CMake launcher
    variables) is in the end-to-end test; its counts in test_builder_parts and test_build_ext."""
    cache = tmp_path / "cache"
    first = build(venv_python, mini_source, cache, "--compiler-cache", "sccache", "--libtorch")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    second = build(venv_python, mini_source, cache, "--compiler-cache", "sccache", "--libtorch", "--clean")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr

    cold, warm = reports(cache / "logs")
    assert cold["command"] == [cold["plan"]["venv"]["python"], "tools/build_libtorch.py"]
    assert warm["plan"]["venv"]["key"] == cold["plan"]["venv"]["key"]  # the second build reused the venv
    assert cold["verification"] == {"skipped": "a LibTorch build installs no Python package to import"}
    assert list((mini_source / "build").glob("_C*.so")), "CMake built the library"
    assert cold["cache"]["name"] == "sccache" and cold["cache"]["error"] is None
    assert cold["cache"]["misses"] >= 3 and cold["cache"]["hits"] == 0
    assert warm["cache"]["hits"] >= 3 and warm["cache"]["misses"] == 0
    assert f"{warm['cache']['hits']} hits, 0 misses (100% hits)" in second.stdout
    assert any(note.startswith(f"--clean: removed {mini_source / 'build'}") for note in warm["notes"])
    assert (cache / "sccache").is_dir(), "the plan keeps the cache's objects in the pytorch-winbuild cache folder"
    assert warm["environment"]["CMAKE_CXX_COMPILER_LAUNCHER"] == "sccache"
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
    assert report["source"] == {
        "path": str(mini_source),
        "origin": "existing checkout",
        "repo": None,
        "ref": None,
        "commit": None,
        "seconds": 0.0,
    }
    summary = report["first_error"]["summary"]
    assert "host_config_check.cpp:2:2: error: #error -- unsupported Microsoft Visual Studio version!" in summary["text"]
    assert report["first_error"]["kind"] == "ninja"
    assert [match["id"] for match in report["diagnosis"]] == ["cuda-unsupported-msvc"]
    assert report["verification"] is None
    # The build venv was made before the compile failed: `invoke verify` and build-ext take it (issue 38, point 2).
    assert last_venv(cache) == report["plan"]["venv"]["python"]
    log = report["log"]
    lines = Path(log).read_text(encoding="utf-8").splitlines()
    assert "unsupported Microsoft Visual Studio version" in lines[summary["number"] - 1]
    # The paragraph names the command, the log and the line, and gives the rule's fix.
    paragraph = failed.stderr.strip()
    assert paragraph.startswith("build failed: `python -m pip install --no-build-isolation -v .` exited with status 1.")
    assert f"The first error is on line {summary['number']} of the log {log}:" in paragraph
    assert "[cuda-unsupported-msvc]" in paragraph and "Fix: Build with a toolset the CUDA accepts" in paragraph
    # The console shows the error block with context, not just the last line.
    assert f"First error (line {report['first_error']['line_number']}, ninja):" in failed.stdout
    assert "== pytorch-winbuild build FAILED in" in failed.stdout


def test_generator_change_clears_the_cmake_cache(venv_python: Path, mini_source: Path, tmp_path: Path) -> None:
    # A build folder configured by hand with another generator, as a user's earlier attempt leaves it.
    subprocess.run(
        ["cmake", "-S", ".", "-B", "build", "-G", "Unix Makefiles", f"-DPython_EXECUTABLE={venv_python}"],
        cwd=mini_source,
        capture_output=True,
        check=True,
    )
    assert "CMAKE_GENERATOR:INTERNAL=Unix Makefiles" in (mini_source / "build" / "CMakeCache.txt").read_text()
    # Without clearing, PyTorch's setup.py logic re-runs CMake on that cache and fails the famous way.
    clash = subprocess.run(
        [str(venv_python), "setup.py", "build_ext"],
        cwd=mini_source,
        env={**os.environ, "USE_CUDA": "0", "CMAKE_GENERATOR": "Ninja"},
        capture_output=True,
        text=True,
    )
    assert clash.returncode != 0
    assert [m.rule.id for m in diagnose_text(clash.stdout + clash.stderr).matches] == ["cmake-generator-mismatch"]
    cache = tmp_path / "cache"

    # --libtorch runs the same CMake logic without setuptools and pip: the folder is what is tested.
    done = build(venv_python, mini_source, cache, "--compiler-cache", "none", "--libtorch")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    said = (
        f"-- The build folder {mini_source / 'build'} was configured for Unix Makefiles, and this plan uses Ninja: "
        "removed CMakeCache.txt and CMakeFiles"
    )
    assert said in done.stdout
    assert any(note.startswith(said[3:]) for note in last_report(cache / "logs")["notes"])
    assert "CMAKE_GENERATOR:INTERNAL=Ninja" in (mini_source / "build" / "CMakeCache.txt").read_text()
    assert json.loads((mini_source / "build" / ".pytorch-winbuild.json").read_text()) == {
        "generator": "Ninja",
        "toolset": None,
    }

    again = build(venv_python, mini_source, cache, "--compiler-cache", "none", "--libtorch")
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
    # How to go on: the folder CMake configured is kept, and the same command continues there (issue 39, point 4).
    assert (
        f"Fix: run the same command again to continue in {mini_source / 'build'} (kept: its CMake cache (Ninja, "
        in stderr
    )
    assert stderr.strip().endswith("or add --clean to start over.")
    assert "== pytorch-winbuild build interrupted in" in stdout
    report = last_report(cache / "logs")
    assert report["result"] == "interrupted" and report["exit_code"] == 130
    assert Path(report["log"]).is_file()
    assert last_venv(cache) == report["plan"]["venv"]["python"]  # what verify checks after Ctrl-C
    time.sleep(0.5)
    assert _processes_of(mini_source) == [], "no compiler, ninja or setup.py of the build may outlive it"


def test_wheel_build_installs_nothing(mini_source: Path, tmp_path: Path) -> None:
    python = make_venv(tmp_path / "env")  # a fresh one: nothing of mini torch installed in it
    cache = tmp_path / "cache"

    wheel = build(python, mini_source, cache, "--compiler-cache", "none", "--mode", "wheel")

    assert wheel.returncode == 0, wheel.stdout[-3000:] + wheel.stderr
    report = last_report(cache / "logs")
    assert report["command"][1:] == ["-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", "dist", "."]
    wheels = list((mini_source / "dist").glob("mini_torch-2.13.0a0+mini-*.whl"))
    assert len(wheels) == 1 and report["verification"]["wheel"] == str(wheels[0])
    assert report["verification"]["ok"] is True and report["verification"]["version"] == "2.13.0a0+mini"
    # Where `import torch` would come from in that Python (found, not imported: the real torch takes
    # seconds to import): this Python's own torch, as before the build.
    found = subprocess.run(
        [str(python), "-c", "import importlib.util; print(importlib.util.find_spec('torch').origin)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    origin = Path(found.stdout.strip())
    assert not origin.is_relative_to(tmp_path), "the wheel was checked unpacked, never installed"
    ours = importlib.util.find_spec("torch")
    assert ours is not None and origin == Path(str(ours.origin))
