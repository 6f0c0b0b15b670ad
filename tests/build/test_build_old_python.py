"""An era that the tool's own Python cannot build, built end to end by a real old CPython (issue 26).

pytorch-winbuild runs on Python 3.11; PyTorch 1.7-1.10 builds only with Python 3.6-3.9 (v1.10.2 setup.py's
python_min_version and its CI, build_config/eras.toml). mini torch with version.txt 1.10.0a0 is that era's tree:
`invoke build` finds pyenv's real CPythons, makes the build venv from the newest one the era accepts (3.9),
installs the era's pinned requirements from PyPI into it, runs `setup.py install` (the era's command) under it
with CMake, Ninja and g++, and verifies in a fresh interpreter of that venv. What was built says which
interpreter built it: the extension's file name carries CPython's ABI tag, and the check reports its Python.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from build_support import copy_fixture, last_report, run_invoke

pytestmark = [pytest.mark.build, pytest.mark.pypi]

PYENV = Path("/root/.pyenv/versions")


def own_version(python: Path) -> str:
    """What the interpreter says it is (not what pytorch-winbuild says)."""
    return subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def build_old_tree(tmp_path: Path, cache: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    source = tmp_path / "mini torch 1.10"
    if not source.exists():
        copy_fixture("mini_torch", source)
        (source / "version.txt").write_text("1.10.0a0\n", encoding="utf-8")
    done = run_invoke(
        sys.executable, "build", "--source", str(source), "--cuda", "cpu", "--cache-dir", str(cache), "--jobs", "2",
        *extra,
    )  # fmt: skip
    return done, source


def test_pytorch_1_10_is_built_by_a_real_python_3_9_while_the_tool_runs_on_3_11(tmp_path: Path) -> None:
    assert sys.version_info[:2] >= (3, 11)
    cache = tmp_path / "cache"
    done, _ = build_old_tree(tmp_path, cache)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    report = last_report(cache / "logs")
    plan = report["plan"]
    base = PYENV / "3.9.18" / "bin" / "python"
    assert plan["era"] == "1.7-1.10"
    assert plan["build_python"]["executable"] == str(base)
    assert plan["build_python"]["version"] == own_version(base)
    venv_python = Path(plan["venv"]["python"])
    assert venv_python.parent.parent.parent == cache / "venvs"
    assert report["command"][:3] == [str(venv_python), "setup.py", "install"]
    verification = report["verification"]
    assert verification["ok"] and verification["interpreter"] == str(venv_python)
    assert verification["python"] == own_version(base)
    assert verification["version"].startswith("1.10.0a0")
    assert Path(verification["location"]).is_relative_to(venv_python.parent.parent)
    # The extension CMake built carries the ABI tag of the interpreter whose headers it compiled against.
    built = list((venv_python.parent.parent / "lib").rglob("_C.cpython-39-*.so"))
    assert built, sorted(p.name for p in (venv_python.parent.parent / "lib").rglob("_C*"))
    # The venv holds the era's pins, as pip itself lists them.
    frozen = subprocess.run(
        [str(venv_python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True
    ).stdout
    normal = {line.lower().replace("_", "-") for line in frozen.splitlines()}  # PEP 503 names
    for spec in (r["spec"] for r in plan["venv"]["requirements"]):
        assert spec.lower().replace("_", "-") in normal, spec


def test_python_3_7_asked_by_flag_builds_in_its_own_venv_and_the_first_is_reused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    done, _ = build_old_tree(tmp_path, cache, "--python", "3.7")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    first = last_report(cache / "logs")
    base = PYENV / "3.7.16" / "bin" / "python"
    assert first["plan"]["build_python"]["executable"] == str(base)
    assert first["verification"]["python"] == own_version(base) == "3.7.16"
    marker = Path(first["plan"]["venv"]["folder"]) / "winbuild-venv.json"
    made = marker.stat().st_mtime_ns
    again, _ = build_old_tree(tmp_path, cache, "--python", "3.7")
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr
    assert marker.stat().st_mtime_ns == made  # reused: same interpreter, same requirements
    assert last_report(cache / "logs")["plan"]["venv"]["key"] == first["plan"]["venv"]["key"]
    verified = run_invoke(sys.executable, "verify", "--cache-dir", str(cache))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert '"python": "3.7.16"' in verified.stdout  # `invoke verify` checks the last build's venv by default
