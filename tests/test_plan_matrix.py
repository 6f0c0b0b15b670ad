"""Plans for the shipped facts files: the decisions that matter most, in words.

The expected values come from the seeds' recipes, NVIDIA's host_config.h guards (see
build_config/hosts/README.md) and the PyTorch sources of each era (tests/test_conformance.py).
"""

from __future__ import annotations

import json
import re
from pathlib import PureWindowsPath

import pytest
from support import HOSTS_DIR, plan_options, run_invoke

from pytorch_winbuild.deps.cache import deps_dir
from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.model import Facts, facts_from_dict, load_facts
from pytorch_winbuild.facts.source_tree import SourceTree
from pytorch_winbuild.knowledge.model import load_knowledge, version_tuple
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.python_choice import PythonRequest
from pytorch_winbuild.planning.request import PlanRequest

CACHE = "C:\\pwb\\cache"
# The PyTorch each shipped machine is meant to build (its Python fits that era).
HOST_PYTORCH = {
    "vs2015-cuda80": "0.4.1",
    "vs2015-vs2017-cuda80-cuda90": "0.4.1",
    "vs2017-cuda90-cuda100": "1.0.1",
    "vs2019-vs2022-cuda12": "2.13.0",
    "cpu-only": "2.13.0",
}
KNOWLEDGE = load_knowledge()
CUDA_OPTIONS = ["auto", "cpu", *KNOWLEDGE.cuda]


def _locate(archive) -> tuple[str, bool]:
    """fetch-deps' own cache layout, as `invoke env --host` uses it for another machine's (empty) cache."""
    return str(deps_dir(PureWindowsPath(CACHE), archive)), False


def plan_for(host: str, cuda: str, **options) -> Plan:
    facts = load_facts(HOSTS_DIR / f"{host}.json")
    return make_plan(
        PlanRequest(
            plan_options(cuda=cuda, pytorch_version=HOST_PYTORCH[host], cache_dir=CACHE, **options),
            locate_archive=_locate,
        ),
        facts,
        KNOWLEDGE,
    )


VS2017 = "C:\\Program Files (x86)\\Microsoft Visual Studio\\2017\\BuildTools\\VC\\Auxiliary\\Build\\vcvarsall.bat"


def test_cuda90_selects_toolset_1411_with_vcvars_ver():
    plan = plan_for("vs2017-cuda90-cuda100", "9.0")
    assert plan.vcvars.command == f'call "{VS2017}" x64 -vcvars_ver=14.11'
    assert plan.compiler.toolset == "14.11.25503"
    env = plan.final_env()
    assert env["CUDA_PATH"] == "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v9.0"
    # The build venv (made from the machine's 3.6.8, the one of its Pythons PyTorch 1.0 takes: 3.5 up to 3.8) comes
    # last, so its Scripts folder is first on PATH, as its activate script does.
    venv = f"{CACHE}\\venvs\\1.0-py3.6-{plan.venv.key}"
    assert plan.build_python.executable == "C:\\Program Files\\Python36\\python.exe"
    assert env["VIRTUAL_ENV"] == venv
    assert env["PATH"] == f"{venv}\\Scripts;C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v9.0\\bin;%PATH%"
    assert env["USE_CUDA"] == "1" and "NO_CUDA" not in env
    assert env["CMAKE_GENERATOR"] == "Ninja"
    # CPython 3.5+ Lib/distutils/_msvccompiler.py _get_vc_env reads DISTUTILS_USE_SDK alone; MSSdk was read only by
    # msvc9compiler (Python <= 3.4), which no era's build Python uses.
    assert env["DISTUTILS_USE_SDK"] == "1" and "MSSdk" not in env
    # 1.0's own build leaves both off on Windows (tools/setup_helpers/dist_check.py: `and IS_LINUX`): not set.
    assert "USE_NCCL" not in env and "USE_DISTRIBUTED" not in env
    # PyTorch 1.0.1's CI (.jenkins/pytorch/win-build.sh) used magma 2.4.0; 1.1's used 2.5.0.
    assert env["MAGMA_HOME"] == f"{CACHE}\\deps\\magma_2.4.0_cuda90_release"
    assert env["CMAKE_INCLUDE_PATH"] == f"{CACHE}\\deps\\mkl_2018.2.185\\include"
    assert env["LIB"] == f"{CACHE}\\deps\\mkl_2018.2.185\\lib;%LIB%"


def test_cuda100_uses_the_fallback_range_and_the_newest_vs2017_toolset():
    plan = plan_for("vs2017-cuda90-cuda100", "10.0")
    assert plan.cuda_msc_range == (1700, 1917)
    assert "fallback" in plan.cuda_msc_range_source
    assert plan.vcvars.args == ("x64", "-vcvars_ver=14.16")


def test_auto_takes_the_newest_cuda_an_installed_toolset_accepts():
    plan = plan_for("vs2017-cuda90-cuda100", "auto")
    assert plan.cuda.version == "10.0"
    assert any(d.startswith("CUDA auto: 10.0") for d in plan.decisions)


def test_seeds_era_cuda80_with_vs2015_and_vs2017_uses_prebuild_command():
    plan = plan_for("vs2015-vs2017-cuda80-cuda90", "8.0")
    env = plan.final_env()
    # v0.4.1 README.md (Windows): `call "%VS150COMNTOOLS%\vcvarsall.bat" x64 -vcvars_ver=14.11`.
    assert (
        plan.vcvars.command == 'call "C:\\Program Files (x86)\\Microsoft Visual '
        'Studio\\2017\\Community\\VC\\Auxiliary\\Build\\vcvarsall.bat" x64 -vcvars_ver=14.12'
    )
    assert plan.cuda_host_compiler.toolset == "14.0"
    # seeds 002: set PREBUILD_COMMAND=%VS140COMNTOOLS%\..\..\VC\vcvarsall.bat, PREBUILD_COMMAND_ARGS=x86_amd64
    assert env["PREBUILD_COMMAND"] == "C:\\Program Files (x86)\\Microsoft Visual Studio 14.0\\VC\\vcvarsall.bat"
    assert env["PREBUILD_COMMAND_ARGS"] == "x64"  # v0.4.1 README.md (the seeds wrote x86_amd64)
    # 0.4 reads no CUDAHOSTCXX: its build passes the host compiler through PREBUILD_COMMAND (FindCUDA).
    assert "CUDAHOSTCXX" not in env
    assert "NO_CUDA" not in env and env["NO_DISTRIBUTED"] == "1"
    # clcache as CC/CXX, as seed 002; its USE_CLCACHE has no reader in the build venv (compiler_caches.toml)
    assert "USE_CLCACHE" not in env and env["CC"] == "clcache" and env["CXX"] == "clcache"
    assert "both VS 2015 and VS 2017 are installed" in next(
        c.reason for c in plan.changes if c.name == "DISTUTILS_USE_SDK"
    )
    # The build venv is made from the machine's Python that PyTorch 0.4 takes (3.5 up to 3.8): Anaconda's 3.6.4
    # (its 3.5.6 env is older; the tool's 3.11.9 too new), and setup.py runs under the venv's interpreter.
    assert (plan.build_python.version, plan.build_python.executable) == (
        "3.6.4",
        "C:\\ProgramData\\Anaconda3\\python.exe",
    )
    venv = f"{CACHE}\\venvs\\0.3-0.4-py3.6-{plan.venv.key}"
    assert [c.command for c in plan.commands][-1] == f"{venv}\\Scripts\\python.exe setup.py install"
    assert not any("cwrap_common.py" in c.command for c in plan.commands), "v0.4.0 setup.py copies it itself"


def test_cuda80_with_the_vs_generator_uses_the_vs2015_generator():
    plan = plan_for("vs2015-cuda80", "8.0", generator="vs")
    env = plan.final_env()
    assert env["CMAKE_GENERATOR"] == "Visual Studio 14 2015 Win64"
    assert plan.vcvars.args == ("amd64",)  # VS 2015's vcvarsall.bat names the 64-bit host tools amd64
    assert "PREBUILD_COMMAND" not in env and "CUDAHOSTCXX" not in env


def test_cpu_build_in_the_seeds_era_sets_no_cuda():
    env = plan_for("vs2015-cuda80", "cpu").final_env()
    assert env["NO_CUDA"] == "1" and "USE_CUDA" not in env and "MAGMA_HOME" not in env


def test_vs_generator_on_vs2022_sets_the_checked_name_and_toolset():
    # main tools/setup_helpers/cmake.py: a CMAKE_GENERATOR in the environment decides Ninja (2.1+,
    # PR #98605), else `if USE_NINJA: -GNinja`; a VS CMAKE_GENERATOR must be one of
    # "Visual Studio 16 2019", "Visual Studio 17 2022"; it passes -A x64 and -T version=... itself.
    env = plan_for("vs2019-vs2022-cuda12", "12.4", generator="vs", compiler_cache="none").final_env()
    assert env["CMAKE_GENERATOR"] == "Visual Studio 17 2022"
    assert "USE_NINJA" not in env, "CMAKE_GENERATOR already switches Ninja off"
    assert "CMAKE_GENERATOR_PLATFORM" not in env
    assert env["CMAKE_GENERATOR_TOOLSET_VERSION"] == "14.44"


def test_sccache_variables_and_arch_list_and_jobs():
    env = plan_for("vs2019-vs2022-cuda12", "12.4", arch_list="8.6", jobs=6).final_env()
    assert env["CMAKE_CUDA_COMPILER_LAUNCHER"] == "sccache" and env["SCCACHE_IDLE_TIMEOUT"] == "0"
    assert env["SCCACHE_DIR"] == f"{CACHE}\\sccache"
    assert env["TORCH_CUDA_ARCH_LIST"] == "8.6" and env["MAX_JOBS"] == "6"


def test_cuda90_on_a_machine_with_only_1416_names_the_component():
    with pytest.raises(ToolchainError) as error:
        _only_1416_plan()
    text = error.value.paragraph()
    assert "CUDA 9.0 accepts MSVC toolsets with _MSC_VER 1600–1911, and none is installed" in text
    assert "VC++ 2017 version 15.4 v14.11 toolset" in text
    assert "-vcvars_ver=14.11" in text


def _only_1416_plan() -> Plan:
    """The shipped VS 2017 machine without its side-by-side 14.11 toolset."""
    data = json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))
    data["visual_studio"][0]["toolsets"] = ["14.16.27023"]
    return make_plan(
        PlanRequest(plan_options(cuda="9.0", pytorch_version="1.0.1", cache_dir=CACHE)),
        facts_from_dict(data),
        KNOWLEDGE,
    )


def test_toolset_outside_the_cuda_range_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match=r"toolset 14.16 \(_MSC_VER 1916\) is not accepted by CUDA 9.0"):
        plan_for("vs2017-cuda90-cuda100", "9.0", toolset="14.16")


def test_sccache_with_the_vs_generator_is_refused():
    with pytest.raises(ConfigurationError, match="Visual Studio generator, which ignores compiler launchers"):
        plan_for("vs2019-vs2022-cuda12", "12.4", generator="vs", compiler_cache="sccache")


def test_missing_visual_studio_is_a_toolchain_error():
    data = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    data["visual_studio"] = []
    with pytest.raises(ToolchainError, match="no Visual Studio with the C\\+\\+ build tools was found") as error:
        make_plan(PlanRequest(plan_options(cuda="cpu", cache_dir=CACHE)), facts_from_dict(data), KNOWLEDGE)
    assert error.value.exit_code == 3


LINUX_CACHE = "/pwb/cache"


def test_a_32_bit_python_is_never_the_build_python():
    """PyTorch has no 32-bit builds: a 32-bit Python asked for by path is refused (exit 2), and a Windows machine
    whose only Python is 32-bit builds with 64-bit CPython from NuGet, the newest PyTorch main takes (3.10 up to
    3.16, with 2.15.0's cp315: 3.15)."""
    data = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    for python in (data["python"], *data["pythons"]):
        python["bits"] = 32
    facts = facts_from_dict(data)
    executable = "C:\\Program Files\\Python312\\python.exe"
    with pytest.raises(ConfigurationError) as error:
        make_plan(
            PlanRequest(plan_options(cuda="cpu", cache_dir=CACHE, python=PythonRequest.parse(executable))),
            facts,
            KNOWLEDGE,
        )
    assert error.value.exit_code == 2
    assert error.value.paragraph() == (
        f"configuration error: --python {executable}: it is 32-bit, and PyTorch builds and runs only with 64-bit "
        "Python. Fix: pass the path of a 64-bit CPython, or leave --python out."
    )
    plan = make_plan(PlanRequest(plan_options(cuda="cpu", cache_dir=CACHE), locate_archive=_locate), facts, KNOWLEDGE)
    assert (plan.era.name, plan.build_python.fetch_minor, plan.build_python.info) == ("2.9+", "3.15", None)
    assert plan.build_python.version.startswith("3.15.")
    folder = f"{CACHE}\\deps\\python.{plan.build_python.version}"
    commands = [c.command for c in plan.commands]
    assert "invoke fetch-deps --python 3.15" in commands
    assert f"{folder}\\tools\\python.exe -m venv {plan.venv.folder}" in commands
    # A machine with 64-bit Pythons besides: the fix names them.
    data["pythons"].append(
        {**data["pythons"][0], "version": "3.11.9", "bits": 64, "executable": "C:\\Py311\\python.exe"}
    )
    with pytest.raises(ConfigurationError) as error:
        make_plan(
            PlanRequest(plan_options(cuda="cpu", cache_dir=CACHE, python=PythonRequest.parse(executable))),
            facts_from_dict(data),
            KNOWLEDGE,
        )
    assert error.value.fix == "pass --python 3.11, or leave --python out."


def test_linux_with_only_a_32_bit_python_names_the_python_to_install():
    """Nothing is fetched on Linux: with no 64-bit Python the plan stops (exit 3) naming the Python to install for
    PyTorch main (era 2.9+: 3.10 up to 3.16, as 2.15.0's cp315 wheels: 3.15)."""
    linux = json.loads(json.dumps(LINUX))
    linux["python"]["bits"] = 32
    with pytest.raises(ToolchainError) as error:
        make_plan(PlanRequest(plan_options(cuda="cpu", cache_dir=LINUX_CACHE)), facts_from_dict(linux), KNOWLEDGE)
    assert error.value.exit_code == 3
    assert "install Python 3.15 (`pyenv install 3.15`" in (error.value.fix or ""), error.value.paragraph()


def test_python_outside_a_pinned_era_is_refused_with_the_nearest_version():
    """PyPI's torch 2.6.0: Requires-Python >=3.9.0, cp39-cp313 Windows wheels. This machine has 64-bit 3.12.7, 3.11.9,
    3.9.13 and a 32-bit 3.8.10: --python 3.8 is refused for 2.6 (exit 2) naming the release's own range and
    where it was read, the installed Pythons 2.6 takes and the newest release that takes 3.8 (2.4.1: cp38-cp312),
    and each of those plans."""
    facts = load_facts(HOSTS_DIR / "vs2019-vs2022-cuda12.json")

    def plan(version: str, python: str) -> Plan:
        options = plan_options(cuda="cpu", pytorch_version=version, cache_dir=CACHE, python=PythonRequest.parse(python))
        return make_plan(PlanRequest(options, locate_archive=_locate), facts, KNOWLEDGE)

    with pytest.raises(ConfigurationError) as error:
        plan("2.6", "3.8")
    assert error.value.exit_code == 2
    assert "PyTorch 2.6.0 builds with Python 3.9 up to, not including, 3.14 (PyPI torch 2.6.0" in error.value.message
    assert error.value.message.endswith(", not 3.8 (--python).")
    assert error.value.fix == "pass --python 3.12 or --python 3.11 or --pytorch-version 2.4.1 (PyTorch 2.1-2.4)."
    assert plan("2.6", "3.12").build_python.version == "3.12.7"
    assert plan("2.6", "3.11").build_python.version == "3.11.9"
    # The installed 3.8 is 32-bit: 2.4.1 with --python 3.8 builds with NuGet's 64-bit 3.8.
    assert plan("2.4.1", "3.8").build_python.fetch_minor == "3.8"
    # the torch 1.11.0 wheel requires Python >= 3.7.0: with Python 3.6, 1.10.2 is the newest (VS 2017 machine).
    with pytest.raises(ToolchainError) as error:
        make_plan(
            PlanRequest(
                plan_options(cuda="cpu", pytorch_version="2.6", cache_dir=CACHE, python=PythonRequest.parse("3.6"))
            ),
            load_facts(HOSTS_DIR / "vs2017-cuda90-cuda100.json"),
            KNOWLEDGE,
        )
    assert "PyTorch 2.6.0 builds with Python 3.9 up to, not including, 3.14 (" in error.value.message
    assert ", not 3.6 (--python)" in error.value.message
    assert error.value.fix == "pass --pytorch-version 1.10.2 (PyTorch 1.7-1.10)."
    older = make_plan(
        PlanRequest(
            plan_options(cuda="cpu", pytorch_version="1.10.2", cache_dir=CACHE, python=PythonRequest.parse("3.6"))
        ),
        load_facts(HOSTS_DIR / "vs2017-cuda90-cuda100.json"),
        KNOWLEDGE,
    )
    assert older.build_python.executable == "C:\\Program Files\\Python36\\python.exe"


def _linux_with_python(version: str) -> Facts:
    """A Linux machine whose one Python is `version` (a schema 3 facts file: its Python is the build's too)."""
    data = json.loads(json.dumps(LINUX))
    data["python"]["version"] = version
    return facts_from_dict(data)


def test_pytorch_2_9_needs_python_3_10_and_2_8_still_builds_with_3_9():
    """v2.9.0 setup.py stops with sys.exit(-1) below python_min_version = (3, 10, 0) (pytorch/pytorch#161167;
    pytorch/vision#9239 'Update min version to 3.10 for release 2.9'); 2.8.0's minimum was 3.9."""
    # Windows, --python 3.9 (installed: 3.12.7, 3.11.9, 3.9.13): 2.9.0 refuses it (exit 2), 2.8.0 builds with it.
    windows = load_facts(HOSTS_DIR / "vs2019-vs2022-cuda12.json")

    def plan(facts: Facts, cache: str = CACHE, **options) -> Plan:
        return make_plan(
            PlanRequest(plan_options(cuda="cpu", cache_dir=cache, **options), locate_archive=_locate), facts, KNOWLEDGE
        )

    python_3_9 = PythonRequest.parse("3.9")
    with pytest.raises(ConfigurationError) as error:
        plan(windows, pytorch_version="2.9.0", python=python_3_9)
    assert "builds with Python 3.10 up to" in error.value.paragraph()
    assert "--pytorch-version 2.8.0" in error.value.paragraph()
    assert plan(windows, pytorch_version="2.8.0", python=python_3_9).build_python.version == "3.9.13"
    unpinned = plan(windows, python=python_3_9)
    assert (unpinned.era.name, unpinned.pytorch_version) == ("2.5-2.8", "2.8.0")
    # Not installed: NuGet's 3.10, which 2.9 to 2.14.1 build with and 2.15 does not (its wheels start at cp311).
    newest = plan(windows, python=PythonRequest.parse("3.10"))
    assert (newest.era.name, newest.pytorch_version, newest.build_python.fetch_minor) == ("2.9+", "2.14.1", "3.10")
    assert plan(windows, python=PythonRequest.parse("3.11")).pytorch_version == "main"
    # Linux, whose only Python is 3.9.13 (nothing is fetched): 2.9.0 names the Python to install and 2.8.0.
    linux_3_9 = _linux_with_python("3.9.13")
    with pytest.raises(ToolchainError) as error:
        plan(linux_3_9, LINUX_CACHE, pytorch_version="2.9.0")
    assert "builds with Python 3.10 up to" in error.value.paragraph() and error.value.exit_code == 3
    assert "install Python 3.14 (`pyenv install 3.14`" in error.value.fix
    assert "--pytorch-version 2.8.0" in error.value.fix
    assert plan(linux_3_9, LINUX_CACHE, pytorch_version="2.8.0").build_python.version == "3.9.13"
    unpinned = plan(linux_3_9, LINUX_CACHE)
    assert (unpinned.era.name, unpinned.pytorch_version) == ("2.5-2.8", "2.8.0")
    newest = plan(_linux_with_python("3.10.11"), LINUX_CACHE)
    assert (newest.era.name, newest.pytorch_version) == ("2.9+", "2.14.1")
    assert newest.venv.python == f"{LINUX_CACHE}/venvs/2.9_-py3.10-{newest.venv.key}/bin/python"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cuda": "9.7"}, "--cuda 9.7 is not a CUDA release pytorch-winbuild knows"),
        ({"cuda": "nine"}, "--cuda 'nine' is not X.Y"),
        ({"cuda": "cpu", "vs": "2018"}, "--vs '2018' is not a Visual Studio product line"),
        ({"cuda": "cpu", "toolset": "15.0"}, "--toolset '15.0' is not an MSVC toolset version"),
        ({"cuda": "cpu", "generator": "make"}, "--generator 'make' is not one of ninja, vs, auto"),
        ({"cuda": "cpu", "arch_list": "sm_61"}, "--arch-list entry 'sm_61' is not a compute capability"),
        ({"cuda": "cpu", "jobs": 0}, "--jobs 0 must be a positive number"),
        ({"cuda": "cpu", "compiler_cache": "distcc"}, "--compiler-cache 'distcc' is not one of"),
    ],
)
def test_bad_options(options: dict, message: str):
    with pytest.raises(ConfigurationError) as error:
        plan_for("cpu-only", **options)
    assert message in error.value.paragraph()
    assert error.value.exit_code == 2


def test_path_warnings_for_long_and_non_ascii_paths():
    long_source = (
        "C:\\Users\\someone\\Documents\\projects\\deep-learning\\frameworks\\from-source\\pytorch-checkout-for-windows"
    )
    plan = plan_for("vs2017-cuda90-cuda100", "9.0", source_dir=long_source)
    assert any("Windows' 260-character limit" in w for w in plan.warnings)
    plan = plan_for("cpu-only", "cpu", source_dir="C:\\用户\\pytorch")
    assert any("non-ASCII characters" in w for w in plan.warnings)


def test_the_machines_cmake_no_longer_decides_the_plan():
    """An old CMake on PATH, or none, no longer stops or changes a plan, pinned or not: the build venv carries a
    CMake inside the release's bounds (PyTorch 2.13's cmake_minimum_required is 3.27), the same one either way."""
    old = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    old["tools"]["cmake"]["version"] = "3.18.4"
    none = json.loads(json.dumps(old))
    del none["tools"]["cmake"]
    for options in (plan_options(cuda="cpu", pytorch_version="2.13.0", cache_dir=CACHE), plan_options(cuda="cpu")):
        with_old, without = (make_plan(PlanRequest(options), facts_from_dict(data), KNOWLEDGE) for data in (old, none))
        assert with_old.pytorch_version == without.pytorch_version
        assert with_old.cmake == without.cmake and with_old.venv == without.venv
        assert with_old.cmake is not None and version_tuple(with_old.cmake.version) >= (3, 27)
        assert any("The machine's own cmake (3.18.4" in d for d in with_old.decisions)


# The era solver's Fix (planning/era_fixes.py): every way it names must lead to a plan, never back to a refusal.
FIX_FLAG = re.compile(r"--(pytorch-version|cuda|vs) (\S+)")
FLAG_OPTION = {"pytorch-version": "pytorch_version", "cuda": "cuda", "vs": "vs"}
LINUX = {
    "schema": 3,
    "os": "linux",
    "python": {"version": "3.11.7", "bits": 64, "executable": "/usr/bin/python3"},
    "tools": {
        "ninja": {"path": "/usr/bin/ninja", "version": "1.11.1"},
        "cmake": {"path": "/usr/bin/cmake", "version": "3.28.3"},
    },
}


def _ways(fix: str) -> list[str]:
    """The Fix's alternatives: one paragraph, ways joined by '; or '."""
    return fix.rstrip(".").split("; or ")


def _flag_choices(fix: str) -> list[dict[str, str]]:
    """The flag changes the Fix says plan with what is installed (the ways that install or check out nothing, and
    name values: "leave --cuda and --vs out" is followed by tests/test_fix_promise.py, from its Way)."""
    return [
        {FLAG_OPTION[flag]: value for flag, value in FIX_FLAG.findall(choice)}
        for way in _ways(fix)
        if "install" not in way and "check out" not in way and not way.startswith("leave ")
        for choice in way.split(" or ")
        if FIX_FLAG.search(choice)
    ]


def _installed(data: dict, way: str) -> Facts:
    """The machine after following an install way: the Python it names (beside the one pytorch-winbuild runs on,
    where pyenv or python.org's installer puts it), and a Visual Studio and CUDA taken from the shipped facts files
    that have them (real installs, not made-up entries; a Linux CUDA needs only its folder)."""
    data = json.loads(json.dumps(data))
    python = re.search(r"install Python (\d+\.\d+)", way)
    if python:
        version = f"{python.group(1)}.0"
        executable = (
            f"/root/.pyenv/versions/{version}/bin/python"
            if data["os"] == "linux"
            else f"C:\\Program Files\\Python{python.group(1).replace('.', '')}\\python.exe"
        )
        installed = {**data["python"], "version": version, "executable": executable, "found_by": "installed"}
        data["pythons"] = [*data.get("pythons", [data["python"]]), installed]
    shipped = [json.loads(host.read_text(encoding="utf-8")) for host in sorted(HOSTS_DIR.glob("*.json"))]
    line = re.search(r"Visual Studio (\d{4})", way)
    if line:
        data["visual_studio"].append(
            next(vs for host in shipped for vs in host["visual_studio"] if vs["product_line"] == line.group(1))
        )
    for version in re.findall(r"(?:install|and) CUDA (\d+\.\d+)", way):
        if data["os"] == "linux":
            data.setdefault("cuda", []).append({"version": version, "path": f"/usr/local/cuda-{version}"})
        else:  # a CUDA installer brings its display driver: the machine that has it has a driver that runs it
            source = next(host for host in shipped if any(c["version"] == version for c in host["cuda"]))
            data["cuda"].append(next(c for c in source["cuda"] if c["version"] == version))
            data["driver_version"], data["driver_cuda"] = source["driver_version"], source["driver_cuda"]
    return facts_from_dict(data)


def _refusal(facts: Facts, **options) -> ConfigurationError | ToolchainError | None:
    try:
        make_plan(PlanRequest(plan_options(cache_dir=CACHE, **options)), facts, KNOWLEDGE)
    except (ConfigurationError, ToolchainError) as error:
        return error
    return None


@pytest.mark.parametrize("host", sorted(HOSTS_DIR.glob("*.json")), ids=lambda host: host.stem)
def test_every_flag_the_era_fix_names_plans(host):
    """Each shipped machine × --cuda × --pytorch-version × --vs: when a plan is refused, each flag change its Fix
    offers (the others kept) plans, and none is the choice just refused."""
    facts = load_facts(host)
    versions = [None, *(era.newest for era in KNOWLEDGE.eras)]
    for cuda in ["auto", "cpu", "8.0", "9.0", "10.0", "11.8", "12.4", "13.0"]:
        for version in versions:
            for vs in ["auto", "2015", "2017", "2019", "2022"]:
                asked = {"cuda": cuda, "pytorch_version": version, "vs": vs}
                error = _refusal(facts, **asked)
                if error is None or not error.fix:
                    continue
                for flags in _flag_choices(error.fix):
                    assert all(asked[name] != value for name, value in flags.items()), (asked, error.fix)
                    again = _refusal(facts, **{**asked, **flags})
                    assert again is None, f"{host.name} {asked} → {flags}: {error.paragraph()} → {again.paragraph()}"


def test_cuda_90_with_python_311_says_which_python_to_install():
    """README walkthrough: on Linux with Python 3.11, CUDA 9.0 is built only by eras whose Python ends before 3.8
    (build_config/eras.toml), so no --pytorch-version helps: the Fix names the Python to install (the build runs
    in a venv of it; pytorch-winbuild itself stays on 3.11), and with it and CUDA 9.0 installed the plan builds."""
    linux = facts_from_dict(LINUX)
    for version in [None, "0.4.1"]:
        error = _refusal(linux, cuda="9.0", pytorch_version=version)
        assert error is not None and error.exit_code == 3
        assert (
            "install Python 3.7 (`pyenv install 3.7`, or `conda create -n py37 python=3.7`) and CUDA 9.0" in error.fix
        )
        assert "run pytorch-winbuild with it" not in error.fix
        assert "--pytorch-version" not in error.fix  # every era that builds CUDA 9.0 needs Python < 3.8
        install = next(way for way in _ways(error.fix) if "install Python" in way)
        assert _refusal(_installed(LINUX, install), cuda="9.0", pytorch_version=version) is None
        plan = make_plan(
            PlanRequest(plan_options(cuda="9.0", pytorch_version=version, cache_dir=LINUX_CACHE)),
            _installed(LINUX, install),
            KNOWLEDGE,
        )
        assert (plan.build_python.version, plan.build_python.executable) == (
            "3.7.0",
            "/root/.pyenv/versions/3.7.0/bin/python",
        )
    error = _refusal(linux, cuda="9.0", pytorch_version="main")  # the options conflict: exit 2
    assert error is not None and error.exit_code == 2 and "--pytorch-version main" not in error.fix
    assert {"cuda": "cpu"} in _flag_choices(error.fix) and "install CUDA 13.0 and pass --cuda 13.0" in error.fix
    install = next(way for way in _ways(error.fix) if "install Python" in way)
    assert "--pytorch-version 1.1.0" in install  # the newest era that builds CUDA 9.0
    assert _refusal(_installed(LINUX, install), cuda="9.0", pytorch_version="1.1.0") is None


def test_cuda_100_on_a_vs2015_machine_says_to_install_vs2017():
    """CUDA 10.0 accepts _MSC_VER 1700-1916 (VS 2017 only) and is built by eras whose build knows VS 2017 or 2019:
    on the VS 2015 machine the Fix names VS 2017 (and CUDA 10.0, which is not installed there)."""
    data = json.loads((HOSTS_DIR / "vs2015-cuda80.json").read_text(encoding="utf-8"))
    for version in [None, "1.0.1"]:
        error = _refusal(facts_from_dict(data), cuda="10.0", pytorch_version=version)
        assert error is not None and error.exit_code == 3
        install = next(way for way in _ways(error.fix) if "Visual Studio" in way)
        assert "Visual Studio 2017 Build Tools" in install and "2019" not in install and "CUDA 10.0" in install
        assert _refusal(_installed(data, install), cuda="10.0", pytorch_version=version) is None
        assert {"cuda": "8.0"} in _flag_choices(error.fix) or version == "1.0.1"


def test_a_source_tree_pins_the_version_so_the_fix_changes_the_machine_or_the_checkout(tmp_path):
    """A tree's version.txt wins over --pytorch-version, so the Fix never offers that flag: it says what to install,
    or which release to check out instead."""
    source = ("1.0.1", str(tmp_path / "version.txt"))
    linux = facts_from_dict(LINUX)
    with pytest.raises(ToolchainError) as error:
        make_plan(
            PlanRequest(plan_options(cuda="cpu", cache_dir=CACHE), tree=SourceTree(version=source)), linux, KNOWLEDGE
        )
    fix = error.value.fix or ""
    assert "--pytorch-version" not in fix and "install Python 3.7" in fix
    checkout = re.search(r"check out v(\S+) in the source tree", fix)
    assert checkout is not None
    plan = make_plan(
        PlanRequest(plan_options(cuda="cpu", cache_dir=CACHE), tree=SourceTree(version=(checkout.group(1), "x"))),
        linux,
        KNOWLEDGE,
    )
    assert plan.pytorch_version == checkout.group(1)
    with pytest.raises(ConfigurationError, match="--pytorch-version main contradicts the source tree"):
        make_plan(
            PlanRequest(
                plan_options(cuda="cpu", pytorch_version="main", cache_dir=CACHE), tree=SourceTree(version=source)
            ),
            linux,
            KNOWLEDGE,
        )


def test_a_missing_cuda_is_installed_the_way_of_the_plans_os():
    """Linux has no CUDA 'Visual Studio Integration': its Fix names NVIDIA's Linux package for the release
    (cuda-toolkit-12-4 is that package's name in NVIDIA's apt/dnf repositories); Windows' Fix keeps the component
    its Visual Studio generator needs."""
    linux = facts_from_dict({**LINUX, "cuda": [{"version": "13.0", "path": "/usr/local/cuda-13.0"}]})
    error = _refusal(linux, cuda="12.4", pytorch_version="2.6")
    assert isinstance(error, ToolchainError) and error.message.startswith("CUDA 12.4 is not installed")
    assert "Visual Studio" not in (error.fix or "") and "cuda-toolkit-12-4 package" in (error.fix or "")
    windows = load_facts(HOSTS_DIR / "vs2019-vs2022-cuda12.json")
    error = _refusal(windows, cuda="12.1")
    assert isinstance(error, ToolchainError) and error.message.startswith("CUDA 12.1 is not installed")
    assert "'Visual Studio Integration'" in (error.fix or "") and "cuda-toolkit" not in (error.fix or "")


# Releases whose trees declare cmake_minimum_required below 3.5 (Debian's 1.13.1 and 2.6.0 sources:
# tests/client/test_client_cmake_minimums.py; 1.1.0 is older still), which CMake 4 refuses without the policy minimum.
OLD_POLICY_RELEASES = ("1.1.0", "1.13.1", "2.6.0")


@pytest.mark.parametrize("host", sorted(HOSTS_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_every_era_plan_names_the_cmake_and_ninja_it_runs(host):
    """On every shipped facts file, each era that plans there (CPU, its newest release) names the CMake and Ninja
    its build venv carries, inside the release's bounds; the releases with old policies never get CMake 4
    without CMAKE_POLICY_VERSION_MINIMUM, even when --cmake 4.4 insists on it."""
    facts = load_facts(host)
    planned = 0
    for era in KNOWLEDGE.eras:
        for release in (era.newest, *(r for r in OLD_POLICY_RELEASES if era.first <= version_tuple(r) < era.end)):
            for cmake in (None, "4.4"):
                raw = {"cmake": cmake} if cmake else {}
                try:
                    plan = make_plan(
                        PlanRequest(
                            plan_options(cuda="cpu", pytorch_version=release, cache_dir=CACHE, **raw),
                            locate_archive=_locate,
                        ),
                        facts,
                        KNOWLEDGE,
                    )
                except (ConfigurationError, ToolchainError):
                    continue  # this machine cannot build the release (its Visual Studio or Python, or no 4.4 wheel)
                planned += 1
                assert plan.cmake is not None and plan.ninja is not None, release
                bounds = KNOWLEDGE.cmake.range_for(era, None if release == "main" else version_tuple(release))
                assert not bounds.refusing(plan.cmake.version), (release, plan.cmake)
                env = plan.final_env()
                if release in OLD_POLICY_RELEASES and version_tuple(plan.cmake.version) >= (4, 0):
                    assert env.get("CMAKE_POLICY_VERSION_MINIMUM") == "3.5", (release, plan.cmake)
                assert f"cmake=={plan.cmake.version}" in plan.venv.specs  # type: ignore[union-attr]
                assert f"ninja=={plan.ninja.version}" in plan.venv.specs  # type: ignore[union-attr]
    assert planned, host


def test_doctor_lists_for_each_era_the_cmake_and_ninja_its_plan_runs(tmp_path):
    """doctor's "tools for PyTorch R" lines are a promise: the plan for R on that machine runs exactly that CMake
    and Ninja, and each lies inside R's bounds."""
    host = HOSTS_DIR / "vs2017-cuda90-cuda100.json"
    done = run_invoke("doctor", "--host", str(host), cwd=tmp_path)
    lines = [line for line in done.stdout.splitlines() if "tools for PyTorch" in line]
    assert len(lines) >= 5, done.stdout
    for line in lines:
        found = re.search(r"tools for PyTorch (\S+)\s+CMake (\S+) and Ninja (\S+) from PyPI", line)
        assert found, line
        release, cmake, ninja = found.groups()
        plan = make_plan(
            PlanRequest(plan_options(cuda="cpu", pytorch_version=release, cache_dir=CACHE)), load_facts(host), KNOWLEDGE
        )
        assert (plan.cmake.version, plan.ninja.version) == (cmake, ninja), line  # type: ignore[union-attr]


def test_a_cmake_release_picks_a_python_it_has_wheels_for_and_every_fix_for_it_plans():
    """cmake 3.10.3's Windows wheels are for CPython 3.5-3.7 only (PyPI): with --cmake 3.10 on a machine whose
    Pythons are 3.9 and newer, the plan builds with NuGet's 3.7 rather than fail on pip; for 2.6 (cmake >= 3.18,
    Python >= 3.9) it is exit 2, and each way out the error names plans when followed, --cmake kept or left out."""
    facts = load_facts(HOSTS_DIR / "vs2019-vs2022-cuda12.json")

    def plan(**raw: str) -> Plan:
        return make_plan(
            PlanRequest(plan_options(cuda="cpu", cache_dir=CACHE, **raw), locate_archive=_locate), facts, KNOWLEDGE
        )

    chosen = plan(cmake="3.10")
    assert (chosen.pytorch_version, chosen.build_python.minor, chosen.cmake.version) == ("1.10.2", "3.7", "3.10.3")  # type: ignore[union-attr]
    with pytest.raises(ConfigurationError) as error:
        plan(pytorch_version="2.6", cmake="3.10")
    fix = error.value.fix or ""
    assert error.value.exit_code == 2 and "leave --cmake out" in fix and "--pytorch-version 1.10.2" in fix
    assert plan(pytorch_version="2.6").cmake is not None
    assert plan(pytorch_version="1.10.2", cmake="3.10").cmake.version == "3.10.3"  # type: ignore[union-attr]
