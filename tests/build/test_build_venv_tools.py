"""The build venv carries the plan's CMake and Ninja, and the build's environment runs them.

Plans for this machine (probed: pyenv's real CPythons are its build Pythons) pin cmake==X and ninja==Y per
release and Python; the builder makes the venv from that CPython with pip from PyPI, and the environment the
build runs in (builder/environment.py, the plan's changes in order) finds exactly those on PATH, whatever
cmake or ninja the machine or the tool's own venv has. Three releases, three Pythons: the pins for 3.6 (the
newest cmake and ninja with wheels for it), 3.9 and 3.12 (CMake 4 for a release that configures with it).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import plan_options

from pytorch_winbuild.builder import build_venv
from pytorch_winbuild.builder.environment import build_environment
from pytorch_winbuild.facts.probe import probe
from pytorch_winbuild.facts.probe_common import parse_cmake_version, parse_tool_version
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.python_choice import PythonRequest
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = pytest.mark.pypi

KNOWLEDGE = load_knowledge()
# (release, build Python, the CMake its plan must pin: newest on PyPI for that Python within the bounds)
CASES = [("1.1.0", "3.6", "3.28.4"), ("2.6.0", "3.9", "3.31.10"), ("main", "3.12", "4.4.5")]


@pytest.fixture(scope="module")
def facts():
    return probe(gpus=False)


@pytest.mark.parametrize(("release", "python", "cmake"), CASES)
def test_the_build_environment_runs_the_plans_cmake_and_ninja(
    facts, tmp_path: Path, release: str, python: str, cmake: str
) -> None:
    options = plan_options(
        cuda="cpu", pytorch_version=release, python=PythonRequest.parse(python), cache_dir=str(tmp_path)
    )
    plan = make_plan(PlanRequest(options), facts, KNOWLEDGE)
    assert plan.venv is not None and plan.cmake is not None and plan.ninja is not None
    assert plan.cmake.version == cmake and f"cmake=={cmake}" in plan.venv.specs
    tools = tuple(r.spec for r in plan.venv.requirements if r.name in ("pip", "cmake", "ninja"))
    build_venv.ensure_build_venv(plan.venv.base, Path(plan.venv.folder), tools, plan.venv.key, log=lambda line: None)
    env = build_environment(plan, tmp_path, ()).env
    for tool in (plan.cmake, plan.ninja):
        found = shutil.which(tool.name.lower(), path=env["PATH"])
        assert found == tool.executable, (found, tool)
        done = subprocess.run(
            [tool.name.lower(), "--version"], env=env, capture_output=True, text=True, timeout=60, check=True
        )
        said = (parse_cmake_version if tool.name == "CMake" else parse_tool_version)(done.stdout)
        # the wheel's fourth number is its own build: ninja 1.11.1.1 runs ninja 1.11.1 (…git.kitware.jobserver-1)
        assert said == ".".join(tool.version.split(".")[:3]), done.stdout
