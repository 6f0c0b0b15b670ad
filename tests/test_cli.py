"""The foundation's commands as a user runs them: output, exit codes, one paragraph per error, no traceback."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import HOSTS_DIR, REPO_ROOT, run_invoke

VS2017 = str(HOSTS_DIR / "vs2017-cuda90-cuda100.json")


def _assert_one_paragraph(result: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert text in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("host", sorted(p.name for p in HOSTS_DIR.glob("*.json")))
def test_doctor_on_every_shipped_host(host: str):
    result = run_invoke("doctor", "--host", str(HOSTS_DIR / host))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pytorch-winbuild doctor — windows" in result.stdout
    assert "0 missing" in result.stdout


def test_doctor_names_what_is_missing_and_exits_3(tmp_path: Path):
    data = json.loads(Path(VS2017).read_text(encoding="utf-8"))
    data["visual_studio"][0]["toolsets"] = ["14.16.27023"]
    data["cuda"][0]["nvtx"] = None
    host = tmp_path / "host.json"
    host.write_text(json.dumps(data), encoding="utf-8")
    result = run_invoke("doctor", "--host", str(host))
    assert result.returncode == 3
    assert "[MISSING] CUDA 9.0 " in result.stdout and "VC++ 2017 version 15.4 v14.11 toolset" in result.stdout
    assert "[MISSING] CUDA 9.0 NVTX" in result.stdout
    assert "toolchain error: missing: CUDA 9.0, CUDA 9.0 NVTX." in result.stderr


def test_doctor_on_this_machine_and_its_json_round_trips(tmp_path: Path):
    result = run_invoke("doctor")
    assert "pytorch-winbuild doctor — linux" in result.stdout
    assert "not applicable on Linux" in result.stdout
    facts = run_invoke("doctor", "--json")
    assert facts.returncode == 0
    path = tmp_path / "facts.json"
    path.write_text(facts.stdout, encoding="utf-8")
    assert json.loads(facts.stdout)["os"] == "linux"
    again = run_invoke("doctor", "--host", str(path))
    assert "pytorch-winbuild doctor — linux" in again.stdout


def test_build_dry_run_shows_the_plan():
    result = run_invoke("build", "--dry-run", "--host", VS2017, "--pytorch-version", "1.0.1", "--cuda", "9.0")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Toolset         14.11.25503 (_MSC_VER 1911)" in out
    assert 'vcvarsall.bat" x64 -vcvars_ver=14.11' in out
    # The build runs in a venv made from the machine's Python 3.6.8, the one of its Pythons (3.11.9, 3.6.8) that
    # PyTorch 1.0 builds with (3.5 up to 3.8), under the facts file's cache folder; setup.py runs under the venv's.
    assert "Build Python    Python 3.6.8 (64-bit) C:\\Program Files\\Python36\\python.exe (" in out
    venv = re.escape("C:\\Users\\builder\\AppData\\Local\\pytorch-winbuild\\venvs\\1.0-py3.6-") + "[0-9a-f]{12}"
    commands = out.split("\nCommands:\n")[1]
    assert re.search(rf'^  \d\. "C:\\Program Files\\Python36\\python\.exe" -m venv {venv}$', commands, re.M)
    assert re.search(rf"^  \d\. {venv}\\Scripts\\python\.exe setup\.py install$", commands, re.M)
    assert "CUDA_PATH" in out and not re.search(r"^  \d\. python ", commands, re.M)


@pytest.mark.parametrize("fmt", ["json", "bat", "ps1", "table"])
def test_env_formats_write_files(tmp_path: Path, fmt: str):
    output = tmp_path / f"env.{fmt}"
    result = run_invoke(
        "env", "--host", VS2017, "--pytorch-version", "1.0.1", "--cuda", "9.0", "--format", fmt, "--output", str(output)
    )
    assert result.returncode == 0, result.stderr
    text = output.read_bytes().decode("utf-8")
    if fmt == "json":
        data = json.loads(text)
        assert data["env"]["CUDA_PATH"].endswith("v9.0") and data["changes"][0]["reason"]
    if fmt == "bat":
        assert '\r\nset "CUDA_PATH=C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v9.0"\r\n' in text
    if fmt == "ps1":
        assert "$env:CUDA_PATH = 'C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v9.0'" in text


def test_sh_format_is_for_linux_plans():
    _assert_one_paragraph(
        run_invoke("env", "--host", VS2017, "--pytorch-version", "1.0.1", "--format", "sh"),
        2,
        "the sh format is for Linux plans",
    )
    linux = run_invoke("env", "--cuda", "cpu", "--format", "sh")
    assert linux.returncode == 0 and "export USE_CUDA='0'" in linux.stdout


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["--cuda", "9.7"], 2, "configuration error: --cuda 9.7 is not a CUDA release pytorch-winbuild knows."),
        (["--cuda", "12.4"], 2, "PyTorch 1.0 does not build with CUDA 12.4"),
        (["--cuda", "9.2"], 3, "toolchain error: CUDA 9.2 is not installed"),
        (["--jobs", "many"], 2, "--jobs 'many' is not a number"),
        (["--format", "xml"], 2, "--format 'xml' is not one of table, json, bat, ps1, sh"),
    ],
)
def test_bad_input_exits_with_one_paragraph(args: list[str], code: int, text: str):
    _assert_one_paragraph(
        run_invoke("build", "--dry-run", "--host", VS2017, "--pytorch-version", "1.0.1", *args), code, text
    )


def test_malformed_facts_file(tmp_path: Path):
    host = tmp_path / "host.json"
    host.write_text(
        '{"schema": 1, "os": "windows", "python": {"version": "3.6.8", "bits": "64", "executable": "py"}}',
        encoding="utf-8",
    )
    _assert_one_paragraph(run_invoke("env", "--host", str(host)), 2, "python.bits: expected int, got '64'")


VS2019 = str(HOSTS_DIR / "vs2019-vs2022-cuda12.json")  # Pythons 3.12.7, 3.11.9, 3.9.13 (64-bit), 3.8.10 (32-bit)
PYTHON38_32 = "C:\\Program Files (x86)\\Python38-32\\python.exe"


def test_32_bit_python_from_a_facts_file():
    """A 32-bit Python asked for by path is refused (exit 2) naming the machine's 64-bit ones, and each named
    flag plans."""
    result = run_invoke("build", "--dry-run", "--host", VS2019, "--python", PYTHON38_32)
    _assert_one_paragraph(
        result, 2, f"--python {PYTHON38_32}: it is 32-bit, and PyTorch builds and runs only with 64-bit Python."
    )
    assert "Fix: pass --python 3.12 or --python 3.11 or --python 3.9, or leave --python out." in result.stderr
    for minor in ("3.12", "3.11", "3.9"):
        planned = run_invoke("build", "--dry-run", "--host", VS2019, "--python", minor)
        assert planned.returncode == 0, planned.stderr
        assert f"Build Python    Python {minor}." in planned.stdout


def test_only_32_bit_pythons_fetch_a_64_bit_one(tmp_path: Path):
    """A Windows machine whose only Pythons are 32-bit builds with CPython from NuGet: PyTorch 1.0 takes 3.5 up
    to 3.8, and NuGet's newest 3.7 is 3.7.9 (python.org's last 3.7 with Windows builds)."""
    data = json.loads(Path(VS2017).read_text(encoding="utf-8"))
    for python in (data["python"], *data["pythons"]):
        python["bits"] = 32
    host = tmp_path / "host.json"
    host.write_text(json.dumps(data), encoding="utf-8")
    result = run_invoke("build", "--dry-run", "--host", str(host), "--pytorch-version", "1.0.1")
    assert result.returncode == 0, result.stderr
    cache = "C:\\Users\\builder\\AppData\\Local\\pytorch-winbuild"
    assert f"Build Python    Python 3.7.9 (64-bit) {cache}\\deps\\python.3.7.9\\tools\\python.exe (" in result.stdout
    assert f"  2. invoke fetch-deps --python 3.7 --cache-dir {cache}\n" in result.stdout
    assert re.search(
        rf"^  3\. {re.escape(cache)}\\deps\\python\.3\.7\.9\\tools\\python\.exe -m venv "
        rf"{re.escape(cache)}\\venvs\\1\.0-py3\.7-[0-9a-f]{{12}}$",
        result.stdout,
        re.M,
    )
    # Asked for by path, the 32-bit one is refused; the fix names no other installed Python (there is none usable).
    _assert_one_paragraph(
        run_invoke("build", "--dry-run", "--host", str(host), "--python", "C:\\Program Files\\Python36\\python.exe"),
        2,
        "it is 32-bit, and PyTorch builds and runs only with 64-bit Python. Fix: pass the path of a 64-bit CPython, "
        "or leave --python out.",
    )


def test_python_older_than_the_era(tmp_path: Path):
    """A --python older than the era's range is refused (exit 2) with the era's range and the installed
    Pythons that fit (PyTorch 2.9+: 3.10 up to 3.15, so 3.12 and 3.11 of this machine, not 3.9)."""
    for python in ("3.9", "C:\\Program Files\\Python39\\python.exe"):
        result = run_invoke("build", "--dry-run", "--host", VS2019, "--pytorch-version", "2.13.0", "--python", python)
        _assert_one_paragraph(result, 2, "PyTorch 2.13.0 builds with Python 3.10 up to, not including, 3.15 (PyPI")
        assert "Fix: pass --python 3.12 or --python 3.11 or --pytorch-version 2.8.0 (PyTorch 2.5-2.8)." in result.stderr
    # Each way out plans: a Python the era takes, or the newest release whose era takes 3.9 (2.5-2.8: 3.9 up to 3.15).
    for flags in (
        ("--pytorch-version", "2.13.0", "--python", "3.11"),
        ("--pytorch-version", "2.8.0", "--python", "3.9"),
    ):
        planned = run_invoke("build", "--dry-run", "--host", VS2019, *flags)
        assert planned.returncode == 0, planned.stderr


def _repo_copy(tmp_path: Path) -> Path:
    """A copy of the repo's task layout so a project invoke.yaml can be placed next to tasks.py."""
    copy = tmp_path / "repo"
    shutil.copytree(
        REPO_ROOT, copy, ignore=shutil.ignore_patterns(".git", "cache", "tests", "__pycache__", "*.egg-info")
    )
    return copy


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('winbuild:\n  cuda: "9.0\n', "invoke.yaml: not valid YAML (line 3 column 1"),
        ("winbuild:\n  cuda_version: '9.0'\n", "unknown winbuild option(s) cuda_version"),
        ("winbuild: 9.0\n", "'winbuild' must be a mapping"),
    ],
)
def test_malformed_config_file(tmp_path: Path, text: str, message: str):
    copy = _repo_copy(tmp_path)
    (copy / "invoke.yaml").write_text(text, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "invoke", "env", "--host", VS2017],
        cwd=copy,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(copy)},
    )
    _assert_one_paragraph(result, 2, message)


def test_config_file_and_environment_give_defaults(tmp_path: Path):
    copy = _repo_copy(tmp_path)
    (copy / "invoke.yaml").write_text("winbuild:\n  cuda: '9.0'\n  pytorch_version: '1.0.1'\n", encoding="utf-8")
    import os

    env = {**os.environ, "PYTHONPATH": str(copy)}
    from_file = subprocess.run(
        [sys.executable, "-m", "invoke", "env", "--host", VS2017, "--format", "json"],
        cwd=copy,
        capture_output=True,
        text=True,
        env=env,
    )
    assert json.loads(from_file.stdout)["cuda"]["version"] == "9.0"
    from_env = subprocess.run(
        [sys.executable, "-m", "invoke", "env", "--host", VS2017, "--format", "json"],
        cwd=copy,
        capture_output=True,
        text=True,
        env={**env, "INVOKE_WINBUILD_CUDA": "10.0"},
    )
    assert json.loads(from_env.stdout)["cuda"]["version"] == "10.0"
    from_flag = subprocess.run(
        [sys.executable, "-m", "invoke", "env", "--host", VS2017, "--format", "json", "--cuda", "cpu"],
        cwd=copy,
        capture_output=True,
        text=True,
        env={**env, "INVOKE_WINBUILD_CUDA": "10.0"},
    )
    assert json.loads(from_flag.stdout)["cuda"] is None


def test_doctors_next_step_plans_the_machine_it_looked_at(tmp_path: Path):
    """The last line of `doctor --host FILE` is a command; run by bash as printed, outside the repo through
    the console script (where `invoke` finds no tasks.py), it plans that same facts file."""
    host = tmp_path / "their machine's facts.json"
    shutil.copy(HOSTS_DIR / "cpu-only.json", host)
    script = shutil.which("pytorch-winbuild")
    assert script, "pytorch-winbuild is installed by `pip install -e .` (see .ci/run)"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    doctor = subprocess.run([script, "doctor", "--host", str(host)], cwd=outside, capture_output=True, text=True)
    assert doctor.returncode == 0, doctor.stderr
    command = doctor.stdout.splitlines()[-1].split("Ready to plan: ", 1)[1]
    assert command.startswith("pytorch-winbuild build --dry-run --host ")
    planned = subprocess.run(["bash", "-c", command], cwd=outside, capture_output=True, text=True)
    assert planned.returncode == 0, planned.stderr
    assert "cpu-only" in planned.stdout or "CPU" in planned.stdout
    in_repo = run_invoke("doctor", "--host", str(host))
    printed = in_repo.stdout.splitlines()[-1].split("Ready to plan: ", 1)[1]
    assert shlex.split(printed) == ["invoke", "build", "--dry-run", "--host", str(host)]


def test_a_missing_rules_file_is_named_where_it_was_looked_for(tmp_path: Path):
    (tmp_path / "build.log").write_text("a.cpp(1): error C2065: 'x': undeclared identifier\n", encoding="utf-8")
    result = run_invoke("diagnose", str(tmp_path / "build.log"), "--rules", "my-rules.toml", cwd=tmp_path)
    where = f"rules file 'my-rules.toml' not found: neither in the current folder ({tmp_path})"
    _assert_one_paragraph(result, 2, where)
    assert "reinstall" not in result.stderr
    (tmp_path / "my-rules.toml").write_text(
        '[[rule]]\nid = "mine"\nphase = "build"\ntitle = "mine"\npatterns = [\'error C2065\']\n'
        'explanation = "x"\nfix = "y"\nsource = "this test"\n',
        encoding="utf-8",
    )
    found = run_invoke("diagnose", str(tmp_path / "build.log"), "--rules", "my-rules.toml", cwd=tmp_path)
    assert found.returncode != 2 and "mine" in found.stdout, found.stderr


def test_an_environment_variable_naming_no_setting_is_refused_not_ignored():
    """Invoke loads INVOKE_WINBUILD_<NAME> only for keys its configuration has; --host is not one, so the
    plan would silently be for this machine instead of the file's."""
    result = run_invoke(
        "build", "--dry-run", env={"INVOKE_WINBUILD_HOST": str(HOSTS_DIR / "cpu-only.json")}, timeout=60
    )
    _assert_one_paragraph(result, 2, "environment variable(s) INVOKE_WINBUILD_HOST name no winbuild setting")
    assert result.stdout == ""
    assert (
        run_invoke(
            "build", "--dry-run", "--host", str(HOSTS_DIR / "cpu-only.json"), env={"INVOKE_WINBUILD_CUDA": "cpu"}
        ).returncode
        == 0
    )


def test_console_script_runs_the_same_tasks(tmp_path: Path):
    script = shutil.which("pytorch-winbuild")
    assert script, "pytorch-winbuild is installed by `pip install -e .` (see .ci/run)"
    result = subprocess.run(
        [script, "env", "--host", VS2017, "--pytorch-version", "1.0.1", "--cuda", "9.0", "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["vcvars"]["args"] == ["x64", "-vcvars_ver=14.11"]
    listing = subprocess.run([script, "--list"], cwd=tmp_path, capture_output=True, text=True)
    for name in ("doctor", "env", "build", "fetch-deps"):
        assert name in listing.stdout
