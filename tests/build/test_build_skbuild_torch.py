"""`invoke build` on a PyTorch tree of the shape `main` has had since setup.py was removed.

PyTorch moved its build backend from setuptools to scikit-build-core 1.0 and deleted setup.py
(pytorch/pytorch#180247 and #180248, landing tracked in #189758, July 2026): the tree keeps
version.txt and a pyproject.toml whose [project] name is torch, and `pip install --no-build-isolation
-v .` (the 2.9+ era's command, unchanged) imports scikit-build-core from the build's Python.

mini torch (tests/build/fixtures/mini_torch) is turned into that shape here: its setup.py and
tools/setup_helpers go, and a pyproject.toml hands CMake to the real scikit-build-core, which must
be installed (.ci/run installs it with the test extras)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from build_support import copy_fixture, last_report, run_invoke

from pytorch_winbuild.builder.build_backend import check_checkout
from pytorch_winbuild.errors import ToolchainError

pytestmark = pytest.mark.build

# scikit-build-core's documented configuration (https://scikit-build-core.readthedocs.io: "Configuration",
# "Dynamic metadata" regex provider, "generate", cmake.define from the environment).
PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=1.0"]
build-backend = "scikit_build_core.build"

[project]
name = "torch"
dynamic = ["version"]

[tool.scikit-build]
wheel.packages = ["torch"]

[tool.scikit-build.metadata.version]
provider = "scikit_build_core.metadata.regex"
input = "version.txt"
regex = '(?P<value>\\S+)'

[[tool.scikit-build.generate]]
path = "torch/version.py"
template = '''
__version__ = "${version}"
cuda = None
'''

[tool.scikit-build.cmake.define]
USE_CUDA = { env = "USE_CUDA", default = "OFF" }
TORCH_BUILD_VERSION = { env = "WINBUILD_TEST_NO_SUCH_VARIABLE", default = "from-scikit-build-core" }
"""


def skbuild_tree(tmp_path: Path) -> Path:
    tree = copy_fixture("mini_torch", tmp_path / "torch main")
    (tree / "setup.py").unlink()
    shutil.rmtree(tree / "tools" / "setup_helpers")
    (tree / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    with (tree / "CMakeLists.txt").open("a", encoding="utf-8") as cmake:
        cmake.write("install(TARGETS _C LIBRARY DESTINATION torch)\n")
    return tree


def test_a_tree_without_setup_py_is_planned_built_and_verified(venv_python: Path, tmp_path: Path) -> None:
    """From inside the tree, with no --source: the folder is recognised, its version read, and the real
    scikit-build-core runs CMake and Ninja; the installed torch imports outside the tree."""
    tree = skbuild_tree(tmp_path)
    cache = tmp_path / "cache"

    done = run_invoke(venv_python, "build", "--cuda", "cpu", "--cache-dir", str(cache), "--jobs", "2", cwd=tree)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    report = last_report(cache / "logs")
    assert report["plan"]["era"] == "2.9+" and report["plan"]["pytorch_version"] == "2.13.0a0"
    built_by = report["plan"]["venv"]["python"]  # the build venv, holding the tree's own [build-system] requires
    assert Path(built_by).is_relative_to(cache / "venvs")
    assert report["command"] == [built_by, "-m", "pip", "install", "--no-build-isolation", "-v", "."]
    assert any(spec.startswith("scikit-build-core") for spec in report["plan"]["venv"]["specs"])
    log_text = Path(report["log"]).read_text(encoding="utf-8")
    assert "scikit-build-core" in log_text and "Successfully installed torch-2.13.0a0" in log_text
    assert report["verification"]["ok"] is True and report["verification"]["version"] == "2.13.0a0"
    called = subprocess.run(
        [built_by, "-c", "import torch, torch._C; print(torch._C._version(), torch.add(40, 2))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert called.stdout.split() == ["from-scikit-build-core", "42"]


def test_a_build_python_without_the_backend_is_refused_before_pip_runs(tmp_path: Path) -> None:
    """A Python that cannot import scikit-build-core (a real interpreter, a venv without it): pip
    --no-build-isolation would fail with BackendUnavailable once started; the build stops first, with
    exit 3 and the command that installs the tree's build requirements into that Python."""
    tree = skbuild_tree(tmp_path)
    (tree / "requirements-build.txt").write_text("scikit-build-core>=1.0\n", encoding="utf-8")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    bare_python = str(bare / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    arguments = ("-m", "pip", "install", "--no-build-isolation", "-v", ".")

    with pytest.raises(ToolchainError) as refused:
        check_checkout(tree, arguments, bare_python)

    assert refused.value.exit_code == 3
    assert "'scikit_build_core.build'" in refused.value.message and bare_python in refused.value.message
    assert f"`{bare_python} -m pip install -r {tree / 'requirements-build.txt'}`" in (refused.value.fix or "")
    check_checkout(tree, arguments, sys.executable)  # this Python has it (.ci/run installs it)
