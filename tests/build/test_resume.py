"""A re-run after a failed build continues in its build folder, and says so (issue 39, point 4): a real CMake + Ninja
tree of twenty C files, stopped partway by a compile error, then run again through the builder's own pipeline.

The truth it is compared with is Ninja's: the objects on disk after the stop, `ninja -n` (the steps it would run)
before the re-run, and `ninja -t commands` (every step of the whole build)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support import HOSTS_DIR, plan_options

from pytorch_winbuild.builder.pipeline import BuildRequest, run_build
from pytorch_winbuild.builder.source import existing_checkout
from pytorch_winbuild.errors import BuildError
from pytorch_winbuild.facts.kept_build import read_build_folder
from pytorch_winbuild.facts.model import facts_from_dict
from pytorch_winbuild.facts.source_tree import SourceTree
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = pytest.mark.build

FILES = 20
BROKEN = "f13.c"  # Ninja at -j1 compiles in its own order; whatever came before this one is kept

CMAKE_LISTS = """cmake_minimum_required(VERSION 3.18)
project(resumed C)
file(GLOB SOURCES src/*.c)
add_library(resumed STATIC ${SOURCES})
"""

# What PyTorch's setup.py does, in small: configure build/ once with the generator the plan sets, then build it.
BUILD_SCRIPT = """import os, subprocess, sys
if not os.path.exists(os.path.join("build", "CMakeCache.txt")):
    subprocess.check_call(["cmake", "-S", ".", "-B", "build", "-G", os.environ["CMAKE_GENERATOR"]])
sys.exit(subprocess.call(["ninja", "-C", "build", "-j1"]))
"""


def tree(folder: Path) -> Path:
    (folder / "src").mkdir(parents=True)
    for number in range(1, FILES + 1):
        (folder / "src" / f"f{number}.c").write_text(f"int f{number}(void) {{ return {number}; }}\n")
    (folder / "src" / BROKEN).write_text("#error stopped here, as a real compile error stops a build\n")
    (folder / "CMakeLists.txt").write_text(CMAKE_LISTS)
    (folder / "build.py").write_text(BUILD_SCRIPT)
    return folder


def linux_plan(cache: Path) -> Plan:
    """The plan of a Linux machine with ccache, its command the tree's build.py under this Python."""
    data = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    data.update(os="linux", visual_studio=[])
    facts = facts_from_dict({**data, "tools": {**data["tools"], "ccache": {"path": "ccache"}}})
    options = plan_options(cuda="cpu", cache_dir=str(cache), compiler_cache="ccache", jobs=1)
    plan = make_plan(PlanRequest(options, tree=SourceTree(version=("2.13.0", "version.txt"))), facts, load_knowledge())
    python = replace(plan.build_python, executable=sys.executable)
    return replace(plan, venv=None, build_python=python, build_arguments=("build.py",))


def ninja(build: Path, *args: str) -> list[str]:
    return subprocess.run(
        ["ninja", "-C", str(build), *args], capture_output=True, text=True, check=True
    ).stdout.splitlines()


def test_a_rerun_says_it_continues_and_counts_what_is_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tree(tmp_path / "resumed tree")
    build = source / "build"
    plan = linux_plan(tmp_path / "cache")

    def run(clean: bool = False) -> Path:
        """The run's own log (two runs in one second get build-<time>.log and build-<time>-2.log)."""
        request = BuildRequest(
            existing_checkout(source), tmp_path / "cache", tmp_path / "logs", clean=clean, verify=False
        )
        return run_build(plan, request).log

    with pytest.raises(BuildError) as failed:
        run()
    first = capsys.readouterr().out
    assert "Continuing in the existing build folder" not in first, "a first build has nothing to continue"

    objects = sorted(build.rglob("*.o"))
    kept = len(objects)
    assert 0 < kept < FILES
    # The failure says how to go on, with what the folder keeps now.
    compiler = read_build_folder(source).cmake_cache["compiler"]  # type: ignore[union-attr]
    keeps = (
        f"its CMake cache (Ninja, {compiler}), {kept} compiled objects (in Ninja's log) and ccache's objects in "
        f"{tmp_path / 'cache' / 'ccache'}"
    )
    assert f"Then run the same command again to continue in {build} (kept: {keeps}), or add --clean" in (
        failed.value.fix or ""
    )

    (source / "src" / BROKEN).write_text("int f13(void) { return 13; }\n")
    left = [line for line in ninja(build, "-n") if line.startswith("[")]
    whole = len(ninja(build, "-t", "commands"))
    assert kept + len(left) == whole, "Ninja's truth: what is kept and what is left make the whole build"

    resumed_log = run()

    again = capsys.readouterr().out
    said = f"-- Continuing in the existing build folder {build}, as PyTorch's build does: kept are {keeps};"
    assert said in again and "`--clean` starts over." in again
    resumed = f"-- resumed: Ninja runs the {len(left)} steps left of the build; {kept} compiled objects of the last"
    lines = again.splitlines()
    at = next(index for index, line in enumerate(lines) if line.startswith(resumed))
    assert lines[at + 1].startswith(f"-- progress: 1/{len(left)} (")
    log = resumed_log.read_text(encoding="utf-8")
    assert f"[1/{len(left)}] Building C object" in log and f"[{len(left)}/{len(left)}] Linking C static library" in log

    run(clean=True)

    fresh = capsys.readouterr().out
    assert f"--clean: removed {build}." in fresh and "Continuing in" not in fresh and "resumed:" not in fresh
    assert f"-- progress: 1/{whole} (" in fresh
