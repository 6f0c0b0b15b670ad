"""The tree's own build front end decides which variables reach CMake, never the version (issue 28 point 4).

A tree with setup.py runs tools/setup_helpers/cmake.py, which turns PyTorch's own variables into CMake
arguments (CMAKE_GENERATOR_TOOLSET_VERSION → -T version=…,host=x64, MAX_JOBS → `cmake --build -j`). PyTorch
main without setup.py (pytorch/pytorch#180247, built by scikit-build-core) has no such code, and the move was
to be reverted (ROCm/TheRock#6523): only CMake's own environment variables reach CMake there. Expected names
and forms are CMake's documentation: CMAKE_GENERATOR, CMAKE_GENERATOR_PLATFORM and CMAKE_GENERATOR_TOOLSET are
environment variables from CMake 3.15 (a toolset spec such as `version=14.44,host=x64`, "Visual Studio
Toolset Selection"), CMAKE_BUILD_PARALLEL_LEVEL from CMake 3.12.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import HOSTS_DIR, run_invoke

HOST = HOSTS_DIR / "vs2019-vs2022-cuda12.json"
SKBUILD = '[build-system]\nrequires = ["scikit-build-core>=1.0"]\nbuild-backend = "scikit_build_core.build"\n'
SETUPTOOLS = '[build-system]\nrequires = ["setuptools>=77.0.0,<82"]\nbuild-backend = "setuptools.build_meta"\n'


def _tree(folder: Path, build_system: str, setup_py: bool) -> Path:
    (folder / "torch").mkdir(parents=True)  # what makes a folder a PyTorch tree (facts/source_tree.py)
    (folder / "pyproject.toml").write_text(f'[project]\nname = "torch"\n\n{build_system}', encoding="utf-8")
    (folder / "version.txt").write_text("2.15.0a0\n", encoding="utf-8")
    if setup_py:
        (folder / "setup.py").write_text("# PyTorch's setup.py: torch through tools/setup_helpers\n", encoding="utf-8")
    return folder


def _plan(tree: Path) -> dict:
    result = run_invoke(
        "build", "--dry-run", "--format", "json", "--host", str(HOST), "--source", str(tree), "--generator", "vs"
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_tree_without_setup_py_gets_cmakes_own_variables(tmp_path: Path):
    plan = _plan(_tree(tmp_path / "main", SKBUILD, setup_py=False))
    env = plan["env"]
    assert env["CMAKE_GENERATOR"] == "Visual Studio 17 2022" and env["CMAKE_GENERATOR_PLATFORM"] == "x64"
    assert env["CMAKE_GENERATOR_TOOLSET"] == "version=14.44,host=x64"
    assert "CMAKE_GENERATOR_TOOLSET_VERSION" not in env
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == env["MAX_JOBS"]
    assert any(d.startswith("Build front end: scikit_build_core.build") for d in plan["decisions"])


@pytest.mark.parametrize("build_system", [SETUPTOOLS, SKBUILD], ids=["reverted", "pyproject-names-skbuild"])
def test_a_tree_with_setup_py_gets_setup_helpers_variables(tmp_path: Path, build_system: str):
    """Whatever backend pyproject.toml names, setup.py's tools/setup_helpers read the era's variables."""
    env = _plan(_tree(tmp_path / "main", build_system, setup_py=True))["env"]
    assert env["CMAKE_GENERATOR_TOOLSET_VERSION"] == "14.44"
    assert "CMAKE_GENERATOR_TOOLSET" not in env and "CMAKE_BUILD_PARALLEL_LEVEL" not in env


MARKED = (
    '[build-system]\nrequires = ["scikit-build-core>=1.0", "importlib-metadata ; python_version < \\"3.10\\"", '
    "\"tomli>=1.1 ; python_version < '3.13'\", \"numpy ; sys_platform == 'linux'\"]\n"
    'build-backend = "scikit_build_core.build"\n'
)


def test_the_trees_pep_508_markers_are_evaluated_for_the_build_python(tmp_path: Path):
    """Issue 36 point 11: a marker was exit 2 with a fix about the cache folder (its quotes reached cmd's quoting).
    Now each requirement whose marker holds for the build Python (3.12 on Windows here) goes to pip without it."""
    plan = _plan(_tree(tmp_path / "main", MARKED, setup_py=False))
    assert plan["venv"]["tree_requires"] == ["scikit-build-core>=1.0", "tomli>=1.1"]
    assert any("tomli>=1.1" in command["command"] for command in plan["commands"])


def test_requires_longer_than_a_command_line_is_exit_2_naming_pyproject(tmp_path: Path):
    """200 KB of requirements was `OSError: Argument list too long` (exit 70); cmd's line is 8191 characters."""
    many = ", ".join(f'"package-number-{n}>=1.0"' for n in range(8000))
    tree = _tree(tmp_path / "main", f'[build-system]\nrequires = [{many}]\nbuild-backend = "x"\n', setup_py=False)
    result = run_invoke("build", "--dry-run", "--host", str(HOST), "--source", str(tree))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "pyproject.toml [build-system] requires holds 8000 requirements" in result.stderr
    assert len(result.stderr) < 1000


def test_a_url_requirement_is_refused_when_the_build_is_offline(tmp_path: Path):
    """Issue 36 point 13: with --find-links alone (offline), `name @ https://...` would still make pip go online."""
    url = (
        '[build-system]\nrequires = ["scikit-build-core>=1.0", "helper @ https://example.invalid/helper-1.0.tar.gz"]\n'
    )
    tree = _tree(tmp_path / "main", url + 'build-backend = "scikit_build_core.build"\n', setup_py=False)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    result = run_invoke(
        "build", "--cuda", "cpu", "--source", str(tree), "--find-links", str(wheels), "--cache-dir", str(tmp_path / "c")
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "helper @ https://example.invalid/helper-1.0.tar.gz, which pip fetches from that URL" in result.stderr
