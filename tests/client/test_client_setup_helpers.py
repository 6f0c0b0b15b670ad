"""PyTorch's own tools/setup_helpers, run on our plans: the cmake they would run is what the plan says.

For every plan the facts files allow for 1.13.1 and 2.6.0 (each CUDA and cpu, Ninja and the Visual
Studio generator, each compiler cache), setup_helpers_driver.py runs the release's
tools/build_pytorch_libs.py build entry (CMake.generate, then CMake.build) in the plan's Windows
environment and records the two cmake command lines with their environment. The assertions read
only the plan's JSON form and what PyTorch's code recorded. The driver's docstring lists each patch.

1.7.1 (bullseye) is not run: see test_client_sources.py.
"""

from __future__ import annotations

import json
import ntpath
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from client_support import DRIVER, walk_files
from plan_machine import PlanCase, find_on_path, machine_env, make_winroot, plan_cases, windows_to_local

pytestmark = [pytest.mark.client, pytest.mark.xdist_group("client")]

RUN_RELEASES = ("1.13.1", "2.6.0")
CASES = list(plan_cases(RUN_RELEASES))
LAUNCHERS = ("CMAKE_C_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_CUDA_COMPILER_LAUNCHER")


def run_setup_helpers(case: PlanCase, sources, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """(the plan's JSON, the driver's record, the folder standing for C:) for one case."""
    plan = case.plan()
    setuptools_pin = next(spec for spec in plan["venv"]["specs"] if spec.startswith("setuptools=="))
    winroot = tmp_path / "winroot"
    make_winroot(winroot, case.facts(), plan)
    (tmp_path / "cwd").mkdir()
    request = {
        "tree": str(sources.tree(case.release)),
        "setuptools": str(sources.wheel(setuptools_pin)),
        "winroot": str(winroot),
        "cwd": str(tmp_path / "cwd"),
        "env": machine_env(case.facts(), plan),
        "version": case.release,
    }
    (tmp_path / "request.json").write_text(json.dumps(request), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-S", str(DRIVER), str(tmp_path / "request.json"), str(tmp_path / "result.json")],
        check=True,
        timeout=60,
    )
    return plan, json.loads((tmp_path / "result.json").read_text(encoding="utf-8")), winroot


def defines(argv: list[str]) -> dict[str, str]:
    found = {}
    for argument in argv:
        if argument.startswith("-D"):
            name, _, value = argument[2:].partition("=")
            found[name] = value
    return found


def upper_env(plan: dict[str, Any]) -> dict[str, str]:
    return {name.upper(): value for name, value in plan["env"].items()}


@pytest.fixture(scope="session")
def records() -> dict[str, Any]:
    return {}


def record_for(case: PlanCase, sources, records: dict[str, Any], tmp_path_factory) -> tuple:
    """(plan, record, winroot) of a case, run once a session whichever test asks first; PyTorch ran to the end."""
    if case.id not in records:
        records[case.id] = run_setup_helpers(case, sources, tmp_path_factory.mktemp("case"))
    plan, record, winroot = records[case.id]
    assert record["exit"] is None, f"PyTorch {case.release}'s build stopped ({record['exit']}):\n{record['printed']}"
    assert len(record["calls"]) == 2, record["calls"]  # configure, then --build
    return plan, record, winroot


@pytest.fixture(params=CASES, ids=[case.id for case in CASES])
def recorded(request, sources, records, tmp_path_factory):
    return (request.param, *record_for(request.param, sources, records, tmp_path_factory))


def test_the_tier_covers_releases_generators_and_caches():
    covered = {(case.release, case.generator, case.compiler_cache, case.cuda != "cpu") for case in CASES}
    for release in RUN_RELEASES:
        assert (release, "ninja", "none", True) in covered, "a CUDA plan with Ninja"
        assert (release, "vs", "none", True) in covered, "a CUDA plan with the Visual Studio generator"
        assert (release, "ninja", "sccache", True) in covered
    assert ("1.13.1", "ninja", "clcache", True) in covered


def test_generator_and_toolset(recorded):
    _, plan, record, _ = recorded
    configure = record["calls"][0]["argv"]
    env = upper_env(plan)
    assert configure[0] == "cmake"
    if plan["generator"] == "Ninja":
        assert record["use_ninja"] is True
        assert "-GNinja" in configure
        assert not [word for word in configure if word.startswith(("-A", "-T", "-GVisual"))]
        # build_pytorch_libs.py _create_build_env, Windows + Ninja only: the vcvars overlay (DISTUTILS_USE_SDK: this
        # environment), then CC/CXX default to cl, so CMake takes MSVC (or the plan's clcache) over any gcc on PATH.
        cmake_env = record["calls"][0]["env"]
        assert cmake_env["CC"] == env.get("CC", "cl") and cmake_env["CXX"] == env.get("CXX", "cl")
    else:
        # tools/setup_helpers/cmake.py: -G<CMAKE_GENERATOR> (checked against its list), -Ax64, and
        # -Tversion=<CMAKE_GENERATOR_TOOLSET_VERSION>,host=x64.
        assert record["use_ninja"] is False
        assert f"-G{plan['generator']}" in configure
        assert "-Ax64" in configure
        toolset = ".".join(plan["visual_studio"]["toolset"].split(".")[:2])
        assert env["CMAKE_GENERATOR_TOOLSET_VERSION"] == toolset
        assert [word for word in configure if word.startswith("-T")] == [f"-Tversion={toolset},host=x64"]


def test_every_planned_build_option_reaches_cmake(recorded):
    """cmake.py forwards every variable starting with BUILD_, USE_ or CMAKE_ as -D: the launchers, USE_CUDA,
    USE_NINJA, CMAKE_INCLUDE_PATH (MKL's headers) and the rest come out with the plan's values."""
    _, plan, record, _ = recorded
    passed = defines(record["calls"][0]["argv"])
    for name, value in upper_env(plan).items():
        if name.startswith(("BUILD_", "USE_", "CMAKE_")) and name != "CMAKE_PREFIX_PATH":
            assert passed.get(name) == value, (name, value, passed.get(name))
    if plan["compiler_cache"] == "sccache":
        launchers = [name for name in LAUNCHERS if name in upper_env(plan)]
        expected = LAUNCHERS if plan["cuda"] else LAUNCHERS[:2]
        assert set(expected) <= set(launchers)
        for name in launchers:
            assert passed[name] == upper_env(plan)[name]


CLCACHE_CASES = [case for case in CASES if case.compiler_cache == "clcache"]


@pytest.mark.parametrize("case", CLCACHE_CASES, ids=[case.id for case in CLCACHE_CASES])
def test_clcache_is_the_compiler_cmake_finds(case, sources, records, tmp_path_factory):
    """clcache goes in as CC/CXX: _create_build_env's setdefault("CC", "cl") keeps them for CMake to read."""
    plan, record, _ = record_for(case, sources, records, tmp_path_factory)
    env = record["calls"][0]["env"]
    assert env["CC"] == upper_env(plan)["CC"] == "clcache"
    assert env["CXX"] == upper_env(plan)["CXX"] == "clcache"


def test_cuda_cudnn_magma_and_arch_list(recorded):
    case, plan, record, winroot = recorded
    configure = record["calls"][0]
    passed, env = defines(configure["argv"]), configure["env"]
    planned = upper_env(plan)
    if not plan["cuda"]:
        assert passed["USE_CUDA"] == "0"
        return
    cuda = plan["cuda"]["path"]
    nvcc = ntpath.join(cuda, "bin", "nvcc.exe")
    assert passed["USE_CUDA"] == "1"
    assert env["CUDA_PATH"] == cuda
    # cmake/Modules_CUDA_fix/upstream/FindCUDA.cmake: nvcc from ENV CUDA_TOOLKIT_ROOT, CUDA_PATH, CUDA_BIN_PATH
    # (bin, bin64), in that order, before any default path; enable_language(CUDA) then takes that toolkit.
    found = next(
        (
            candidate
            for variable in ("CUDA_TOOLKIT_ROOT", "CUDA_PATH", "CUDA_BIN_PATH")
            if env.get(variable)
            for candidate in (
                ntpath.join(env[variable], "bin", "nvcc.exe"),
                ntpath.join(env[variable], "bin64", "nvcc.exe"),
            )
            if windows_to_local(winroot, candidate).is_file()
        ),
        None,
    )
    assert found == nvcc
    assert find_on_path(winroot, env, "nvcc") == nvcc
    if "CUDA_NVCC_EXECUTABLE" in planned:
        assert passed["CUDA_NVCC_EXECUTABLE"] == planned["CUDA_NVCC_EXECUTABLE"]
    # cuDNN: cmake.py passes CUDNN_LIB_DIR as -DCUDNN_LIBRARY and CUDNN_INCLUDE_DIR as itself;
    # FindCUDNN.cmake reads ENV CUDNN_ROOT_DIR.
    if "CUDNN_LIB_DIR" in planned:
        assert passed["CUDNN_LIBRARY"] == planned["CUDNN_LIB_DIR"]
    if "CUDNN_INCLUDE_DIR" in planned:
        assert passed["CUDNN_INCLUDE_DIR"] == planned["CUDNN_INCLUDE_DIR"]
        assert windows_to_local(winroot, ntpath.join(planned["CUDNN_INCLUDE_DIR"], "cudnn.h")).is_file()
    if "CUDNN_ROOT_DIR" in planned:
        assert env["CUDNN_ROOT_DIR"] == planned["CUDNN_ROOT_DIR"]
    # FindMAGMA.cmake: HINTS $ENV{MAGMA_HOME}.
    assert env["MAGMA_HOME"] == planned["MAGMA_HOME"]
    # TORCH_CUDA_ARCH_LIST: cmake/public/utils.cmake takes ENV{TORCH_CUDA_ARCH_LIST}; 2.x also passes it as -D.
    assert env["TORCH_CUDA_ARCH_LIST"] == planned["TORCH_CUDA_ARCH_LIST"]
    if case.release.startswith("2."):
        assert passed["TORCH_CUDA_ARCH_LIST"] == planned["TORCH_CUDA_ARCH_LIST"]


def test_mkl_reaches_cmake(recorded):
    """MKL: -DCMAKE_INCLUDE_PATH=<mkl>\\include (forwarded as a CMAKE_ variable) and <mkl>\\lib first on LIB,
    which find_library searches on Windows."""
    _, plan, record, _ = recorded
    configure = record["calls"][0]
    mkl = next(archive for archive in plan["archives"] if archive["name"] == "mkl")["folder"]
    assert defines(configure["argv"])["CMAKE_INCLUDE_PATH"].split(";")[0] == ntpath.join(mkl, "include")
    assert configure["env"]["LIB"].split(";")[0] == ntpath.join(mkl, "lib")


def test_build_jobs(recorded):
    """CMake.build: MAX_JOBS becomes `-j N` with Ninja and /p:CL_MPCount=N (cl /MP) with MSBuild."""
    _, plan, record, _ = recorded
    build = record["calls"][1]["argv"]
    jobs = upper_env(plan)["MAX_JOBS"]
    assert build[:7] == ["cmake", "--build", ".", "--target", "install", "--config", "Release"]
    if plan["generator"] == "Ninja":
        assert build[7:] == ["--", "-j", jobs]
    else:
        assert build[7:] == ["--", f"/p:CL_MPCount={jobs}"]


# --- Variables PyTorch's code never reads ------------------------------------------------------------------------

# Read by something other than the release's own code: the program named, or CMake / Windows themselves.
EXTERNAL_READERS = {
    "PATH": "Windows",
    "LIB": "link.exe and CMake's find_library on Windows",
    "INCLUDE": "cl.exe",
    "CC": "CMake (the C compiler)",
    "CXX": "CMake (the C++ compiler)",
    "VIRTUAL_ENV": "the venv",
    "CUDAHOSTCXX": "CMake's CUDA language",
    "CUDACXX": "CMake's CUDA language (CMakeDetermineCUDACompiler: the nvcc to use)",
}
EXTERNAL_PREFIXES = {"SCCACHE_": "sccache", "CLCACHE_": "clcache", "CMAKE_": "CMake"}


def reader_cases() -> list:
    cases = {}
    for case in CASES:
        for name in upper_env(case.plan()):
            if name in EXTERNAL_READERS or name.startswith(tuple(EXTERNAL_PREFIXES)):
                continue
            cases.setdefault((case.release, name), case)
    return [pytest.param(release, name, id=f"{release}/{name}") for release, name in sorted(cases)]


@pytest.mark.parametrize(("release", "name"), reader_cases())
def test_every_planned_variable_has_a_reader(release, name, sources):
    """Each variable a plan sets is read by the release's CMake files, tools/ and setup.py, or by the setuptools
    code the build runs (setuptools/msvc.py and _distutils/_msvccompiler.py: DISTUTILS_USE_SDK)."""
    tree = sources.tree(release)
    plan = next(case for case in CASES if case.release == release).plan()
    setuptools_pin = next(spec for spec in plan["venv"]["specs"] if spec.startswith("setuptools=="))
    setuptools = sources.wheel(setuptools_pin) / "setuptools"
    files = [
        *walk_files(tree, (".cmake", ".py")),
        setuptools / "msvc.py",
        setuptools / "_distutils" / "_msvccompiler.py",
    ]
    pattern = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", re.IGNORECASE)
    readers = [path for path in files if pattern.search(path.read_text(errors="replace"))]
    assert readers, f"nothing in PyTorch {release}'s build reads {name}"


def _cuda_bin_path_cases() -> list:
    """Ninja CUDA plans; those whose CUDA is not the first CUDA\\v*.* folder are the ones that tell."""
    return [
        pytest.param(case, id=case.id)
        for case in CASES
        if case.cuda != "cpu" and case.generator == "ninja" and case.compiler_cache == "none"
    ]


@pytest.mark.parametrize("case", _cuda_bin_path_cases())
def test_cuda_bin_path_names_the_plans_cuda(case, sources, records, tmp_path_factory):
    """CUDA_BIN_PATH, which PyTorch hands CMake, names the plan's CUDA (issue 28 point 5: with CUDA_HOME unset,
    tools/build_pytorch_libs.py _create_build_env sets it to the first CUDA\\v*.* folder, v11.6 for a CUDA 11.7
    plan). FindCUDA.cmake reads it after CUDA_PATH, so 1.13.1 and 2.6.0 found the plan's nvcc anyway."""
    plan, record, _ = record_for(case, sources, records, tmp_path_factory)
    assert record["calls"][0]["env"].get("CUDA_BIN_PATH", "").replace("/", "\\") == plan["cuda"]["path"]
