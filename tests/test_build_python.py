"""The build's Python, chosen per era (issue 26): the tool runs on 3.11, no PyTorch before 2.0 builds with it.

Expected values come from outside the code: the era ranges are PyTorch's own (build_config/eras.toml cites
each release's setup.py), the shipped facts files describe real Windows machines, and the pyenv CPythons are
the real interpreters of this machine and of CI. Every plan is made through the real CLI, as a user runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO_ROOT, run_invoke

from pytorch_winbuild.facts.model import load_facts
from pytorch_winbuild.knowledge.model import load_knowledge, version_tuple

HOSTS = REPO_ROOT / "build_config" / "hosts"
WINDOWS_HOSTS = sorted(p for p in HOSTS.glob("*.json") if json.loads(p.read_text())["os"] == "windows")
PYENV = Path("/root/.pyenv/versions")
KNOWLEDGE = load_knowledge()


def plan_json(*args: str, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    done = run_invoke("build", "--dry-run", "--format", "json", *args, **({"cwd": cwd} if cwd else {}))
    return done, json.loads(done.stdout) if done.returncode == 0 else None


def era_range(name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    era = next(e for e in KNOWLEDGE.eras if e.name == name)
    return version_tuple(era.python[0]), version_tuple(era.python[1])


def cases() -> list[tuple[Path, str | None]]:
    found: list[tuple[Path, str | None]] = []
    for host in WINDOWS_HOSTS:
        found.append((host, None))
        found += [(host, cuda.version) for cuda in load_facts(host).cuda]
    return found


@pytest.mark.parametrize(("host", "cuda"), cases(), ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_every_shipped_windows_machine_plans_each_cuda_with_a_build_python_its_era_accepts(
    host: Path, cuda: str | None, tmp_path: Path
) -> None:
    """The issue's bar: each CUDA's default plan exits 0 and names a build Python that is in the facts and that
    its era accepts (or the NuGet fetch that gets one), and every command runs under the venv made from it."""
    done, plan = plan_json("--host", str(host), *(("--cuda", cuda) if cuda else ()), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert plan is not None
    chosen = plan["build_python"]
    low, end = era_range(plan["era"])
    assert low <= version_tuple(chosen["version"])[:2] < end
    facts = load_facts(host)
    if chosen["fetch"] is None:
        assert (chosen["version"], chosen["executable"]) in {(p.version, p.executable) for p in facts.pythons}
        assert next(p for p in facts.pythons if p.executable == chosen["executable"]).bits == 64
    else:
        assert any("fetch-deps --python " + chosen["fetch"] in c["command"] for c in plan["commands"])
    venv = plan["venv"]
    commands = [c["command"] for c in plan["commands"]]
    assert commands[-1].startswith(f'"{venv["python"]}"') or commands[-1].startswith(venv["python"])
    assert any(" -m venv " in c for c in commands)


def test_the_seeds_cuda_9_machine_builds_with_its_python_3_6() -> None:
    """`invoke build --cuda 9.0` on the VS 2017 + CUDA 9.0 machine (Python 3.6.8 and 3.11.9, the tool on 3.11):
    PyTorch 1.1 is the newest that builds with CUDA 9.0 and accepts 3.5-3.7, so the build runs under 3.6.8."""
    done, plan = plan_json("--cuda", "9.0", "--host", str(HOSTS / "vs2017-cuda90-cuda100.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert plan is not None
    assert plan["era"] == "1.1" and plan["build_python"]["version"] == "3.6.8"
    assert plan["build_python"]["executable"] == "C:\\Program Files\\Python36\\python.exe"
    assert "PythonCore\\3.6" in plan["build_python"]["reason"]
    specs = [r["spec"] for r in plan["venv"]["requirements"]]
    assert any(spec.startswith("numpy==") for spec in specs)
    table = run_invoke("build", "--dry-run", "--cuda", "9.0", "--host", str(HOSTS / "vs2017-cuda90-cuda100.json"))
    assert table.returncode == 0 and "Build Python" in table.stdout and "3.6.8" in table.stdout


def test_a_python_the_era_refuses_is_bad_input_naming_the_one_that_works() -> None:
    done = run_invoke(
        "build", "--dry-run", "--cuda", "9.0", "--python", "3.11", "--host", str(HOSTS / "vs2017-cuda90-cuda100.json")
    )
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert "not 3.11 (--python)" in message and "--python 3.6" in message
    assert "Traceback" not in done.stderr


def test_a_32_bit_python_path_is_refused_and_a_64_bit_one_named() -> None:
    host = HOSTS / "vs2019-vs2022-cuda12.json"
    done = run_invoke(
        "build", "--dry-run", "--host", str(host), "--python", "C:\\Program Files (x86)\\Python38-32\\python.exe"
    )
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert "32-bit" in message and "--python 3.12" in message


@pytest.mark.parametrize("value", ["3", "3.", "abc/../", ""])
def test_a_malformed_python_is_refused(value: str) -> None:
    done = run_invoke("build", "--dry-run", "--python", value, "--host", str(HOSTS / "cpu-only.json"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--python" in done.stderr and "Traceback" not in done.stderr


def test_windows_without_a_fitting_python_plans_the_nuget_fetch(tmp_path: Path) -> None:
    """vs2019-vs2022-cuda12.json has 64-bit 3.9, 3.11 and 3.12 and a 32-bit 3.8; PyTorch 1.6 builds with 3.5-3.8:
    CPython 3.8 from NuGet, fetched by the printed `invoke fetch-deps --python 3.8` into the cache, where the plan's
    venv is made from it."""
    host = HOSTS / "vs2019-vs2022-cuda12.json"
    done, plan = plan_json("--pytorch-version", "1.6.0", "--cuda", "cpu", "--host", str(host), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert plan is not None
    chosen = plan["build_python"]
    assert chosen["fetch"] == "3.8" and chosen["version"].startswith("3.8.") and not chosen["present"]
    assert chosen["executable"].endswith("\\tools\\python.exe")
    assert any(c["command"].startswith("invoke fetch-deps --python 3.8") for c in plan["commands"])
    assert plan["venv"]["python"].endswith("\\Scripts\\python.exe")
    assert plan["venv"]["folder"].startswith(load_facts(host).cache_dir or "")


def test_linux_without_a_fitting_python_names_the_pyenv_install(tmp_path: Path) -> None:
    """A Linux machine with only 3.11 cannot build PyTorch 1.10 (3.6-3.9): exit 3 naming `pyenv install 3.9`."""
    facts = json.loads((HOSTS / "cpu-only.json").read_text())
    tool = {"version": "3.11.7", "bits": 64, "executable": "/usr/bin/python3.11", "implementation": "CPython"}
    facts.update(os="linux", python=tool, pythons=[tool], visual_studio=[], cuda=[], cache_dir="/tmp/c")
    path = tmp_path / "linux.json"
    path.write_text(json.dumps(facts))
    done = run_invoke("build", "--dry-run", "--pytorch-version", "1.10.2", "--host", str(path), cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "pyenv install 3.9" in " ".join(done.stderr.split())


def test_a_schema_3_facts_file_plans_with_its_one_python(tmp_path: Path) -> None:
    """Facts written before every Python was listed still load: their `python` is the only build Python."""
    data = json.loads((HOSTS / "vs2017-cuda90-cuda100.json").read_text())
    data["schema"] = 3
    data["python"] = next(p for p in data.pop("pythons") if p["version"] == "3.6.8")
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    done, plan = plan_json("--cuda", "9.0", "--host", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert plan is not None and plan["build_python"]["version"] == "3.6.8"


def test_this_machine_plans_an_era_311_cannot_build_with_a_real_old_python(tmp_path: Path) -> None:
    """PyTorch 1.10 builds with 3.6-3.9; the tool runs on 3.11, and the probe finds pyenv's real 3.9.18."""
    assert sys.version_info[:2] >= (3, 11)
    done, plan = plan_json("--pytorch-version", "1.10.2", "--cuda", "cpu", "--cache-dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert plan is not None
    expected = subprocess.run(
        [str(PYENV / "3.9.18" / "bin" / "python"), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert plan["build_python"]["version"] == expected
    done, plan = plan_json(
        "--pytorch-version", "1.10.2", "--cuda", "cpu", "--cache-dir", str(tmp_path), "--python", "3.7", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert plan is not None and plan["build_python"]["version"] == "3.7.16"
    assert plan["venv"]["folder"].startswith(str(tmp_path / "venvs"))


def test_doctor_lists_each_python_with_the_eras_it_builds_and_its_ready_line_plans(tmp_path: Path) -> None:
    """doctor names the tool's Python apart from the build Pythons, each with the eras whose range (PyTorch's
    setup.py, eras.toml) holds it; the command its "Ready to plan" line prints is run and exits 0."""
    host = HOSTS / "vs2017-cuda90-cuda100.json"
    done = run_invoke("doctor", "--host", str(host), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any("pytorch-winbuild's Python" in line and "3.11.9" in line for line in lines)
    expected = [e.name for e in KNOWLEDGE.eras if era_range(e.name)[0] <= (3, 6) < era_range(e.name)[1]]
    line = next(line for line in lines if "Python 3.6.8" in line)
    assert line.endswith(f"builds PyTorch {', '.join(expected)}") and "1.1" in expected and "2.0" not in expected
    ready = lines[-1].split("Ready to plan: ", 1)[1]
    words = ready.split()
    assert words[:3] == ["invoke", "build", "--dry-run"]
    assert run_invoke(*words[1:], cwd=tmp_path).returncode == 0


def test_doctor_is_not_ready_when_the_plan_it_would_suggest_fails(tmp_path: Path) -> None:
    """A configured CMake (winbuild.cmake, here INVOKE_WINBUILD_CMAKE=3.10) that only releases this machine's
    Visual Studio cannot build accept: every doctor line is fine, but the plan it suggests stops (exit 3);
    doctor makes that plan, says it fails and why, and exits 3 instead of "Ready to plan"."""
    host = HOSTS / "cpu-only.json"
    done = run_invoke("doctor", "--host", str(host), cwd=tmp_path, env={"INVOKE_WINBUILD_CMAKE": "3.10"})
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Ready to plan" not in done.stdout
    verdict = " ".join(done.stdout.split()).split("fails: ", 1)[1]
    assert (
        verdict.startswith("toolchain error: ")
        and "the CMake asked for (3.10)" in verdict
        and "Visual Studio" in verdict
    )


def test_python_from_the_configuration_and_a_path_the_probe_did_not_list(tmp_path: Path) -> None:
    """winbuild.python (here INVOKE_WINBUILD_PYTHON) is --python's setting; a path outside every place the probe
    looks is asked what it is (the real interpreter answers) and planned with; a path that is nothing is exit 2."""
    era = ("--pytorch-version", "1.10.2", "--cuda", "cpu", "--cache-dir", str(tmp_path / "cache"))
    done = run_invoke("build", "--dry-run", "--format", "json", *era, env={"INVOKE_WINBUILD_PYTHON": "3.8"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["build_python"]["version"] == "3.8.18"
    link = tmp_path / "elsewhere" / "my-python"
    link.parent.mkdir()
    link.symlink_to(PYENV / "3.8.18" / "bin" / "python")
    done, plan = plan_json(*era, "--python", str(link), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert plan is not None and plan["build_python"]["executable"] == str(link)
    assert plan["build_python"]["version"] == "3.8.18"
    missing = run_invoke("env", "--cuda", "cpu", "--python", str(tmp_path / "no-such-python"), cwd=tmp_path)
    assert missing.returncode == 2 and "no such file" in missing.stderr and "Traceback" not in missing.stderr


def test_nuget_pythons_without_venv_are_not_fetched_for_a_build(tmp_path: Path) -> None:
    """NuGet's packages hold venv and ensurepip only from 3.7.4 (bpo-36010; deps.toml [python.layout_since]): the
    seeds' CUDA 9.0 machine with only its tool's 3.11 gets CPython 3.7 (PyTorch 1.1 accepts 3.5-3.7), never 3.6;
    asking for 3.6 there is exit 3 naming python.org's installer."""
    data = json.loads((HOSTS / "vs2017-cuda90-cuda100.json").read_text())
    data["pythons"] = [data["python"]]
    host = tmp_path / "only-311.json"
    host.write_text(json.dumps(data))
    done, plan = plan_json("--cuda", "9.0", "--host", str(host), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert plan is not None and plan["era"] == "1.1"
    assert plan["build_python"]["fetch"] == "3.7" and plan["build_python"]["version"] == "3.7.9"
    asked = run_invoke("build", "--dry-run", "--cuda", "9.0", "--python", "3.6", "--host", str(host), cwd=tmp_path)
    assert asked.returncode == 3, asked.stdout + asked.stderr
    assert "Python 3.6 (64-bit, from python.org)" in " ".join(asked.stderr.split())


def test_doctor_names_a_venv_script_that_is_not_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's first command runs `.venv/bin/invoke doctor` without activating the venv: its "Ready to
    plan" line names that script as it was started (plain `invoke` is not on PATH there: exit 127)."""
    from pytorch_winbuild.faces.commands import _plan_command

    script = tmp_path / "a venv" / "bin" / "invoke"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script), "doctor"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert _plan_command(None) == f"'{script}' build --dry-run"
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert _plan_command(None) == "invoke build --dry-run"
