"""Plans against the facts each era's real PyTorch build scripts state.

The expected values below are written from the upstream sources (tag + file of pytorch/pytorch,
and the seeds), not from the code's output: each row cites where its fact comes from, and every
plan for that era is checked against it. build_config/eras.toml records the same facts as data;
if the two disagree, this file is the reference to re-read the source against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from support import HOSTS_DIR

from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.facts.model import facts_from_dict
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import Options, Plan, make_plan

KNOWLEDGE = load_knowledge()
CACHE = "C:\\pwb\\cache"


@dataclass(frozen=True)
class Upstream:
    """What one PyTorch release's Windows build reads and needs, with the source of each fact."""

    version: str
    vs_generators: dict[str, str]  # product line → the CMAKE_GENERATOR that release accepts
    use_ninja_off: bool  # it picks Ninja when ninja is installed unless USE_NINJA=0
    toolset_variable: str | None
    launchers: tuple[str, ...]  # CMAKE_<LANG>_COMPILER_LAUNCHER passed to CMake
    install: list[str]
    min_cmake: str
    mkl: str
    magma_first: str
    nvtoolsext_with_cuda12: bool | None  # None: the release predates CUDA 12
    sources: tuple[str, ...]


UPSTREAM = [
    Upstream(
        "0.4.1",
        {"2015": "Visual Studio 14 2015 Win64", "2017": "Visual Studio 15 2017 Win64"},
        False,
        None,
        (),
        ["setup.py", "install"],
        "3.0",
        "2018.2.185",
        "2.4.0",
        None,
        (
            "v0.4.1 tools/build_pytorch_libs.bat (-G %CMAKE_GENERATOR%, PREBUILD_COMMAND)",
            "seeds 001/002 (mkl_2018.2.185, magma_2.4.0, generator names)",
        ),
    ),
    Upstream(
        "1.0.1",
        {"2017": "Visual Studio 15 2017 Win64"},
        False,
        None,
        (),
        ["setup.py", "install"],
        "3.5",
        "2018.2.185",
        "2.4.0",
        None,
        (
            "v1.0.1 tools/build_pytorch_libs.bat (-G %CMAKE_GENERATOR% as given; no Ninja auto-pick on Windows)",
            "v1.0.1 .jenkins/pytorch/win-build.sh (magma_2.4.0, mkl_2018.2.185)",
        ),
    ),
    Upstream(
        "1.1.0",
        {"2017": "Visual Studio 15 2017 Win64"},
        True,
        None,
        (),
        ["setup.py", "install"],
        "3.5",
        "2018.2.185",
        "2.5.0",
        None,
        (
            "v1.1.0 tools/build_pytorch_libs.py (-GVisual Studio 15 2017 Win64 hard-coded)",
            "v1.1.0 .jenkins/pytorch/win-build.sh (magma_2.5.0)",
        ),
    ),
    Upstream(
        "1.4.0",
        {"2017": "Visual Studio 15 2017", "2019": "Visual Studio 16 2019"},
        True,
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX"),
        ["setup.py", "install"],
        "3.5",
        "2019.4.245",
        "2.5.0",
        None,
        (
            "v1.4.0 tools/setup_helpers/cmake.py (supported generators, -Ax64, -Tversion=...,host=x64, CMAKE_* forwarded)",
            "v1.4.0 .jenkins/pytorch/win-test-helpers/build_pytorch.bat (mkl_2019.4.245, magma_2.5.0_cuda101)",
        ),
    ),
    Upstream(
        "1.8.1",
        {"2017": "Visual Studio 15 2017", "2019": "Visual Studio 16 2019"},
        True,
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX"),
        ["setup.py", "install"],
        "3.5",
        "2020.0.166",
        "2.5.4",
        None,
        (
            "v1.8.1 tools/setup_helpers/cmake.py; CMakeLists.txt cmake_minimum_required(VERSION 3.5)",
            "v1.8.1 .jenkins/pytorch/win-test-helpers/installation-helpers/install_mkl.bat, install_magma.bat",
        ),
    ),
    Upstream(
        "2.0.1",
        {"2019": "Visual Studio 16 2019", "2022": "Visual Studio 17 2022"},
        True,
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX", "CUDA"),
        ["setup.py", "install"],
        "3.18",
        "2020.2.254",
        "2.5.4",
        True,
        ("v2.0.1 tools/setup_helpers/cmake.py", "v2.0.1 cmake/public/cuda.cmake (nvToolsExt)"),
    ),
    Upstream(
        "2.4.1",
        {"2019": "Visual Studio 16 2019", "2022": "Visual Studio 17 2022"},
        True,
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX", "CUDA"),
        ["setup.py", "install"],
        "3.18",
        "2020.2.254",
        "2.5.4",
        True,
        (
            "v2.4.1 CMakeLists.txt (cmake_minimum_required 3.18)",
            "v2.4.1 cmake/public/cuda.cmake ('Failed to find nvToolsExt')",
        ),
    ),
    Upstream(
        "2.6.0",
        {"2019": "Visual Studio 16 2019", "2022": "Visual Studio 17 2022"},
        True,
        "CMAKE_GENERATOR_TOOLSET_VERSION",
        ("C", "CXX", "CUDA"),
        ["-m", "pip", "install", "--no-build-isolation", "-v", "."],
        "3.27",
        "2020.2.254",
        "2.5.4",
        False,
        (
            "main README.md 'Install PyTorch' (pip install --no-build-isolation -v -e .)",
            "v2.5.0 cmake/public/cuda.cmake (header-only NVTX3)",
        ),
    ),
]


def _host(
    cuda: list[dict] | None = None,
    python: str = "3.8.10",
    vs: tuple[str, ...] = ("2017", "2019", "2022"),
    nvtoolsext: bool = True,
) -> dict:
    """A Windows machine with the Visual Studio lines and CUDA a row needs, from the shipped files' real paths."""
    shipped = {
        "2015": json.loads((HOSTS_DIR / "vs2015-cuda80.json").read_text(encoding="utf-8"))["visual_studio"][0],
        "2017": json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))["visual_studio"][0],
        **{
            v["product_line"]: v
            for v in json.loads((HOSTS_DIR / "vs2019-vs2022-cuda12.json").read_text(encoding="utf-8"))["visual_studio"]
        },
    }
    data = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    data["python"]["version"] = python
    data["visual_studio"] = [shipped[line] for line in vs]
    data["cuda"] = cuda or []
    data["nvtoolsext"] = "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt" if nvtoolsext else None
    data["tools"]["cmake"]["version"] = "3.31.6"
    return data


def _cuda(version: str, msc_range: list[int], nvtx: str) -> dict:
    return {
        "version": version,
        "path": f"C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{version}",
        "msc_range": msc_range,
        "nvtx": nvtx,
    }


CUDA_FOR = {  # a CUDA each release's Windows CI built with, with the header guard of that release
    "0.4.1": _cuda("9.0", [1600, 1912], "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"),
    "1.0.1": _cuda("10.0", [1700, 1917], "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"),
    "1.1.0": _cuda("10.0", [1700, 1917], "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"),
    "1.4.0": _cuda("10.1", [1700, 1930], "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"),
    "1.8.1": _cuda("11.1", [1910, 1930], "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"),
    "2.0.1": _cuda("11.8", [1910, 1940], "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"),
    "2.4.1": _cuda(
        "12.4", [1910, 1950], "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.4\\include\\nvtx3"
    ),
    "2.6.0": _cuda(
        "12.4", [1910, 1950], "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.4\\include\\nvtx3"
    ),
}


def _python(version: str) -> str:
    """A Python that the release's CI built with."""
    return "3.6.8" if version < "1.7" else "3.8.10" if version < "2.5" else "3.10.11"


def _plan(row: Upstream, generator: str = "ninja", **host) -> Plan:
    python = _python(row.version)
    vs = tuple(row.vs_generators)
    data = _host([CUDA_FOR[row.version]], python=python, vs=vs, **host)
    data["tools"]["clcache"] = {"path": "C:\\Python\\Scripts\\clcache.exe", "version": None}
    options = Options(
        cuda=CUDA_FOR[row.version]["version"], pytorch_version=row.version, generator=generator, cache_dir=CACHE
    )
    return make_plan(
        options, facts_from_dict(data), KNOWLEDGE, locate_archive=lambda a: (f"{CACHE}\\deps\\{a.folder_name}", False)
    )


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_visual_studio_generator_names_and_use_ninja(row: Upstream):
    for line, name in row.vs_generators.items():
        data = _host(python=_python(row.version), vs=(line,))
        options = Options(
            cuda="cpu", pytorch_version=row.version, generator="vs", compiler_cache="none", cache_dir=CACHE
        )
        plan = make_plan(options, facts_from_dict(data), KNOWLEDGE)
        env = plan.final_env()
        assert env["CMAKE_GENERATOR"] == name, row.sources
        assert (env.get("USE_NINJA") == "0") == row.use_ninja_off, row.sources
        assert "CMAKE_GENERATOR_PLATFORM" not in env, "the name carries Win64, or the release passes -A x64 itself"
        if row.toolset_variable and line != "2015":
            assert env[row.toolset_variable] == plan.compiler.short
        else:
            assert "CMAKE_GENERATOR_TOOLSET_VERSION" not in env, "this release does not read it"


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_install_command_cmake_and_archives(row: Upstream):
    plan = _plan(row)
    assert list(plan.build_arguments) == row.install, row.sources
    assert plan.era.min_cmake == row.min_cmake, row.sources
    archives = {a.name: a.version for a in plan.archives}
    assert archives["mkl"] == row.mkl, row.sources
    assert archives["magma"] == row.magma_first, row.sources


@pytest.mark.parametrize("row", UPSTREAM, ids=lambda r: r.version)
def test_compiler_launchers_reach_the_build_only_where_passed_through(row: Upstream):
    data = _host([CUDA_FOR[row.version]], python=_python(row.version), vs=tuple(row.vs_generators))
    data["tools"]["sccache"] = {"path": "C:\\sccache.exe", "version": "0.10.0"}
    data["tools"]["clcache"] = {"path": "C:\\clcache.exe", "version": None}
    if not row.launchers:
        # No launcher reaches CMake before 1.2: the cache must replace the compiler (CC=CXX=clcache).
        plan = make_plan(
            Options(cuda=CUDA_FOR[row.version]["version"], pytorch_version=row.version, cache_dir=CACHE),
            facts_from_dict(data),
            KNOWLEDGE,
        )
        env = plan.final_env()
        assert plan.compiler_cache == "clcache" and env["CC"] == env["CXX"] == "clcache", row.sources
        assert not any(name.endswith("_COMPILER_LAUNCHER") for name in env), row.sources
        return
    plan = make_plan(
        Options(
            cuda=CUDA_FOR[row.version]["version"],
            pytorch_version=row.version,
            compiler_cache="sccache",
            cache_dir=CACHE,
        ),
        facts_from_dict(data),
        KNOWLEDGE,
    )
    env = plan.final_env()
    set_launchers = tuple(lang for lang in ("C", "CXX", "CUDA") if f"CMAKE_{lang}_COMPILER_LAUNCHER" in env)
    assert set_launchers == row.launchers, row.sources
    if "CUDA" not in row.launchers:
        assert any("nvcc compiles are not cached" in d for d in plan.decisions)


@pytest.mark.parametrize("row", [r for r in UPSTREAM if r.nvtoolsext_with_cuda12 is not None], ids=lambda r: r.version)
def test_nvtoolsext_with_cuda12(row: Upstream):
    cuda12 = _cuda("12.4", [1910, 1950], "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.4\\include\\nvtx3")
    data = _host([cuda12], python="3.10.11", vs=("2019", "2022"), nvtoolsext=False)
    options = Options(cuda="12.4", pytorch_version=row.version, cache_dir=CACHE)
    if row.nvtoolsext_with_cuda12:
        with pytest.raises(ToolchainError) as error:
            make_plan(options, facts_from_dict(data), KNOWLEDGE)
        assert (
            "Failed to find nvToolsExt" in error.value.paragraph()
            and "build PyTorch 2.5 or later" in error.value.paragraph()
        )
        with_lib = make_plan(
            options,
            facts_from_dict({**data, "nvtoolsext": "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"}),
            KNOWLEDGE,
        )
        assert with_lib.final_env()["NVTOOLSEXT_PATH"] == "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"
    else:
        assert "NVTOOLSEXT_PATH" not in make_plan(options, facts_from_dict(data), KNOWLEDGE).final_env()


def test_distributed_needs_libuv_from_17_and_is_off_before():
    old = _plan(UPSTREAM[3]).final_env()  # 1.4: torch.distributed is not built on Windows
    assert old["USE_DISTRIBUTED"] == "0"
    new = _plan(UPSTREAM[4])  # 1.8: built only when CMake finds libuv (libuv_ROOT)
    assert "USE_DISTRIBUTED" not in new.final_env()
    assert any("libuv" in w and "libuv_ROOT" in w for w in new.warnings)


def test_prebuild_command_only_where_the_bat_honours_it():
    """v0.4.1 and v1.0.1's tools/build_pytorch_libs.bat call %PREBUILD_COMMAND% (1.0.1: lines 164, 210); 1.1 has no .bat."""
    by_name = {era.name: era for era in KNOWLEDGE.eras}
    assert by_name["0.3-0.4"].prebuild_command and by_name["1.0"].prebuild_command
    assert not any(era.prebuild_command for era in KNOWLEDGE.eras if era.first >= (1, 1, 0))


def test_cuda8_under_ninja_enters_vs2015_with_the_041_readme_arguments():
    """v0.4.1 README.md: set PREBUILD_COMMAND=%VS140COMNTOOLS%\\..\\..\\VC\\vcvarsall.bat and PREBUILD_COMMAND_ARGS=x64."""
    from pytorch_winbuild.facts.model import load_facts

    plan = make_plan(
        Options(cuda="8.0", pytorch_version="0.4.1", cache_dir=CACHE),
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
        Options(cuda="cpu", pytorch_version="2.6", libtorch=True, cache_dir=CACHE),
        facts_from_dict(_host(python="3.11.9", vs=("2022",))),
        KNOWLEDGE,
    )
    assert plan.build_arguments == ("tools/build_libtorch.py",)
    assert plan.commands[-1].command == "python tools/build_libtorch.py"


def test_every_era_records_its_sources():
    for era in KNOWLEDGE.eras:
        assert era.sources and all(" " in source for source in era.sources), era.name
