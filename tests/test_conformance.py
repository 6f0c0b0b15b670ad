"""Plans against the facts each era's real PyTorch build scripts state.

The expected values below are written from the upstream sources (tag + file of pytorch/pytorch,
and the seeds), not from the code's output: each row cites where its fact comes from, and every
plan for that era is checked against it. build_config/eras.toml records the same facts as data;
if the two disagree, this file is the reference to re-read the source against.

Where a tag's file was read: v0.x-v1.7 tags (git), v1.8.1 and v1.13.1 (the upstream release
tarballs Ubuntu and Debian ship as pytorch_1.8.1.orig.tar.gz and pytorch_1.13.1+dfsg.orig.tar.xz),
torch wheels from PyPI for the cmake/public files and headers they install (share/cmake/Caffe2,
include/c10), pytorch/builder's release branches, and pull-request threads where neither was
available (those rows say so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest
from support import HOSTS_DIR, plan_options

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.model import facts_from_dict
from pytorch_winbuild.facts.source_tree import SourceTree
from pytorch_winbuild.knowledge.choices import CmakeRequest, Generator
from pytorch_winbuild.knowledge.model import load_knowledge, version_tuple
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.request import PlanRequest

KNOWLEDGE = load_knowledge()
CACHE = "C:\\pwb\\cache"


@dataclass(frozen=True)
class Upstream:
    """What one PyTorch release's Windows build reads and needs, with the source of each fact.
    None: the fact was not established for this release (not asserted)."""

    version: str
    vs_generators: dict[str, str]  # product line → the CMAKE_GENERATOR that release accepts
    ninja_rule: str  # how its setup picks Ninja on Windows: see picks_ninja()
    toolset_variable: str | None
    launchers: tuple[str, ...]  # languages whose CMAKE_<LANG>_COMPILER_LAUNCHER reach the compiles
    install: list[str]
    min_cmake: str  # cmake_minimum_required of what it configures
    mkl: str | None
    magma_first: str | None
    nvtoolsext_with_cuda12: bool | None  # None: the release predates CUDA 12
    cudnn_reads: tuple[str, ...]  # cuDNN location variables it reads from the environment
    sources: tuple[str, ...]


UPSTREAM = [
    Upstream(
        "0.4.1",
        {"2015": "Visual Studio 14 2015 Win64", "2017": "Visual Studio 15 2017 Win64"},
        "as_given",
        None,
        (),
        ["setup.py", "install"],
        "3.5",
        "2018.2.185",
        "2.4.0",
        None,
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR"),
        (
            "v0.4.1 tools/build_pytorch_libs.bat (-G %CMAKE_GENERATOR%, PREBUILD_COMMAND; :build_caffe2 runs `cmake "
            "..`)",
            "v0.4.1 setup.py line 311 (CMAKE_GENERATOR=-GNinja only `if not IS_WINDOWS`)",
            "v0.4.1 CMakeLists.txt line 1: cmake_minimum_required(VERSION 3.5 FATAL_ERROR)",
            "v0.4.1 tools/setup_helpers/cudnn.py (os.getenv('CUDNN_LIB_DIR'), os.getenv('CUDNN_INCLUDE_DIR'))",
            "seeds 001/002 (mkl_2018.2.185, magma_2.4.0, generator names)",
        ),
    ),
    Upstream(
        "1.0.1",
        {"2017": "Visual Studio 15 2017 Win64"},
        "as_given",
        None,
        (),
        ["setup.py", "install"],
        "3.5",
        "2018.2.185",
        "2.4.0",
        None,
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR"),
        (
            "v1.0.1 tools/build_pytorch_libs.bat (-G %CMAKE_GENERATOR% as given); tools/setup_helpers/configure.py "
            "line 125 (-GNinja only `if not IS_WINDOWS`)",
            "v1.0.1 tools/setup_helpers/cudnn.py; cmake/public/cuda.cmake (ENV CUDNN_ROOT_DIR, ENV CUDNN_INCLUDE_DIR)",
            "v1.0.1 .jenkins/pytorch/win-build.sh (magma_2.4.0, mkl_2018.2.185; CUDNN_LIB_DIR=%CUDA_PATH%\\lib\\x64, "
            "CUDNN_ROOT_DIR=%CUDA_PATH%)",
        ),
    ),
    Upstream(
        "1.1.0",
        {"2017": "Visual Studio 15 2017 Win64"},
        "use_ninja",
        None,
        (),
        ["setup.py", "install"],
        "3.5",
        "2018.2.185",
        "2.5.0",
        None,
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR"),
        (
            "v1.1.0 tools/build_pytorch_libs.py (-GVisual Studio 15 2017 Win64 hard-coded; line 72: USE_NINJA = not "
            "check_negative_env_flag('USE_NINJA') and which('ninja'))",
            "v1.1.0 .jenkins/pytorch/win-build.sh (magma_2.5.0)",
        ),
    ),
    Upstream(
        "1.4.0",
        {"2017": "Visual Studio 15 2017", "2019": "Visual Studio 16 2019"},
        "use_ninja",
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX"),
        ["setup.py", "install"],
        "3.5",
        "2019.4.245",
        "2.5.0",
        None,
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR"),
        (
            "v1.4.0 tools/setup_helpers/cmake.py (supported generators, -Ax64, -Tversion=...,host=x64, CMAKE_* "
            "forwarded; CUDNN_LIB_DIR → CUDNN_LIBRARY)",
            "v1.4.0 caffe2/CMakeLists.txt line 644 (cuda_add_library: nvcc outside CMake's CUDA language)",
            "v1.4.0 .jenkins/pytorch/win-test-helpers/build_pytorch.bat (mkl_2019.4.245, magma_2.5.0_cuda101)",
        ),
    ),
    Upstream(
        "1.8.1",
        {"2017": "Visual Studio 15 2017", "2019": "Visual Studio 16 2019"},
        "use_ninja",
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX"),
        ["setup.py", "install"],
        "3.5",
        "2020.0.166",
        "2.5.4",
        None,
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR"),
        (
            "v1.8.1 tools/setup_helpers/cmake.py lines 28, 180; CMakeLists.txt cmake_minimum_required(VERSION 3.5)",
            "v1.8.1 caffe2/CMakeLists.txt line 784 (cuda_add_library(torch_cuda ...))",
            "v1.8.1 .jenkins/pytorch/win-test-helpers/installation-helpers/install_mkl.bat (mkl_2020.0.166.7z), "
            "install_magma.bat (magma_2.5.4)",
        ),
    ),
    Upstream(
        "1.10.2",
        {"2017": "Visual Studio 15 2017", "2019": "Visual Studio 16 2019"},
        "use_ninja",
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX"),
        ["setup.py", "install"],
        "3.10",
        None,
        None,
        None,
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR"),
        (
            "torch 1.10.2 wheel share/cmake/Caffe2/public/cuda.cmake (no enable_language(CUDA): FindCUDA compiles "
            "nvcc)",
            "PR #63660 'Update CMake minimum version to 3.10' (August 2021; torch-1.10.0a0 then needed 3.10, "
            "pytorch/glow PR #5798)",
            "generator list: v1.8.1 and v1.13.1 tools/setup_helpers/cmake.py both list 'Visual Studio 15 2017', "
            "'Visual Studio 16 2019'",
        ),
    ),
    Upstream(
        "1.13.1",
        {"2017": "Visual Studio 15 2017", "2019": "Visual Studio 16 2019"},
        "use_ninja",
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX", "CUDA"),
        ["setup.py", "install"],
        "3.13",
        "2020.2.254",
        "2.5.4",
        None,
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR"),
        (
            "v1.13.1 tools/setup_helpers/cmake.py lines 31, 146-147, 255; CMakeLists.txt line 1 "
            "cmake_minimum_required(VERSION 3.13 FATAL_ERROR)",
            "v1.13.1 cmake/public/cuda.cmake line 47 enable_language(CUDA); caffe2/CMakeLists.txt lines 919-931 "
            "add_library(torch_cuda ...)",
            "v1.13.1 .jenkins/pytorch/win-test-helpers/build_pytorch.bat line 118 "
            "(CMAKE_CUDA_COMPILER_LAUNCHER=...randomtemp.exe;...sccache.exe)",
            "v1.13.1 .jenkins/pytorch/win-test-helpers/installation-helpers/install_mkl.bat (mkl_2020.2.254), "
            "install_magma.bat (magma_2.5.4)",
        ),
    ),
    Upstream(
        "2.0.1",
        {"2019": "Visual Studio 16 2019"},
        "use_ninja",
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX", "CUDA"),
        ["setup.py", "install"],
        "3.18",
        "2020.2.254",
        "2.5.4",
        None,  # its Windows builds are CUDA 11.7/11.8
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR"),
        (
            "PR #98605 (April 2023, after 2.0.0): until it a VS CMAKE_GENERATOR needed USE_NINJA=0 and the list was "
            "1.13.1's (2017, 2019); VS 2017 is not a compiler of 2.0's CI or binaries (pytorch/builder release/2.0 "
            "windows/internal/check_deps.bat: VC_YEAR 2019 or 2022)",
            "torch 2.0.0 wheel share/cmake/Caffe2/public/cuda.cmake line 47 enable_language(CUDA)",
            "pytorch/builder PR #1178 (CMake 3.18 for C++17, October 2022); PR #95612 (master CMakeLists.txt line 1: "
            "3.18, February 2023)",
            "v2.0.1 cmake/public/cuda.cmake (nvToolsExt); pytorch/builder release/2.0 windows/build_pytorch.bat "
            "(mkl_2020.2.254)",
        ),
    ),
    Upstream(
        "2.4.1",
        {"2019": "Visual Studio 16 2019", "2022": "Visual Studio 17 2022"},
        "cmake_generator",
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX", "CUDA"),
        ["setup.py", "install"],
        "3.18",
        "2020.2.254",
        "2.5.4",
        True,
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR"),
        (
            'v2.4.1 tools/setup_helpers/cmake.py (`if "CMAKE_GENERATOR" in os.environ: USE_NINJA = ... == "ninja"`, '
            "PR #98605)",
            "v2.4.1 CMakeLists.txt (cmake_minimum_required 3.18)",
            "v2.4.1 cmake/public/cuda.cmake ('Failed to find nvToolsExt')",
        ),
    ),
    Upstream(
        "2.6.0",
        {"2019": "Visual Studio 16 2019", "2022": "Visual Studio 17 2022"},
        "cmake_generator",
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX", "CUDA"),
        ["-m", "pip", "install", "--no-build-isolation", "-v", "."],
        "3.18",
        "2020.2.254",
        "2.5.4",
        False,
        ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR"),
        (
            "main README.md 'Install PyTorch' (pip install --no-build-isolation -v -e .)",
            "v2.5.0 cmake/public/cuda.cmake (header-only NVTX3)",
            "CMakeLists.txt 3.18 until PR #154783 (3.27, still in review 2025-07-30)",
        ),
    ),
]


def picks_ninja(rule: str, env: dict[str, str], ninja_on_path: bool = True) -> bool:
    """Whether the release's setup builds with Ninja on Windows, as its own code decides.

    as_given: v0.4.1 setup.py / v1.0.1 configure.py pass CMAKE_GENERATOR to the .bat unchanged on
    Windows. use_ninja: v1.1.0 tools/build_pytorch_libs.py line 72, v1.2.0-v1.13.1
    tools/setup_helpers/cmake.py: `not check_negative_env_flag('USE_NINJA') and which('ninja')`
    (check_negative_env_flag: OFF/0/NO/FALSE/N, upper-cased). cmake_generator (2.1+, PR #98605):
    the same, then `if "CMAKE_GENERATOR" in os.environ: USE_NINJA = CMAKE_GENERATOR.lower() == "ninja"`.
    """
    if rule == "as_given":
        return env.get("CMAKE_GENERATOR") == "Ninja"
    use_ninja = env.get("USE_NINJA", "ON").upper() not in ("OFF", "0", "NO", "FALSE", "N") and ninja_on_path
    if rule == "cmake_generator" and "CMAKE_GENERATOR" in env:
        use_ninja = env["CMAKE_GENERATOR"].lower() == "ninja"
    return use_ninja


def applied(plan: Plan, environment: dict[str, str]) -> dict[str, str]:
    """The environment the build sees: `environment` with the plan's changes made to it."""
    env = dict(environment)
    for change in plan.changes:
        if change.action == "set":
            env[change.name] = change.value
        elif change.action == "unset":
            env.pop(change.name, None)
        else:
            env[change.name] = change.value + ";" + env.get(change.name, "")
    return env


def _host(
    cuda: list[dict] | None = None,
    python: str = "3.8.10",
    vs: tuple[str, ...] = ("2017", "2019", "2022"),
    nvtoolsext: bool = True,
) -> dict:
    """A Windows machine with the Visual Studio lines and CUDA a row needs, from the shipped files' real paths,
    and `python` installed as its only Python (so the plan builds with it, not with one fetched from NuGet)."""
    shipped = {
        "2015": json.loads((HOSTS_DIR / "vs2015-cuda80.json").read_text(encoding="utf-8"))["visual_studio"][0],
        "2017": json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))["visual_studio"][0],
        **{
            v["product_line"]: v
            for v in json.loads((HOSTS_DIR / "vs2019-vs2022-cuda12.json").read_text(encoding="utf-8"))["visual_studio"]
        },
    }
    data = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    # The tool runs on the file's own Python (3.12.10); the build Python is `python`, the one installed Python.
    folder = "Python" + "".join(python.split(".")[:2])
    data["pythons"] = [
        {
            **data["python"],
            "version": python,
            "executable": f"C:\\Program Files\\{folder}\\python.exe",
            "found_by": f"registry PythonCore\\{'.'.join(python.split('.')[:2])}",
        }
    ]
    data["visual_studio"] = [shipped[line] for line in vs]
    data["cuda"] = cuda or []
    data["nvtoolsext"] = "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt" if nvtoolsext else None
    data["tools"]["cmake"]["version"] = "3.31.6"
    return data


def _cuda(
    version: str, msc_range: list[int], nvtx: str, cudnn: str | None = "8.9.7", cudnn_include: str | None = ""
) -> dict:
    """A CUDA install; cuDNN copied into its folder unless `cudnn_include` names another one."""
    path = f"C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{version}"
    return {
        "version": version,
        "path": path,
        "msc_range": msc_range,
        "nvtx": nvtx,
        "cudnn": cudnn,
        "cudnn_include": (cudnn_include or f"{path}\\include") if cudnn else None,
    }


NVTOOLSEXT = "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"
CUDA_FOR = {  # a CUDA each release's Windows CI built with, with the header guard of that release
    "0.4.1": _cuda("9.0", [1600, 1912], NVTOOLSEXT),
    "1.0.1": _cuda("10.0", [1700, 1917], NVTOOLSEXT),
    "1.1.0": _cuda("10.0", [1700, 1917], NVTOOLSEXT),
    "1.4.0": _cuda("10.1", [1700, 1930], NVTOOLSEXT),
    "1.8.1": _cuda("11.1", [1910, 1930], NVTOOLSEXT),
    "1.10.2": _cuda("11.3", [1910, 1930], NVTOOLSEXT),
    "1.13.1": _cuda("11.7", [1910, 1940], NVTOOLSEXT),
    "2.0.1": _cuda("11.8", [1910, 1940], NVTOOLSEXT),
    "2.4.1": _cuda(
        "12.4", [1910, 1950], "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.4\\include\\nvtx3"
    ),
    "2.6.0": _cuda(
        "12.4", [1910, 1950], "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.4\\include\\nvtx3"
    ),
}


def _python(version: str) -> str:
    """A Python that the release's CI built with."""
    release = version_tuple(version)
    return "3.6.8" if release < (1, 11) else "3.8.10" if release < (2, 5) else "3.10.11"


def _facts(row: Upstream, cuda: dict | None = None, **host) -> dict:
    data = _host([cuda or CUDA_FOR[row.version]], python=_python(row.version), vs=tuple(row.vs_generators), **host)
    data["tools"]["clcache"] = {"path": "C:\\Python\\Scripts\\clcache.exe", "version": None}
    return data


def _plan(row: Upstream, generator: str = "ninja", cuda: dict | None = None, **host) -> Plan:
    data = _facts(row, cuda, **host)
    options = plan_options(
        cuda=data["cuda"][0]["version"], pytorch_version=row.version, generator=generator, cache_dir=CACHE
    )
    return make_plan(
        PlanRequest(options, locate_archive=lambda a: (f"{CACHE}\\deps\\{a.folder_name}", False)),
        facts_from_dict(data),
        KNOWLEDGE,
    )


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_visual_studio_generator_names_and_ninja_switched_off(row: Upstream):
    """The VS plan's CMAKE_GENERATOR is a name the release accepts, and the release's own rule
    (picks_ninja) then builds with it, even with ninja on PATH and a USE_NINJA=1 left behind."""
    for line, name in row.vs_generators.items():
        data = _host(python=_python(row.version), vs=(line,))
        options = plan_options(
            cuda="cpu", pytorch_version=row.version, generator="vs", compiler_cache="none", cache_dir=CACHE
        )
        plan = make_plan(PlanRequest(options), facts_from_dict(data), KNOWLEDGE)
        env = plan.final_env()
        assert env["CMAKE_GENERATOR"] == name, row.sources
        assert not picks_ninja(row.ninja_rule, applied(plan, {"USE_NINJA": "1"})), row.sources
        assert "CMAKE_GENERATOR_PLATFORM" not in env, "the name carries Win64, or the release passes -A x64 itself"
        if row.toolset_variable and line != "2015":
            assert env[row.toolset_variable] == plan.compiler.short
        else:
            assert "CMAKE_GENERATOR_TOOLSET_VERSION" not in env, "this release does not read it"


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_ninja_plans_build_with_ninja_even_with_use_ninja_0_left_behind(row: Upstream):
    plan = _plan(row)
    assert plan.generator == "Ninja"
    assert picks_ninja(row.ninja_rule, applied(plan, {"USE_NINJA": "0"})), row.sources


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_visual_studio_lines_without_an_accepted_generator_are_refused(row: Upstream):
    """2.0's setup.py names no 'Visual Studio 17 2022' (PR #98605 added it for 2.1): a VS-generator
    plan with VS 2022 is refused with the fix, not handed to a setup.py that would sys.exit."""
    era = make_plan(
        PlanRequest(plan_options(cuda="cpu", pytorch_version=row.version, cache_dir=CACHE)),
        facts_from_dict(_host(python=_python(row.version), vs=tuple(row.vs_generators))),
        KNOWLEDGE,
    ).era
    for line in (line for line in era.visual_studio if line not in row.vs_generators):
        data = _host(python=_python(row.version), vs=(line,))
        options = plan_options(cuda="cpu", pytorch_version=row.version, generator="vs", cache_dir=CACHE)
        with pytest.raises(ConfigurationError) as error:
            make_plan(PlanRequest(options), facts_from_dict(data), KNOWLEDGE)
        assert "--generator ninja" in error.value.paragraph()


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_install_command_and_archives(row: Upstream):
    plan = _plan(row)
    assert list(plan.build_arguments) == row.install, row.sources
    # The release builds with a Python its CI built with, installed here: not one fetched instead.
    assert plan.build_python.version == _python(row.version) and plan.build_python.fetch_minor is None
    archives = {a.name: a.version for a in plan.archives}
    if row.mkl:
        assert archives["mkl"] == row.mkl, row.sources
    if row.magma_first:
        assert archives["magma"] == row.magma_first, row.sources


def _older(version: str) -> str:
    """A CMake release just below `version` (3.13 → 3.12.9)."""
    major, minor = version_tuple(version)[:2]
    return f"{major}.{minor - 1}.9"


def _installed_cmake(version: str) -> CmakeRequest:
    """--cmake PATH as the edge hands it over: an installed cmake with the version it answered."""
    return CmakeRequest("path", "C:\\Program Files\\CMake\\bin\\cmake.exe", version=version)


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_cmake_older_than_the_release_requires_is_refused(row: Upstream):
    """--cmake names an installed CMake: exactly the release's cmake_minimum_required plans, and runs first on
    PATH; one release older is refused (exit 2) with the bound and where it was read."""
    data = _facts(row)
    options = plan_options(cuda=data["cuda"][0]["version"], pytorch_version=row.version, cache_dir=CACHE)
    plan = make_plan(
        PlanRequest(replace(options, cmake=_installed_cmake(row.min_cmake))), facts_from_dict(data), KNOWLEDGE
    )
    assert plan.cmake is not None and plan.cmake.version == row.min_cmake, row.sources
    assert plan.final_env()["PATH"].startswith("C:\\Program Files\\CMake\\bin;"), row.sources
    assert not any(spec.startswith("cmake==") for spec in plan.venv.specs), row.sources  # type: ignore[union-attr]
    with pytest.raises(ConfigurationError) as error:
        make_plan(
            PlanRequest(replace(options, cmake=_installed_cmake(_older(row.min_cmake)))),
            facts_from_dict(data),
            KNOWLEDGE,
        )
    text = error.value.paragraph()
    assert f"cmake_minimum_required(VERSION {row.min_cmake})" in text and error.value.exit_code == 2, row.sources


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_the_plan_runs_a_cmake_from_pypi_inside_the_release_bounds(row: Upstream):
    """Without --cmake, the build venv carries a cmake==X from PyPI: at least the release's
    cmake_minimum_required, and below 4.0 for the releases before 2.7, whose trees declare policies older than
    3.5 (pytorch/pytorch#150149, fixed for 2.7 by #150460), so no policy minimum is needed; the machine's own
    CMake (the facts file's) is named as not used, and the venv's scripts folder is first on PATH."""
    plan = _plan(row)
    assert plan.cmake is not None and plan.venv is not None, row.sources
    assert f"cmake=={plan.cmake.version}" in plan.venv.specs
    assert version_tuple(plan.cmake.version) >= version_tuple(row.min_cmake), row.sources
    if version_tuple(row.version) < (2, 7):
        assert version_tuple(plan.cmake.version) < (4, 0), row.sources
    assert "CMAKE_POLICY_VERSION_MINIMUM" not in plan.final_env()
    scripts = plan.venv.python.rsplit("\\", 1)[0]
    assert plan.cmake.executable == scripts + "\\cmake.exe" and plan.final_env()["PATH"].startswith(scripts + ";")
    assert any("The machine's own cmake" in d for d in plan.decisions)


@pytest.mark.parametrize("row", [r for r in UPSTREAM if version_tuple(r.version) < (2, 7)], ids=lambda r: r.version)
def test_cmake_4_for_an_old_release_gets_the_policy_minimum_and_a_warning(row: Upstream):
    """An installed CMake 4 for a release whose tree declares policies older than 3.5: the plan sets
    CMAKE_POLICY_VERSION_MINIMUM=3.5 (CMake 4.0+ reads it from the environment) and says so in a warning; a
    Visual Studio generator named with ' Win64' (before 1.2) is refused outright, CMake 4.0 removed that form."""
    data = _facts(row)
    options = plan_options(cuda=data["cuda"][0]["version"], pytorch_version=row.version, cache_dir=CACHE)
    plan = make_plan(PlanRequest(replace(options, cmake=_installed_cmake("4.4.5"))), facts_from_dict(data), KNOWLEDGE)
    assert plan.final_env()["CMAKE_POLICY_VERSION_MINIMUM"] == "3.5", row.sources
    assert any("CMAKE_POLICY_VERSION_MINIMUM=3.5" in w and "--clean" in w for w in plan.warnings)
    if any(name.endswith(" Win64") for name in row.vs_generators.values()):
        vs = replace(options, cmake=_installed_cmake("4.4.5"), generator=Generator.VS)
        with pytest.raises(ConfigurationError, match="no longer support"):
            make_plan(PlanRequest(vs), facts_from_dict(data), KNOWLEDGE)


# The first CMake that knows each generator name (cmake-generators(7), "new in version"), and the toolset's
# version= field (CMake 3.12 release notes): a Visual Studio plan needs both.
GENERATOR_SINCE = {"Visual Studio 15 2017": "3.7.1", "Visual Studio 16 2019": "3.14", "Visual Studio 17 2022": "3.21"}
TOOLSET_VERSION_SINCE = "3.12"


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_a_visual_studio_plan_needs_a_cmake_that_knows_its_generator_and_toolset_field(row: Upstream):
    for line, name in row.vs_generators.items():
        base = name.removesuffix(" Win64")
        if base not in GENERATOR_SINCE:
            continue
        floor = max(
            [GENERATOR_SINCE[base], row.min_cmake, *([TOOLSET_VERSION_SINCE] if row.toolset_variable else [])],
            key=version_tuple,
        )
        data = _host(python=_python(row.version), vs=(line,))
        options = plan_options(cuda="cpu", pytorch_version=row.version, generator="vs", cache_dir=CACHE)
        plan = make_plan(PlanRequest(replace(options, cmake=_installed_cmake(floor))), facts_from_dict(data), KNOWLEDGE)
        assert plan.cmake is not None and plan.cmake.version == floor, row.sources
        with pytest.raises(ConfigurationError) as error:
            make_plan(
                PlanRequest(replace(options, cmake=_installed_cmake(_older(floor)))), facts_from_dict(data), KNOWLEDGE
            )
        assert f"CMake >= {floor}" in error.value.paragraph(), (row.version, line)


def test_an_installed_cmake_keeps_the_trees_cmake_package_out_of_the_venv():
    """main's pyproject.toml [build-system] requires cmake>=3.27 (pytorch/pytorch at 0034f545bb95), and pip without
    build isolation installs a tree's requires into the build venv: with --cmake PATH the plan leaves that cmake
    out, so the build venv has no CMake of its own for the tree's backend to prefer to PATH's."""
    requires = ("setuptools>=77.0.0,<82", "cmake>=3.27", "ninja")
    data = _host(python="3.12.10", vs=("2022",))
    options = plan_options(cuda="cpu", pytorch_version="main", cache_dir=CACHE)
    plan = make_plan(PlanRequest(options, tree=SourceTree(requires=requires)), facts_from_dict(data), KNOWLEDGE)
    assert plan.cmake is not None and {f"cmake=={plan.cmake.version}", "cmake>=3.27"} <= set(plan.venv.specs)  # type: ignore[union-attr]
    installed = make_plan(
        PlanRequest(replace(options, cmake=_installed_cmake("3.31.6")), tree=SourceTree(requires=requires)),
        facts_from_dict(data),
        KNOWLEDGE,
    )
    assert not [spec for spec in installed.venv.specs if spec.startswith("cmake")]  # type: ignore[union-attr]
    assert installed.venv.tree_requires == ("setuptools>=77.0.0,<82", "ninja")  # type: ignore[union-attr]


def test_main_needs_cmake_327():
    """PR #154783 raised CMakeLists.txt to 3.27 on main (ROCm/TheRock PR #1512: nightlies need it);
    2.8 was branched before it and asks 3.18."""
    data = _host(python="3.11.9", vs=("2022",))
    older = _installed_cmake("3.26.6")
    make_plan(
        PlanRequest(replace(plan_options(cuda="cpu", pytorch_version="2.8.0", cache_dir=CACHE), cmake=older)),
        facts_from_dict(data),
        KNOWLEDGE,
    )
    with pytest.raises(ConfigurationError, match=r"cmake_minimum_required\(VERSION 3\.27\)"):
        make_plan(
            PlanRequest(replace(plan_options(cuda="cpu", pytorch_version="main", cache_dir=CACHE), cmake=older)),
            facts_from_dict(data),
            KNOWLEDGE,
        )


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_compiler_launchers_reach_the_build_only_where_the_compiles_use_them(row: Upstream):
    data = _facts(row)
    data["tools"]["sccache"] = {"path": "C:\\sccache.exe", "version": "0.10.0"}
    data["tools"]["clcache"] = {"path": "C:\\clcache.exe", "version": None}
    if not row.launchers:
        # No launcher reaches CMake before 1.2: the cache must replace the compiler (CC=CXX=clcache).
        plan = make_plan(
            PlanRequest(
                plan_options(cuda=CUDA_FOR[row.version]["version"], pytorch_version=row.version, cache_dir=CACHE)
            ),
            facts_from_dict(data),
            KNOWLEDGE,
        )
        env = plan.final_env()
        assert plan.compiler_cache == "clcache" and env["CC"] == env["CXX"] == "clcache", row.sources
        assert not any(name.endswith("_COMPILER_LAUNCHER") for name in env), row.sources
        return
    plan = make_plan(
        PlanRequest(
            plan_options(
                cuda=CUDA_FOR[row.version]["version"],
                pytorch_version=row.version,
                compiler_cache="sccache",
                cache_dir=CACHE,
            )
        ),
        facts_from_dict(data),
        KNOWLEDGE,
    )
    env = plan.final_env()
    set_launchers = tuple(lang for lang in ("C", "CXX", "CUDA") if f"CMAKE_{lang}_COMPILER_LAUNCHER" in env)
    assert set_launchers == row.launchers, row.sources
    if "CUDA" in row.launchers:
        assert env["CMAKE_CUDA_COMPILER_LAUNCHER"] == "sccache"
    else:
        decision = next(d for d in plan.decisions if "nvcc compiles are not cached" in d)
        assert "cuda_add_library" in decision and "1.11" in decision


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_cudnn_in_the_cuda_folder_is_named_as_pytorch_ci_named_it(row: Upstream):
    """PyTorch's CI (v1.0.1 .jenkins/pytorch/win-build.sh lines 113-115, v1.13.1 .jenkins/pytorch/
    win-test-helpers/build_pytorch.bat lines 71-73) copied cuDNN into the toolkit and set
    CUDNN_LIB_DIR=%CUDA_PATH%\\lib\\x64 and CUDNN_ROOT_DIR=%CUDA_PATH%; the plan sets those the
    release reads (and CUDNN_INCLUDE_DIR), and no CUDA_TOOLKIT_ROOT_DIR, which no release reads
    from the environment (FindCUDA reads ENV CUDA_PATH; setup.py passes on only BUILD_/USE_/CMAKE_
    variables and a fixed list without it)."""
    cuda = CUDA_FOR[row.version]
    env = _plan(row).final_env()
    expected = {
        "CUDNN_INCLUDE_DIR": f"{cuda['path']}\\include",
        "CUDNN_LIB_DIR": f"{cuda['path']}\\lib\\x64",
        "CUDNN_ROOT_DIR": cuda["path"],
    }
    for name, value in expected.items():
        assert env.get(name) == (value if name in row.cudnn_reads else None), (name, row.sources)
    assert env["CUDA_PATH"] == cuda["path"] and "CUDA_TOOLKIT_ROOT_DIR" not in env
    assert "USE_CUDNN" not in env


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_cudnn_outside_the_cuda_folder(row: Upstream):
    """cuDNN from NVIDIA's zip elsewhere: headers from CUDNN_INCLUDE_DIR; cudnn.lib is searched
    beside it (v0.4.1-v1.2.0 tools/setup_helpers/cudnn.py: lib_paths_from_base(dirname(include)),
    lib/x64 and lib) or under CUDNN_ROOT_DIR (v1.3.0+ cmake/Modules_CUDA_fix/FindCUDNN.cmake,
    PATH_SUFFIXES lib lib64 cuda/lib cuda/lib64 lib/x64), never in a stale CUDNN_LIB_DIR."""
    cuda = dict(CUDA_FOR[row.version], cudnn_include="C:\\tools\\cudnn-8.9\\include")
    plan = _plan(row, cuda=cuda)
    env = applied(plan, {"CUDNN_LIB_DIR": "C:\\old\\cudnn\\lib\\x64"})
    assert env["CUDNN_INCLUDE_DIR"] == "C:\\tools\\cudnn-8.9\\include"
    assert "CUDNN_LIB_DIR" not in env
    if "CUDNN_ROOT_DIR" in row.cudnn_reads:
        assert env["CUDNN_ROOT_DIR"] == "C:\\tools\\cudnn-8.9"


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_no_cudnn_is_switched_off_explicitly(row: Upstream):
    """Every release reads USE_CUDNN (v0.4.1-v1.2.0 tools/setup_helpers/cudnn.py
    check_negative_env_flag('USE_CUDNN'); v1.2.0+ tools/setup_helpers/cmake.py passes USE_* to
    CMake's USE_CUDNN option) and, without cuDNN, builds without it (cmake/public/cuda.cmake:
    'Cannot find cuDNN library. Turning the option off')."""
    cuda = dict(CUDA_FOR[row.version], cudnn=None, cudnn_include=None)
    plan = _plan(row, cuda=cuda)
    env = plan.final_env()
    assert env["USE_CUDNN"] == "0" and not any(name.startswith("CUDNN_") for name in env)
    assert any("cuDNN is off" in w for w in plan.warnings)


@pytest.mark.parametrize("row", [r for r in UPSTREAM if r.nvtoolsext_with_cuda12 is not None], ids=lambda r: r.version)
def test_nvtoolsext_with_cuda12(row: Upstream):
    cuda12 = _cuda("12.4", [1910, 1950], "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.4\\include\\nvtx3")
    data = _host([cuda12], python="3.10.11", vs=("2019", "2022"), nvtoolsext=False)
    options = plan_options(cuda="12.4", pytorch_version=row.version, cache_dir=CACHE)
    if row.nvtoolsext_with_cuda12:
        with pytest.raises(ToolchainError) as error:
            make_plan(PlanRequest(options), facts_from_dict(data), KNOWLEDGE)
        assert "Failed to find nvToolsExt" in error.value.paragraph()
        assert "--pytorch-version 2.8.0" in (error.value.fix or "")  # 2.5 moved to header-only NVTX3
        assert make_plan(
            PlanRequest(plan_options(cuda="12.4", pytorch_version="2.8.0", cache_dir=CACHE)),
            facts_from_dict(data),
            KNOWLEDGE,
        )
        with_lib = make_plan(
            PlanRequest(options),
            facts_from_dict({**data, "nvtoolsext": "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"}),
            KNOWLEDGE,
        )
        assert with_lib.final_env()["NVTOOLSEXT_PATH"] == "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"
    else:
        assert "NVTOOLSEXT_PATH" not in make_plan(PlanRequest(options), facts_from_dict(data), KNOWLEDGE).final_env()


def test_distributed_needs_libuv_from_17_and_is_off_before():
    old = _plan(UPSTREAM[3]).final_env()  # 1.4: torch.distributed is not built on Windows
    assert old["USE_DISTRIBUTED"] == "0"
    new = _plan(UPSTREAM[4])  # 1.8: built only when CMake finds libuv (libuv_ROOT)
    assert "USE_DISTRIBUTED" not in new.final_env()
    assert any("libuv" in w and "libuv_ROOT" in w for w in new.warnings)


def test_prebuild_command_only_where_the_bat_honours_it():
    """v0.4.1 and v1.0.1's tools/build_pytorch_libs.bat call %PREBUILD_COMMAND% (1.0.1: lines 164, 210);
    1.1 has no .bat."""
    by_name = {era.name: era for era in KNOWLEDGE.eras}
    assert by_name["0.3-0.4"].prebuild_command and by_name["1.0"].prebuild_command
    assert not any(era.prebuild_command for era in KNOWLEDGE.eras if era.first >= (1, 1, 0))


def test_cuda8_under_ninja_enters_vs2015_with_the_041_readme_arguments():
    """v0.4.1 README.md: set PREBUILD_COMMAND=%VS140COMNTOOLS%\\..\\..\\VC\\vcvarsall.bat and
    PREBUILD_COMMAND_ARGS=x64."""
    from pytorch_winbuild.facts.model import load_facts

    plan = make_plan(
        PlanRequest(plan_options(cuda="8.0", pytorch_version="0.4.1", cache_dir=CACHE)),
        load_facts(HOSTS_DIR / "vs2015-vs2017-cuda80-cuda90.json"),
        KNOWLEDGE,
    )
    env = plan.final_env()
    assert (
        env["PREBUILD_COMMAND"].endswith("Microsoft Visual Studio 14.0\\VC\\vcvarsall.bat")
        and env["PREBUILD_COMMAND_ARGS"] == "x64"
    )


def test_no_manual_cwrap_copy_for_04():
    """v0.4.0 setup.py copies aten/src/ATen/common_with_cwrap.py to tools/shared/cwrap_common.py itself."""
    plan = _plan(UPSTREAM[0])
    assert not any("cwrap_common.py" in command.command for command in plan.commands)


def test_libtorch_plans_run_build_libtorch():
    plan = make_plan(
        PlanRequest(plan_options(cuda="cpu", pytorch_version="2.6", libtorch=True, cache_dir=CACHE)),
        facts_from_dict(_host(python="3.11.9", vs=("2022",))),
        KNOWLEDGE,
    )
    assert plan.build_arguments == ("tools/build_libtorch.py",)
    # Run by the build venv's interpreter: 2.6 is era 2.5-2.8, which builds with the installed 3.11.9.
    assert (
        plan.build_python.version == "3.11.9"
        and plan.build_python.executable == "C:\\Program Files\\Python311\\python.exe"
    )
    venv = f"{CACHE}\\venvs\\2.5-2.8-py3.11-{plan.venv.key}"
    assert plan.commands[-1].command == f"{venv}\\Scripts\\python.exe tools/build_libtorch.py"


def test_every_era_records_its_sources():
    for era in KNOWLEDGE.eras:
        assert era.sources and all(" " in source for source in era.sources), era.name
