"""A CUDA plan names its nvcc for CMake's CUDA language (CUDACXX), so a CUDACXX left in the environment cannot
pick another CUDA: CMake takes CUDACXX before PATH (CMake's documentation of the CUDACXX environment
variable; Modules/CMakeDetermineCUDACompiler.cmake). PyTorch's Windows CI pins it the same way with
CMAKE_CUDA_COMPILER (.ci/pytorch/windows/build_pytorch.bat). Real CMake, Ninja and CUDA 13.0's nvcc, on a
project with only `project(... LANGUAGES CUDA)`, as PyTorch's cmake/public/cuda.cmake enables it from 1.11.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import run_invoke

pytestmark = pytest.mark.build

PROJECT = (
    "cmake_minimum_required(VERSION 3.18)\nproject(probe LANGUAGES CUDA)\n"
    'message(STATUS "nvcc: ${CMAKE_CUDA_COMPILER}")\n'
)


def _configure(tmp_path: Path, script: str, name: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "CMakeLists.txt").write_text(PROJECT, encoding="utf-8")
    stale = tmp_path / "other-cuda" / "nvcc"  # a CUDACXX left by another toolkit: not a working nvcc
    stale.parent.mkdir(exist_ok=True)
    stale.write_text("#!/bin/sh\nexit 1\n", encoding="ascii")
    stale.chmod(0o755)
    env = {**os.environ, "CUDACXX": str(stale)}
    command = f"{script}cmake -S {tmp_path} -B {tmp_path / name} -G Ninja"
    return subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=300)


def test_a_stale_cudacxx_does_not_pick_another_nvcc(tmp_path: Path):
    script = tmp_path / "build_env.sh"
    written = run_invoke("env", "--cuda", "13.0", "--format", "sh", "--output", str(script))
    assert written.returncode == 0, written.stderr
    planned = _configure(tmp_path, f". {script} && ", "with-plan")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "-- nvcc: /usr/local/cuda/bin/nvcc" in planned.stdout
    without = _configure(tmp_path, "", "without-plan")  # the same environment without the plan: CMake fails
    assert without.returncode != 0 and "other-cuda/nvcc" in without.stdout + without.stderr
