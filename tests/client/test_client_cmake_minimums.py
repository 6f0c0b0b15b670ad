"""Every cmake_minimum_required in PyTorch's real 1.13.1 and 2.6.0 trees (Debian's source packages: every
CMakeLists.txt and the cmake/ folder) is met by the CMake the plan chooses for that release, run for real.

Each distinct call is run, exactly as the tree writes it, by PyPI's wheel of the plan's CMake release (the
Linux build of the release the plan pins for Windows) in script mode. The trees hold calls below 3.5
(aten's 3.0, libshm's 2.8.12 in 1.13.1), which CMake 4 refuses: the plan's own pick stays below 4.0 and
configures them; with --cmake 4.4 the plan sets CMAKE_POLICY_VERSION_MINIMUM, and only with it does
CMake 4 take them.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from support import HOSTS_DIR, CmakeWheels, plan_options

from pytorch_winbuild.facts.model import load_facts
from pytorch_winbuild.knowledge.model import load_knowledge, version_tuple
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = [pytest.mark.client, pytest.mark.xdist_group("client")]

RELEASES = ("1.13.1", "2.6.0")
CALL = re.compile(r"cmake_minimum_required\s*\(\s*VERSION\s+([0-9][0-9.]*)(?:\.\.\.[0-9.]+)?[^)]*\)", re.IGNORECASE)
REFUSED = "Compatibility with CMake < 3.5 has been removed from CMake"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> CmakeWheels:
    return CmakeWheels(tmp_path_factory.mktemp("cmake-wheels"))


def _calls(tree: Path) -> dict[str, str]:
    """Each distinct cmake_minimum_required(...) of the tree → one file that has it (for the message)."""
    found: dict[str, str] = {}
    for path in sorted(tree.rglob("*")):
        if path.is_file() and (path.name == "CMakeLists.txt" or path.suffix == ".cmake"):
            for match in CALL.finditer(path.read_text(encoding="utf-8", errors="replace")):
                found.setdefault(" ".join(match.group(0).split()), str(path.relative_to(tree)))
    return found


def _plan(release: str, **raw: str) -> Plan:
    options = plan_options(cuda="cpu", pytorch_version=release, cache_dir="C:\\pytorch-winbuild", **raw)
    return make_plan(PlanRequest(options), load_facts(HOSTS_DIR / "vs2019-vs2022-cuda12.json"), load_knowledge())


def _run(cmake: Path, call: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = folder / "call.cmake"
    script.write_text(call + "\n", encoding="utf-8")
    return subprocess.run(
        [str(cmake), "-P", str(script)], capture_output=True, text=True, env={**os.environ, **env}, timeout=120
    )


@pytest.mark.parametrize("release", RELEASES)
def test_every_minimum_in_the_tree_is_met_by_the_plans_cmake(release, sources, wheels, tmp_path):
    calls = _calls(sources.tree(release))
    minimums = {call: CALL.search(call).group(1) for call in calls}  # type: ignore[union-attr]
    assert any(version_tuple(low) < (3, 5) for low in minimums.values()), calls  # what CMake 4 refuses
    plan = _plan(release)
    assert plan.cmake is not None and version_tuple(plan.cmake.version) < (4, 0)
    assert "CMAKE_POLICY_VERSION_MINIMUM" not in plan.final_env()
    cmake = wheels.cmake(plan.cmake.version)
    for call, where in calls.items():
        assert version_tuple(plan.cmake.version) >= version_tuple(minimums[call]), (call, where)
        done = _run(cmake, call, tmp_path, {"CMAKE_POLICY_VERSION_MINIMUM": ""})
        assert done.returncode == 0, (call, where, done.stderr)


@pytest.mark.parametrize("release", RELEASES)
def test_cmake_4_takes_the_old_minimums_only_with_the_plans_policy_minimum(release, sources, wheels, tmp_path):
    calls = _calls(sources.tree(release))
    plan = _plan(release, cmake="4.4")
    assert plan.cmake is not None and plan.cmake.version == "4.4.5"
    policy = {"CMAKE_POLICY_VERSION_MINIMUM": plan.final_env()["CMAKE_POLICY_VERSION_MINIMUM"]}
    cmake = wheels.cmake(plan.cmake.version)
    for call, where in calls.items():
        old = version_tuple(CALL.search(call).group(1)) < (3, 5)  # type: ignore[union-attr]
        alone = _run(cmake, call, tmp_path, {"CMAKE_POLICY_VERSION_MINIMUM": ""})
        assert (alone.returncode != 0 and REFUSED in alone.stderr) if old else alone.returncode == 0, (call, where)
        done = _run(cmake, call, tmp_path, policy)
        assert done.returncode == 0, (call, where, done.stderr)
