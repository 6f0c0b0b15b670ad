"""First contact: the commands every plan prints, run as printed (the README's own: tests/test_readme_*.py).

A new user on Linux plans for the shipped Windows machines with --host. Every shipped facts file
must plan every CUDA it holds (and cpu and auto), its `.bat` must be written, and the fetch steps
the plan prints must run as printed and name exactly the plan's archives and folders (and the build
Python the venv is made from, when it is fetched).
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import HOSTS_DIR, run_invoke

HOSTS = sorted(HOSTS_DIR.glob("*.json"))
CASES = [
    (host, cuda)
    for host in HOSTS
    for cuda in ["auto", "cpu", *(c["version"] for c in json.loads(host.read_text(encoding="utf-8"))["cuda"])]
]


def _split_windows(command: str) -> list[str]:
    """The printed command's words as cmd.exe hands them to Python (list2cmdline quoting)."""
    return [word.strip('"') for word in re.findall(r'"[^"]*"|\S+', command)]


def _check_case(host: Path, cuda: str, tmp: Path) -> None:
    plan_run = run_invoke("build", "--dry-run", "--format", "json", "--host", str(host), "--cuda", cuda)
    assert plan_run.returncode == 0, f"{host.name} --cuda {cuda}: {plan_run.stderr}"
    plan = json.loads(plan_run.stdout)
    bat = tmp / f"{host.stem}-{cuda}.bat"
    env_run = run_invoke("env", "--host", str(host), "--cuda", cuda, "--format", "bat", "--output", str(bat))
    assert env_run.returncode == 0 and bat.is_file(), env_run.stderr
    fetches = [c["command"] for c in plan["commands"] if c["command"].startswith("invoke fetch-deps")]
    fetch = [command for command in fetches if " --python " not in command]
    assert len(fetch) == 1, "a Windows plan fetches MKL (and MAGMA for CUDA) before its first build"
    _check_build_python(plan, [command for command in fetches if " --python " in command])
    words = _split_windows(fetch[0])
    fetched = run_invoke(*words[1:], "--dry-run")
    assert fetched.returncode == 0, f"{fetch[0]}: {fetched.stderr}"
    listed = re.findall(r"^  extract   (.+) \(", fetched.stdout, re.MULTILINE)
    assert listed == [archive["folder"] for archive in plan["archives"]], f"{fetch[0]} fetches what the plan uses"
    for archive in plan["archives"]:
        assert archive["folder"].startswith("C:\\Users\\builder\\AppData\\Local\\pytorch-winbuild\\deps\\"), (
            "the host's cache, in Windows form"
        )


def _check_build_python(plan: dict, python_fetch: list[str]) -> None:
    """The build runs in a venv under the host's cache, made from an installed Python of the facts file or from
    the CPython that the plan's `fetch-deps --python` step (run as printed) puts where the venv command looks."""
    build_python, venv = plan["build_python"], plan["venv"]
    cache = "C:\\Users\\builder\\AppData\\Local\\pytorch-winbuild"
    assert venv["folder"].startswith(f"{cache}\\venvs\\") and venv["python"] == venv["folder"] + "\\Scripts\\python.exe"
    assert plan["build_command"][0] == venv["python"]
    made = [c["command"] for c in plan["commands"] if " -m venv " in c["command"]]
    assert [_split_windows(command) for command in made] == [[build_python["executable"], "-m", "venv", venv["folder"]]]
    if not build_python["fetch"]:
        assert python_fetch == [] and build_python["found_by"] != "fetched"
        return
    assert len(python_fetch) == 1, "a Python that is not installed is fetched once"
    fetched = run_invoke(*_split_windows(python_fetch[0])[1:], "--dry-run")
    assert fetched.returncode == 0, f"{python_fetch[0]}: {fetched.stderr}"
    assert re.findall(r"interpreter \(once fetched\): (.+)$", fetched.stdout, re.MULTILINE) == [
        build_python["executable"]
    ], f"{python_fetch[0]} puts the Python where the venv is made from"
    assert build_python["executable"].startswith(f"{cache}\\deps\\python.{build_python['version']}\\")


def test_every_shipped_facts_file_plans_every_cuda_it_holds(tmp_path: Path):
    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(_check_case, host, cuda, tmp_path) for host, cuda in CASES]:
            future.result()


@pytest.mark.parametrize(
    ("flag", "env", "label", "fix"),
    [
        (["--cache-dir", "x"], {}, "--cache-dir 'x'", "e.g. --cache-dir C:\\Users\\you"),
        ([], {"INVOKE_WINBUILD_CACHE_DIR": "/tmp/c"}, "winbuild.cache_dir '/tmp/c'", "INVOKE_WINBUILD_CACHE_DIR=C:\\"),
    ],
)
def test_a_cache_folder_of_this_machine_for_a_windows_plan_is_named_where_it_was_set(flag, env, label, fix):
    """A Linux cache folder set in the environment is not a --cache-dir the user typed: say which one it was."""
    result = run_invoke("build", "--dry-run", "--host", str(HOSTS_DIR / "vs2017-cuda90-cuda100.json"), *flag, env=env)
    assert result.returncode == 2 and f"configuration error: {label} is not an absolute windows path" in result.stderr
    assert fix in result.stderr and "or leave it out for the facts file's own" in result.stderr


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["--pytorch-version", "2.6\r\necho INJECTED"], 2, "holds whitespace or a control character"),
        (["--pytorch-version", "1"], 2, "needs MAJOR.MINOR"),
        (["--pytorch-version", "2.x"], 2, "is not a PyTorch version (PEP 440)"),
        (["--pytorch-version", "1.2.3.4.5"], 2, "at most MAJOR.MINOR.PATCH"),
        # 1.1 is the newest era that builds CUDA 9.0 and fits Python 3.6 and VS 2017 (build_config/eras.toml)
        (["--pytorch-version", "2.6", "--cuda", "9.0"], 3, "Fix: pass --pytorch-version 1.1.0 (PyTorch 1.1)."),
        (["--pytorch-version", "1.0.1", "--cuda", "12.4"], 2, "PyTorch 1.0 does not build with CUDA 12.4"),
        # Without --cuda only Visual Studio 2017 limits: 1.11-1.13 is the newest era whose build knows it; the
        # machine's Pythons (3.11.9, 3.6.8) no longer do, since a Python the era takes is fetched on Windows.
        (["--pytorch-version", "2.6"], 3, "pass --pytorch-version 1.13.1 (PyTorch 1.11-1.13)"),
    ],
)
def test_conflicts_and_bad_versions_exit_with_one_paragraph(args: list[str], code: int, text: str):
    result = run_invoke("build", "--dry-run", "--host", str(HOSTS_DIR / "vs2017-cuda90-cuda100.json"), *args)
    assert result.returncode == code and text in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_a_version_newer_than_every_era_plans_with_the_newest_and_warns():
    result = run_invoke("build", "--dry-run", "--host", str(HOSTS_DIR / "cpu-only.json"), "--pytorch-version", "99.0")
    assert result.returncode == 0, result.stderr
    assert "Plan for PyTorch 99.0 (era 2.9+)" in result.stdout
    assert "newer than any release pytorch-winbuild knows" in result.stdout
