"""The emitted build_env.bat, run by Windows' command interpreter (Wine's cmd.exe).

The plan is made for a Windows machine whose Visual Studio, CUDA and cache folders live in a
real folder tree visible to Wine, with `(x86)`, spaces, `&` and `%` in the paths. Running
`call build_env.bat && set` must give exactly the plan's final environment.
"""

from __future__ import annotations

import json
from pathlib import Path, PureWindowsPath

import pytest
from conftest import WINE_DEFAULT_PATH  # tests/cmd/conftest.py
from support import HOSTS_DIR, plan_options

from pytorch_winbuild.deps.cache import deps_dir
from pytorch_winbuild.faces.render import render_bat
from pytorch_winbuild.facts.model import facts_from_dict
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = pytest.mark.cmd

# A stand-in for VS 2017's vcvarsall.bat: takes the architecture and -vcvars_ver, prepends the
# toolset's bin folder to PATH and sets what the real one leaves behind for these checks.
# Kept double: Visual Studio cannot be installed on Linux (its scripts need the real install); cmd is real.
STAND_IN_VCVARSALL = r"""@echo off
rem cmd splits "-vcvars_ver=14.11" at the "=": the toolset is the third argument
set "__VCVARS_TOOLSET=%~3"
set "VCToolsVersion=%__VCVARS_TOOLSET%"
set "VSCMD_ARG_TGT_ARCH=x64"
set "VSCMD_ARG_HOST_ARCH=%~1"
set "INCLUDE=%~dp0..\..\Tools\MSVC\%__VCVARS_TOOLSET%\include"
set "LIB=%~dp0..\..\Tools\MSVC\%__VCVARS_TOOLSET%\lib\x64"
set "PATH=%~dp0..\..\Tools\MSVC\%__VCVARS_TOOLSET%\bin\Hostx64\x64;%PATH%"
set "__VCVARS_TOOLSET="
exit /b 0
"""


def _parse_set(output: str) -> dict[str, str]:
    env = {}
    for line in output.splitlines():
        name, sep, value = line.partition("=")
        if sep and name:
            env[name.upper()] = value
    return env


@pytest.fixture
def windows_machine(tmp_path: Path, wine_path) -> dict:
    """A facts document for the shipped VS 2017 machine, moved under a Wine-visible tree."""
    root = tmp_path / "C drive"
    vs = root / "Program Files (x86)" / "Microsoft Visual Studio" / "2017" / "BuildTools"
    build_dir = vs / "VC" / "Auxiliary" / "Build"
    build_dir.mkdir(parents=True)
    (build_dir / "vcvarsall.bat").write_bytes(STAND_IN_VCVARSALL.replace("\n", "\r\n").encode("ascii"))
    cuda = root / "Program Files" / "NVIDIA GPU Computing Toolkit" / "CUDA" / "v9.0"
    (cuda / "bin").mkdir(parents=True)
    data = json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))
    data["visual_studio"][0]["path"] = wine_path(vs)
    data["visual_studio"][0]["vcvars"] = {"vcvarsall.bat": wine_path(build_dir / "vcvarsall.bat")}
    data["cuda"][0]["path"] = wine_path(cuda)
    return data


def _run_bat(tmp_path: Path, run_cmd, wine_path, text: str) -> dict[str, str]:
    script = tmp_path / "build env" / "build_env.bat"
    script.parent.mkdir()
    script.write_bytes(text.encode("utf-8"))
    result = run_cmd(f'call "{wine_path(script)}" && set')
    assert result.exit_code == 0, result.stdout + result.stderr
    return _parse_set(result.stdout)


def test_bat_gives_exactly_the_planned_environment(tmp_path: Path, windows_machine: dict, run_cmd, wine_path):
    cache_dir = wine_path(tmp_path / "R&D 100% (x86) cache")
    plan = make_plan(
        PlanRequest(
            plan_options(cuda="9.0", pytorch_version="1.0.1", cache_dir=cache_dir, arch_list="6.1;7.0+PTX", jobs=3),
            locate_archive=lambda archive: (str(deps_dir(PureWindowsPath(cache_dir), archive)), False),
        ),
        facts_from_dict(windows_machine),
        load_knowledge(),
    )
    env = _run_bat(tmp_path, run_cmd, wine_path, render_bat(plan))

    vs_path = windows_machine["visual_studio"][0]["path"]
    toolset_bin = vs_path + "\\VC\\Auxiliary\\Build\\..\\..\\Tools\\MSVC\\14.11\\bin\\Hostx64\\x64"
    after_vcvars = {
        "PATH": toolset_bin + ";" + WINE_DEFAULT_PATH,
        "LIB": vs_path + "\\VC\\Auxiliary\\Build\\..\\..\\Tools\\MSVC\\14.11\\lib\\x64",
    }
    assert env["VCTOOLSVERSION"] == "14.11" and env["VSCMD_ARG_HOST_ARCH"] == "x64"
    for change in plan.changes:
        name = change.name.upper()
        if change.action == "set":
            assert env.get(name) == change.value, name
        elif change.action == "unset":
            assert name not in env, name
    final = plan.final_env()
    for name, value in final.items():
        expected = value.replace(f"%{name}%", after_vcvars.get(name.upper(), ""))
        assert env.get(name.upper()) == expected, name
    # the values that need quoting came through intact
    assert env["CMAKE_INCLUDE_PATH"] == cache_dir + "\\deps\\mkl_2018.2.185\\include"
    assert "R&D 100% (x86) cache" in env["CMAKE_INCLUDE_PATH"]
    assert env["TORCH_CUDA_ARCH_LIST"] == "6.1;7.0+PTX"
    # The build venv comes last and so first on PATH: PyTorch 1.0.1 is era 1.0 (Python 3.5 up to 3.8), and the
    # machine's only Python in that range is 3.6.8, so <cache>\venvs\1.0-py3.6-<key>, its Scripts first on PATH.
    venv = f"{cache_dir}\\venvs\\1.0-py3.6-{plan.venv.key}"
    assert len(plan.venv.key) == 12 and env["VIRTUAL_ENV"] == venv
    assert env["PATH"] == ";".join(
        [venv + "\\Scripts", windows_machine["cuda"][0]["path"] + "\\bin", toolset_bin, WINE_DEFAULT_PATH]
    )


def test_bat_unsets_a_leftover_no_cuda_and_cpu_plans_set_it(
    tmp_path: Path, windows_machine: dict, run_cmd, wine_path, wine_prefix
):
    plan = make_plan(
        PlanRequest(plan_options(cuda="cpu", pytorch_version="0.4.1", cache_dir="C:\\c")),
        facts_from_dict({**windows_machine, "python": {**windows_machine["python"]}}),
        load_knowledge(),
    )
    env = _run_bat(tmp_path, run_cmd, wine_path, render_bat(plan))
    assert env["NO_CUDA"] == "1" and env["NO_DISTRIBUTED"] == "1"
    plan = make_plan(
        PlanRequest(plan_options(cuda="9.0", pytorch_version="0.4.1", cache_dir="C:\\c")),
        facts_from_dict(windows_machine),
        load_knowledge(),
    )
    script = tmp_path / "leftover" / "env.bat"
    script.parent.mkdir()
    script.write_bytes(render_bat(plan).encode("utf-8"))
    result = run_cmd(f'set "NO_CUDA=1" && call "{wine_path(script)}" && set', env=wine_prefix.windows_env())
    assert result.exit_code == 0
    assert "NO_CUDA" not in _parse_set(result.stdout)


def _bat_with_vcvars(folder: Path, windows_machine: dict, vcvarsall: bytes, cache_dir: str) -> Path:
    """The machine's vcvarsall.bat replaced by `vcvarsall`, and the .bat `invoke env` writes for a 1.0.1 plan."""
    script = Path(windows_machine["visual_studio"][0]["vcvars"]["vcvarsall.bat"].replace("Z:", "").replace("\\", "/"))
    script.write_bytes(vcvarsall)
    plan = make_plan(
        PlanRequest(plan_options(cuda="9.0", pytorch_version="1.0.1", cache_dir=cache_dir)),
        facts_from_dict(windows_machine),
        load_knowledge(),
    )
    folder.mkdir()
    bat = folder / "env.bat"
    bat.write_bytes(render_bat(plan).encode("utf-8"))
    return bat


@pytest.mark.parametrize("dev", [False, True], ids=["plain", "bang-values"])
def test_bat_stops_when_vcvars_reports_an_error_and_exits_0(
    tmp_path: Path, windows_machine: dict, run_cmd, wine_path, dev: bool
):
    """VS 2017+ vcvars prints `[ERROR:vcvars.bat] ...` for a missing toolset and still exits 0 (docs/reference.md,
    "Entering the Visual Studio environment"); the script must stop there too, show vcvars' output, say
    what to do, set none of the plan's variables and leave no log behind. `dev`: a cache folder with `!`,
    whose helper variables come after the call and so must never appear."""
    bat = _bat_with_vcvars(
        tmp_path / "erroring",
        windows_machine,
        b"@echo off\r\necho ** Visual Studio 2017 Developer Command Prompt\r\n"
        b"echo [ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.\r\nexit /b 0\r\n",
        "C:\\c!dev" if dev else "C:\\c",
    )
    result = run_cmd(f'set "TEMP={wine_path(tmp_path)}" && call "{wine_path(bat)}" && set')
    assert result.exit_code == 1
    assert "Developer Command Prompt" in result.stdout and "version '14.11' was not found" in result.stdout
    assert "vcvars reported the [ERROR:...] lines above" in result.stderr
    assert "CUDA_PATH=" not in result.stdout and "__WINBUILD_" not in result.stdout
    assert not list(tmp_path.glob("pytorch-winbuild-vcvars-*.log"))


def test_bat_stops_when_vcvars_fails(tmp_path: Path, windows_machine: dict, run_cmd, wine_path):
    bat = _bat_with_vcvars(
        tmp_path / "failing",
        windows_machine,
        b"@echo [ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.\r\n@exit /b 1\r\n",
        "C:\\c",
    )
    result = run_cmd(f'call "{wine_path(bat)}" && set')
    assert result.exit_code == 1
    assert "Toolset directory for version '14.11' was not found" in result.stdout
    assert "CUDA_PATH=" not in result.stdout


def test_bat_of_a_repo_dry_run_stops_at_the_git_step_that_fails(
    tmp_path: Path, windows_machine: dict, run_cmd, wine_path
):
    """`build --repo --dry-run --format bat` gets the source first: when a git step fails (here: no git on PATH) the
    script says so and stops, exit 1, before vcvars and the environment."""
    from pytorch_winbuild.builder.source_plan import planned_checkout

    checkout = planned_checkout(
        "https://github.com/pytorch/pytorch", "v1.0.1", PureWindowsPath("C:\\src\\pytorch"), look=False
    )
    plan = make_plan(
        PlanRequest(plan_options(cuda="cpu", pytorch_version="1.0.1", cache_dir="C:\\c"), checkout=checkout),
        facts_from_dict(windows_machine),
        load_knowledge(),
    )
    script = tmp_path / "build env" / "build_env.bat"
    script.parent.mkdir()
    script.write_bytes(render_bat(plan).encode("utf-8"))
    result = run_cmd(f'call "{wine_path(script)}" && set')
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "pytorch-winbuild: git failed, see its message above. The steps after it did not run." in result.stderr
    assert "USE_CUDA=" not in result.stdout
