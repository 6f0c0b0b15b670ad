"""The CMake a plan chooses, run for real: PyPI's cmake wheels for Linux (the same releases as the Windows
wheels the plan pins), configuring trees shaped like PyTorch's.

- Policies: PyTorch up to 2.6 configures sub-projects that declare cmake_minimum_required(VERSION 2.8.12)
  (protobuf's cmake/CMakeLists.txt, pytorch/pytorch#150149). CMake 4 alone stops there as users saw it;
  the plan's own CMake (3.x) configures it, and so does CMake 4 with the plan's CMAKE_POLICY_VERSION_MINIMUM.
- CUDA: the oldest CMake a plan may run for a CUDA 13.0 build (the PyTorch 2.5+ floor, 3.18) enables CMake's
  CUDA language against CUDA 13.0's real nvcc with CMAKE_CUDA_ARCHITECTURES OFF, as PyTorch's
  cmake/public/cuda.cmake sets it, and compiles a kernel: no CUDA bound beyond the release's own is needed
  (build_config/cmake.toml [cuda]).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import HOSTS_DIR, CmakeWheels, plan_options

from pytorch_winbuild.facts.model import load_facts
from pytorch_winbuild.knowledge.model import load_knowledge, version_tuple
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = [pytest.mark.build, pytest.mark.xdist_group("cmake_wheels")]

KNOWLEDGE = load_knowledge()
CACHE = "C:\\Users\\builder\\AppData\\Local\\pytorch-winbuild"
NVCC = "/usr/local/cuda/bin/nvcc"
OLD_POLICY = "Compatibility with CMake < 3.5 has been removed from CMake"


def _plan(**raw: str) -> Plan:
    """A Windows plan for PyTorch 2.6.0 (a release whose tree declares policies older than 3.5)."""
    options = plan_options(cuda="cpu", pytorch_version="2.6.0", cache_dir=CACHE, **raw)
    return make_plan(PlanRequest(options), load_facts(HOSTS_DIR / "cpu-only.json"), KNOWLEDGE)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> CmakeWheels:
    return CmakeWheels(tmp_path_factory.mktemp("cmake-wheels"))


def _tree(folder: Path) -> Path:
    """A top project at PyTorch 2.6's own floor (3.18) with a sub-project at protobuf's 2.8.12."""
    (folder / "sub").mkdir(parents=True)
    (folder / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(top NONE)\nadd_subdirectory(sub)\n", encoding="utf-8"
    )
    (folder / "sub" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 2.8.12)\nproject(sub NONE)\n", encoding="utf-8"
    )
    return folder


def _configure(cmake: Path, tree: Path, build: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cmake), "-S", str(tree), "-B", str(build)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def test_cmake_4_alone_fails_and_the_plans_cmake_or_policy_minimum_configures(wheels: CmakeWheels, tmp_path: Path):
    tree = _tree(tmp_path / "tree")
    plan = _plan()
    assert plan.cmake is not None and version_tuple(plan.cmake.version) < (4, 0)
    assert "CMAKE_POLICY_VERSION_MINIMUM" not in plan.final_env()
    done = _configure(wheels.cmake(plan.cmake.version), tree, tmp_path / "with-plan", {})
    assert done.returncode == 0, done.stdout + done.stderr

    insisted = _plan(cmake="4.4")
    assert insisted.cmake is not None and insisted.cmake.version == "4.4.5"
    cmake4 = wheels.cmake(insisted.cmake.version)
    alone = _configure(cmake4, tree, tmp_path / "alone", {"CMAKE_POLICY_VERSION_MINIMUM": ""})
    assert alone.returncode != 0 and OLD_POLICY in alone.stderr, alone.stdout + alone.stderr
    policy = {"CMAKE_POLICY_VERSION_MINIMUM": insisted.final_env()["CMAKE_POLICY_VERSION_MINIMUM"]}
    done = _configure(cmake4, tree, tmp_path / "with-policy", policy)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_lowest_cmake_a_cuda_13_plan_may_run_compiles_cuda_with_the_real_nvcc(wheels: CmakeWheels, tmp_path: Path):
    """The eras that build with CUDA 13.0 through CMake's CUDA language start at cmake_minimum_required 3.18; the
    CMake a plan runs for --cmake 3.18 enables that language against nvcc 13.0 as PyTorch configures it."""
    floors = {e.min_cmake_for(version_tuple(e.pytorch[0])) for e in KNOWLEDGE.eras if "13.0" in e.cuda}
    assert floors == {"3.18"} and all(e.cuda_language for e in KNOWLEDGE.eras if "13.0" in e.cuda)
    plan = _plan(cmake="3.18")
    assert plan.cmake is not None and plan.cmake.version == "3.18.4.post1"
    tree = tmp_path / "cuda"
    tree.mkdir()
    (tree / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(probe LANGUAGES CXX)\n"
        "set(CMAKE_CUDA_ARCHITECTURES OFF)\nenable_language(CUDA)\n"
        'set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} -gencode arch=compute_90,code=sm_90")\n'
        "add_library(k STATIC k.cu)\n",
        encoding="utf-8",
    )
    (tree / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n", encoding="utf-8")
    cmake = wheels.cmake(plan.cmake.version)
    build = tmp_path / "cuda-build"
    done = _configure(cmake, tree, build, {"CUDACXX": NVCC})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The CUDA compiler identification is NVIDIA 13.0" in done.stdout, done.stdout
    built = subprocess.run([str(cmake), "--build", str(build)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
