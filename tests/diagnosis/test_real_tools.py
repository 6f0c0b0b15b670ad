"""Triage on logs the real tools write here: CMake, Ninja, g++ and CUDA's nvcc failing for real.

The Windows formats are covered by the excerpts in diagnosis_logs.py; these tests make sure the
block logic also holds for output no one typed by hand (current CMake and Ninja versions add
details such as `FAILED: [code=1]`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import cmake
import ninja
import pytest

from pytorch_winbuild.diagnosis.report import TriageResult
from pytorch_winbuild.diagnosis.triage import triage_log

pytestmark = pytest.mark.build

CMAKE = str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
NINJA = str(Path(ninja.BIN_DIR) / "ninja")
NVCC = Path("/usr/local/cuda/bin/nvcc")  # CUDA 13.0 on the project's Linux machines and CI (NVIDIA's own install)


def project(tmp_path: Path, cmakelists: str, files: dict[str, str] | None = None) -> Path:
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(cmakelists)
    for name, text in (files or {}).items():
        path = source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return source


def run_logged(tmp_path: Path, *commands: list[str], env: dict[str, str] | None = None) -> TriageResult:
    """Run the commands one after the other, stdout and stderr into one log as a build runner keeps it."""
    log = tmp_path / "build.log"
    with log.open("w") as out:
        for command in commands:
            subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=300, check=False)
    return triage_log(log)


def test_compile_error_in_a_ninja_build(tmp_path: Path) -> None:
    source = project(
        tmp_path,
        "cmake_minimum_required(VERSION 3.10)\n"
        "project(demo LANGUAGES CXX)\n"
        "add_library(demo STATIC ok.cpp error_handler.cpp bad.cpp)\n",
        {
            "ok.cpp": "int ok() { return 1; }\n",
            "error_handler.cpp": "int handler() { int unused = 0; return 2; }\n",
            "bad.cpp": "#include <vector>\nint bad() {\n  return undeclared_thing + 1;\n}\n",
        },
    )
    build = tmp_path / "build"
    result = run_logged(
        tmp_path,
        [
            CMAKE,
            "-G",
            "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={NINJA}",
            "-DCMAKE_CXX_FLAGS=-Wall",
            "-S",
            str(source),
            "-B",
            str(build),
        ],
        [CMAKE, "--build", str(build), "--", "-j1"],
    )
    error = result.first_error
    assert error is not None and error.kind == "ninja"
    text = (tmp_path / "build.log").read_text()
    assert text.index("error_handler.cpp:1:21: warning: unused variable") < text.index(
        "FAILED: "
    )  # came first, did not win
    assert error.lines[0].text.startswith("FAILED: ") and "bad.cpp.o" in error.lines[0].text
    assert "bad.cpp:3:10: error: " in error.summary.text and "undeclared_thing" in error.summary.text
    assert error.context_after[0].text.startswith("ninja: build stopped")
    assert result.matches == ()


def test_cmake_fatal_error_with_call_stack(tmp_path: Path) -> None:
    source = project(
        tmp_path,
        "cmake_minimum_required(VERSION 3.10)\nproject(demo LANGUAGES NONE)\ninclude(cmake/public/cuda.cmake)\n",
        {"cmake/public/cuda.cmake": 'message(FATAL_ERROR "Failed to find nvToolsExt")\n'},
    )
    result = run_logged(
        tmp_path,
        [CMAKE, "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={NINJA}", "-S", str(source), "-B", str(tmp_path / "build")],
    )
    error = result.first_error
    assert error is not None and error.kind == "cmake"
    assert error.summary.text.endswith("(message): Failed to find nvToolsExt")
    assert any(line.text.startswith("Call Stack (most recent call first):") for line in error.lines)
    assert [match.rule.id for match in result.matches] == ["nvtx-missing"]


def test_cmake_too_old_for_the_project(tmp_path: Path) -> None:
    source = project(tmp_path, "cmake_minimum_required(VERSION 99.0)\nproject(demo LANGUAGES NONE)\n")
    result = run_logged(tmp_path, [CMAKE, "-S", str(source), "-B", str(tmp_path / "build")])
    assert result.first_error is not None and result.first_error.kind == "cmake"
    assert [match.rule.id for match in result.matches] == ["cmake-too-old"]


def test_generator_changed_in_an_existing_build_folder(tmp_path: Path) -> None:
    source = project(tmp_path, "cmake_minimum_required(VERSION 3.10)\nproject(demo LANGUAGES NONE)\n")
    build = str(tmp_path / "build")
    result = run_logged(
        tmp_path,
        [CMAKE, "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={NINJA}", "-S", str(source), "-B", build],
        [CMAKE, "-G", "Unix Makefiles", "-S", str(source), "-B", build],
    )
    assert result.first_error is not None and result.first_error.kind == "cmake"
    assert [match.rule.id for match in result.matches] == ["cmake-generator-mismatch"]


def test_no_compiler_and_no_ninja_on_path(tmp_path: Path) -> None:
    """A shell where nothing was set up: the PATH holds no compiler and no ninja."""
    source = project(tmp_path, "cmake_minimum_required(VERSION 3.10)\nproject(demo LANGUAGES CXX)\n")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    bare = {"PATH": str(empty), "HOME": str(tmp_path)}
    no_ninja = run_logged(tmp_path, [CMAKE, "-G", "Ninja", "-S", str(source), "-B", str(tmp_path / "b1")], env=bare)
    assert "ninja-missing" in {match.rule.id for match in no_ninja.matches}
    no_compiler = run_logged(
        tmp_path,
        [CMAKE, "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={NINJA}", "-S", str(source), "-B", str(tmp_path / "b2")],
        env=bare,
    )
    assert [match.rule.id for match in no_compiler.matches] == ["compiler-not-found"]
    assert no_compiler.first_error is not None and no_compiler.first_error.summary.text.endswith(
        "No CMAKE_CXX_COMPILER could be found."
    )


def test_nvcc_rejects_an_architecture_this_cuda_no_longer_builds(tmp_path: Path) -> None:
    """The exact text (and spacing) nvcc prints, and the fix's advice followed for real."""
    if not NVCC.exists():
        pytest.fail(
            f"{NVCC} is missing: this test needs the CUDA toolkit's nvcc (CUDA 13.0 on the project's machines).",
            pytrace=False,
        )
    nvcc = str(NVCC)
    kernel = tmp_path / "kernel.cu"
    kernel.write_text("__global__ void noop() {}\n")
    listed = subprocess.run(
        [nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert listed and "compute_50" not in listed, (
        f"this nvcc still builds Maxwell (compute_50), expected CUDA 13: {listed}"
    )

    result = run_logged(tmp_path, [nvcc, "-arch=compute_50", "-c", str(kernel), "-o", str(tmp_path / "kernel.o")])
    assert (
        "nvcc fatal   : Unsupported gpu architecture 'compute_50'" in (tmp_path / "build.log").read_text().splitlines()
    )
    error = result.first_error
    assert error is not None and error.kind == "nvcc"
    assert error.summary.text == "nvcc fatal   : Unsupported gpu architecture 'compute_50'"
    (match,) = result.matches
    assert match.rule.id == "nvcc-unsupported-gpu-arch"
    for advice in (
        "nvcc --list-gpu-arch",
        "invoke build --arch-list",
        "invoke build-ext --arch-list",
        "TORCH_CUDA_ARCH_LIST",
    ):
        assert advice in match.rule.fix

    # A virtual architecture nvcc accepts, with a real GPU code it lacks: the other message.
    wrong_code = run_logged(
        tmp_path, [nvcc, f"-arch={listed[0]}", "-code=sm_52", "-c", str(kernel), "-o", str(tmp_path / "kernel.o")]
    )
    assert [match.rule.id for match in wrong_code.matches] == ["nvcc-unsupported-gpu-arch"]
    assert wrong_code.matches[0].line.text == "nvcc fatal   : Value 'sm_52' is not defined for option 'gpu-code'"

    # The fix works: an architecture from --list-gpu-arch compiles.
    subprocess.run(
        [nvcc, f"-arch={listed[0]}", "-c", str(kernel), "-o", str(tmp_path / "kernel.o")],
        capture_output=True,
        timeout=300,
        check=True,
    )
