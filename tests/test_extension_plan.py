"""build-ext plans an extension, not PyTorch (issue 39, point 2): an extension build runs torch.utils.cpp_extension
(the compiler, nvcc, ninja), no CMake, so the plan applies none of PyTorch's CMake bounds. The refusal the issue
quoted came from the `winbuild.cmake` setting (invoke.yaml, INVOKE_WINBUILD_CMAKE), which build-ext's plan read
although build-ext has no --cmake: a machine whose CMake is 3.25.1, named there for its PyTorch builds, could not
build a CPU extension against torch 2.13.0 (whose CMakeLists.txt wants 3.27).

The machine is build_config/hosts/cpu-only.json with its CMake made 3.25.1, as such a facts file would list it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from invoke import Config, Context
from support import HOSTS_DIR

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces.flags import WINBUILD_DEFAULTS, cache_choice
from pytorch_winbuild.faces.plan_request import plan_from_flags
from pytorch_winbuild.faces.render import render

CMAKE = "C:\\Program Files\\CMake\\bin\\cmake.exe"


@pytest.fixture
def old_cmake_host(tmp_path: Path) -> Path:
    facts = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    facts["tools"]["cmake"] = {"path": CMAKE, "version": "3.25.1"}
    host = tmp_path / "facts.json"
    host.write_text(json.dumps(facts), encoding="utf-8")
    return host


def _context() -> Context:
    """The configuration of a machine that names its CMake for builds (winbuild.cmake) and the VS generator."""
    return Context(Config(defaults={"winbuild": {**WINBUILD_DEFAULTS, "cmake": CMAKE, "generator": "vs"}}))


def test_a_cpu_extension_plans_on_a_machine_whose_cmake_is_too_old_for_pytorch(
    old_cmake_host: Path, tmp_path: Path
) -> None:
    context = _context()
    arguments = {"cuda": "cpu", "pytorch_version": "2.13.0"}
    with pytest.raises(ConfigurationError, match=r"cmake_minimum_required\(VERSION 3\.27\)"):
        plan_from_flags(  # the same configuration refuses a PyTorch build: the setting is real
            context, host=str(old_cmake_host), source=None, cache=cache_choice(context, "C:\\c"), arguments=arguments
        )
    plan = plan_from_flags(
        context,
        host=str(old_cmake_host),
        source=str(tmp_path),
        cache=cache_choice(context, "C:\\c"),
        task="build_ext",
        source_is_pytorch=False,
        arguments=arguments,
        build_venv=False,
    )
    assert plan.cmake is None and plan.venv is None
    assert not [line for line in plan.decisions if line.startswith(("CMake", "Build venv", "Source prep"))]
    assert "CMAKE_POLICY_VERSION_MINIMUM" not in plan.final_env()
    shown = render(plan, "table", None)
    assert "CMake:" not in shown and "3.27" not in shown and "Visual Studio 17 2022" not in shown
