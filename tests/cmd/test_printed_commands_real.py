"""The commands a Windows plan prints, pasted into a .bat and run by Wine's cmd with delayed expansion
off (/v:off) and on (/v:on): every argument arrives as planned and nothing runs that was not planned.

The programs are stand-ins on PATH: `invoke.bat`, `python.bat` and `git.bat` hand their arguments to a JScript
file that cscript runs, which prints them one a line as Windows' argument parser (CommandLineToArgvW)
splits them; the vcvars script prints what CALL gave it. The build's interpreters (the machine's Python
and the build venv's) are stand-ins at the paths the plan names, which print which one ran (a bare
`python` would reach python.bat and print no `EXE:` line). A stand-in .bat reads its arguments through
cmd once more, which changes nothing of what the plan prints: no `%` or `!`, and every `^` and
operator inside double quotes.
"""

from __future__ import annotations

from pathlib import Path, PureWindowsPath
from typing import TYPE_CHECKING

import pytest
from conftest import wine_cmd  # tests/cmd/conftest.py
from test_printed_commands import WINDOWS_FOLDER, fetched_variables, host_data, plan_for, with_vcvars

from pytorch_winbuild.builder.source_plan import planned_checkout
from pytorch_winbuild.deps.fetch import variable_lines
from pytorch_winbuild.facts.cmd_line import decode_output, to_wine_path
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.planning.commands_plan import git_step_line
from pytorch_winbuild.planning.plan_model import GitStep

if TYPE_CHECKING:
    from conftest import WinePrefix

pytestmark = pytest.mark.cmd

ARGV_JS = """var a = WScript.Arguments;
for (var i = 0; i < a.length; i++) WScript.Echo("ARG:" + a(i));
"""
VCVARS_FOLDER = "wb (x86) & a;b=c,d"  # under C:\
VCVARSALL = "@echo VCVARS:%*\r\n"
HOSTILE_CACHE_DIRS = [
    "C:\\c&md;C:\\vs\\PWNDIR&rem",
    "C:\\c&&mkdir C:\\vs\\PWNDIR",
    "C:\\a b (x86)\\^x|y<z>w\\",
    "C:\\c)&mkdir C:\\vs\\PWNDIR&(",
]


@pytest.fixture(scope="module")
def stand_ins(wine_prefix: WinePrefix, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of invoke.bat and python.bat; the stand-in vcvarsall.bat under C:\\<VCVARS_FOLDER>."""
    folder = tmp_path_factory.mktemp("standins")
    (folder / "argv.js").write_text(ARGV_JS, encoding="ascii")
    for name in ("invoke", "python", "git"):
        line = f'@cscript.exe //nologo "{to_wine_path(folder / "argv.js")}" %*\r\n'
        (folder / f"{name}.bat").write_text(line, encoding="ascii")
    vcvars = wine_prefix.path / "drive_c" / VCVARS_FOLDER
    vcvars.mkdir(exist_ok=True)
    (vcvars / "vcvarsall.bat").write_text(VCVARSALL, encoding="ascii")
    return folder


def run_pasted(wine_prefix: WinePrefix, stand_ins: Path, command: str, mode: str) -> list[str]:
    """The lines a .bat holding `command` printed, run by cmd /v:<mode> with the stand-ins first on PATH."""
    script = stand_ins / f"pasted-{len(list(stand_ins.iterdir()))}.bat"
    script.write_text(f"@echo off\r\n{command}\r\n", encoding="ascii")
    env = wine_prefix.windows_env(PATH=f"{to_wine_path(stand_ins)};C:\\windows\\system32;C:\\windows")
    completed = wine_cmd(f'/d /v:{mode} /s /c "{to_wine_path(script)}"', env)
    assert not (wine_prefix.path / "drive_c" / "vs" / "PWNDIR").exists(), "an injected command ran"
    return decode_output(completed.stdout).splitlines()


@pytest.mark.parametrize("mode", ["off", "on"])
@pytest.mark.parametrize("cache_dir", HOSTILE_CACHE_DIRS)
def test_fetch_command_gives_invoke_the_planned_cache_folder(wine_prefix, stand_ins, cache_dir: str, mode: str) -> None:
    plan = plan_for(host_data(), cache_dir)
    fetch = plan.commands[0].command
    assert fetch.startswith("invoke fetch-deps ")
    printed = run_pasted(wine_prefix, stand_ins, fetch, mode)
    assert printed == [
        "ARG:fetch-deps",
        "ARG:--cuda",
        "ARG:9.0",
        "ARG:--mkl-version",
        "ARG:2018.2.185",
        "ARG:--magma-version",
        "ARG:2.5.0",
        "ARG:--cache-dir",
        f"ARG:{cache_dir}",
    ]


def interpreter_stand_in(wine_prefix: WinePrefix, windows_path: str, label: str) -> None:
    """A program at `windows_path` (a C:\\ path) that prints `label` and its arguments one a line. It is a Unix
    shell script, which Wine's CreateProcess starts like a Windows program; its arguments are the ones Wine split
    from the command line cmd ran (no Python for Windows runs under this Wine)."""
    drive, _, rest = windows_path.partition("\\")
    assert drive == "C:", windows_path
    path = wine_prefix.path / "drive_c" / Path(*rest.split("\\"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nprintf 'EXE:%s\\n' {label}\nprintf 'ARG:%s\\n' \"$@\"\n", encoding="ascii")
    path.chmod(0o755)


@pytest.mark.parametrize("mode", ["off", "on"])
def test_vcvars_and_build_commands_run_as_planned(wine_prefix, stand_ins, mode: str) -> None:
    """After the fetch, the build makes its venv from the machine's Python 3.6.8 (the facts file's only one in
    PyTorch 1.1's range, 3.5 up to 3.8; CUDA 9.0 with VS 2017 plans era 1.1), fills it with pip, enters
    vcvars and runs setup.py under the venv's own interpreter: each command, pasted, runs the program it names
    with the planned arguments."""
    plan = plan_for(host_data(with_vcvars(f"C:\\{VCVARS_FOLDER}\\vcvarsall.bat")))
    venv = f"C:\\c\\venvs\\1.1-py3.6-{plan.venv.key}"
    interpreter_stand_in(wine_prefix, "C:\\Program Files\\Python36\\python.exe", "base")
    interpreter_stand_in(wine_prefix, venv + "\\Scripts\\python.exe", "venv")
    fetch, make_venv, pip_first, requirements, vcvars, build = (c.command for c in plan.commands)
    assert fetch.startswith("invoke fetch-deps ") and vcvars.startswith("call ")
    assert run_pasted(wine_prefix, stand_ins, make_venv, mode) == ["EXE:base", "ARG:-m", "ARG:venv", f"ARG:{venv}"]
    pip = [
        "EXE:venv",
        "ARG:-m",
        "ARG:pip",
        "ARG:install",
        "ARG:--disable-pip-version-check",
        "ARG:--no-input",
        "ARG:--no-compile",
    ]
    assert run_pasted(wine_prefix, stand_ins, pip_first, mode) == [*pip, "ARG:pip==21.3.1"]
    installed = run_pasted(wine_prefix, stand_ins, requirements, mode)
    assert installed[: len(pip)] == pip and "ARG:numpy==1.19.5" in installed and "ARG:pip==21.3.1" not in installed
    assert run_pasted(wine_prefix, stand_ins, vcvars, mode) == ["VCVARS:x64 -vcvars_ver=14.11"]
    assert run_pasted(wine_prefix, stand_ins, build, mode) == ["EXE:venv", "ARG:setup.py", "ARG:install"]


@pytest.mark.parametrize("mode", ["off", "on"])
@pytest.mark.parametrize(("old_lib", "expected_tail"), [(None, ""), ("C:\\old a;C:\\old b", ";C:\\old a;C:\\old b")])
def test_fetch_deps_variables_set_what_fetch_deps_found(
    wine_prefix, stand_ins, mode: str, old_lib: str | None, expected_tail: str
) -> None:
    """The `set` lines fetch-deps prints on Windows, pasted into a .bat: cmd's own `set NAME` shows the values."""
    lines = [line.strip() for line in variable_lines(fetched_variables(WINDOWS_FOLDER, "\\"), windows=True)[1:]]
    # The remarks that stand for values no line keeps (a % here) run nothing and set nothing.
    lines += [line.strip() for line in variable_lines(fetched_variables("C:\\c%PATH%", "\\"), windows=True)[1:]]
    assert lines[-1].startswith("rem LIB: not printed")
    before = [f'set "LIB={old_lib}"'] if old_lib else ['set "LIB="']
    shown = run_pasted(
        wine_prefix, stand_ins, "\r\n".join([*before, *lines, "set CMAKE_INCLUDE_PATH", "set LIB"]), mode
    )
    assert shown == [f"CMAKE_INCLUDE_PATH={WINDOWS_FOLDER}\\include", f"LIB={WINDOWS_FOLDER}\\lib{expected_tail}"]


REPO_URL = "https://example.invalid/a&b (c)/pytorch.git"


@pytest.fixture
def wine_stand_in_plan_ready(wine_prefix, stand_ins) -> tuple[WinePrefix, Path, tuple[GitStep, ...]]:
    """The git steps of a dry run of REPO_URL at release/2.6 into WINDOWS_FOLDER, planned for a Windows machine."""
    planned = planned_checkout(REPO_URL, "release/2.6", PureWindowsPath(WINDOWS_FOLDER), look=False)
    return wine_prefix, stand_ins, planned.steps


@pytest.mark.parametrize("mode", ["off", "on"])
def test_git_commands_of_a_repo_dry_run_give_git_the_planned_words(wine_stand_in_plan_ready, mode: str) -> None:
    """The first git of each step (the stand-in ends the .bat, as a .bat run without CALL does): the repository
    and the clone's folder, with & | < > ^ ( ) ; and spaces, arrive as planned; the checkout's first try too."""
    wine_prefix, stand_ins, steps = wine_stand_in_plan_ready
    clone, checkout = (git_step_line(Platform.WINDOWS, step) for step in steps[:2])
    assert run_pasted(wine_prefix, stand_ins, clone, mode) == [
        "ARG:clone",
        "ARG:--no-checkout",
        "ARG:--",
        f"ARG:{REPO_URL}",
        f"ARG:{WINDOWS_FOLDER}",
    ]
    printed = run_pasted(wine_prefix, stand_ins, checkout, mode)
    first_try = ["-C", WINDOWS_FOLDER, "checkout", "--quiet", "--force", "--detach", "refs/remotes/origin/release/2.6"]
    assert printed[:8] == [f"ARG:{word}" for word in [*first_try, "--"]]
    # The stand-in is a .bat, after which cmd may go on with the line: every later try's words arrive as planned too.
    planned = [f"ARG:{word}" for runs in steps[1].tries for args in runs for word in args]
    assert printed == planned[: len(printed)]
