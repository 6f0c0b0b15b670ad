"""The commands a plan prints (fetch-deps, vcvars, the prep copy, the build) are quoted for the plan's
shell, or the table that shows them is refused (exit 2, naming the value) when no quoting keeps a
value literal there; JSON shows such a command as null, with the reason.

What cmd makes of the Windows commands is proven by Wine's cmd in tests/cmd/test_printed_commands_real.py;
the Linux commands run here in real bash.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import HOSTS_DIR, plan_options, run_invoke

from pytorch_winbuild.deps.fetch import variable_lines
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces.render import render_bat, render_json, render_table
from pytorch_winbuild.facts.model import facts_from_dict
from pytorch_winbuild.knowledge.catalog import BuildVariable
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.commands_plan import command_line
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.plan_record import plan_to_dict
from pytorch_winbuild.planning.request import PlanRequest

KNOWLEDGE = load_knowledge()
VS2017 = HOSTS_DIR / "vs2017-cuda90-cuda100.json"


def host_data(change: Callable[[dict[str, Any]], None] = lambda data: None) -> dict[str, Any]:
    data = json.loads(VS2017.read_text(encoding="utf-8"))
    change(data)
    return data


def plan_for(data: dict[str, Any], cache_dir: str = "C:\\c") -> Plan:
    """A CUDA 9.0 plan whose MKL/MAGMA are not fetched yet, so it prints the fetch-deps command too."""
    options = plan_options(cuda="9.0", cache_dir=cache_dir, cache_dir_given=True)
    return make_plan(
        PlanRequest(options, locate_archive=lambda a: ("C:\\d", False)), facts_from_dict(data, str(VS2017)), KNOWLEDGE
    )


def with_vcvars(path: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["visual_studio"][0]["vcvars"]["vcvarsall.bat"] = path

    return change


@pytest.mark.parametrize(
    ("cache_dir", "char"),
    [("C:\\c%PATH%", "a percent sign"), ("C:\\c!x!", "an exclamation mark"), ('C:\\c" & echo x', "a double quote")],
)
def test_a_cache_folder_no_quoting_keeps_is_refused(cache_dir: str, char: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        plan_for(host_data(), cache_dir).check_printable()
    assert error.value.message.startswith(f"the cache folder {cache_dir} holds {char}")


@pytest.mark.parametrize(
    ("char", "said"), [("!", "an exclamation mark"), ("%", "a percent sign"), ("^", "'^'"), ('"', "a double quote")]
)
def test_a_vcvars_path_no_quoting_keeps_is_refused(char: str, said: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        plan_for(host_data(with_vcvars(f"C:\\VS{char}x\\vcvarsall.bat"))).check_printable()
    assert error.value.message.startswith("the vcvars script path ")
    assert f"holds {said}" in error.value.message


def test_only_the_formats_that_show_commands_refuse_them() -> None:
    """A .bat that sets the environment, JSON, a build and its report need no command to paste."""
    plan = plan_for(host_data(), "C:\\R&D 100%")
    assert "R&D 100%%" in render_bat(plan)
    fetch = json.loads(render_json(plan))["commands"][0]
    assert fetch["command"] is None and fetch["refused"].startswith(
        "the cache folder C:\\R&D 100% holds a percent sign"
    )
    assert plan_to_dict(plan)["commands"][0]["command"] is None
    with pytest.raises(ConfigurationError):
        render_table(plan)


def test_trailing_backslashes_are_doubled_inside_quotes() -> None:
    """A program's argument parser reads `\\"` as a quote: `"C:\\a b\\\\"` is `C:\\a b\\`."""
    plan = plan_for(host_data(), "C:\\a b\\")
    assert plan.commands[0].command.endswith(' --cache-dir "C:\\a b\\\\"')


def test_cli_refuses_a_facts_cache_folder_with_a_percent_sign(tmp_path: Path) -> None:
    facts = tmp_path / "host.json"
    facts.write_text(json.dumps(host_data(lambda data: data.update(cache_dir="C:\\c%TEMP%x"))), encoding="utf-8")
    result = run_invoke("build", "--dry-run", "--host", str(facts), "--cuda", "9.0")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.startswith("configuration error: the cache folder C:\\c%TEMP%x holds a percent sign")


@pytest.mark.parametrize("value", ["/tmp/c;touch PWNED #", "/tmp/c $(touch PWNED) `touch PWNED` 'q' \\ \"x\" %P% !x"])
def test_linux_commands_pasted_into_bash_get_the_values_planned(tmp_path: Path, value: str) -> None:
    line = command_line("linux", ["invoke", "fetch-deps", "--cache-dir", value])
    stand_in = 'invoke() { printf "[%s]" "$@"; }\n'
    run = subprocess.run(["bash", "-c", stand_in + line], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert run.stdout == f"[fetch-deps][--cache-dir][{value}]"
    assert not (tmp_path / "PWNED").exists()


# --- the variables fetch-deps prints after fetching ---------------------------------------------------

WINDOWS_FOLDER = "C:\\a b (x86)\\R&D^x|y<z>w;q"  # what cmd's Wine test runs too
HOSTILE_FOLDER = '/tmp/c d/it\'s $(touch PWNED) `touch PWNED` \\ "x" %P% !x;y:z'


def fetched_variables(folder: str, sep: str = "/") -> list[BuildVariable]:
    """What fetch-deps reports for an MKL folder (build_config/deps.toml: CMAKE_INCLUDE_PATH set, LIB prepended)."""
    return [
        BuildVariable("CMAKE_INCLUDE_PATH", folder + sep + "include", False),
        BuildVariable("LIB", folder + sep + "lib", True),
    ]


@pytest.mark.parametrize("shell", ["bash", "dash"])
@pytest.mark.parametrize(("old_lib", "expected_lib"), [(None, "/lib"), ("C:\\old a;D:\\b", "/lib;C:\\old a;D:\\b")])
def test_fetch_deps_variables_on_linux_run_in_bash_as_printed(
    tmp_path: Path, old_lib: str | None, expected_lib: str, shell: str
) -> None:
    """bash and dash, not this code, say what the printed lines set: the value exactly, and the prepended one
    in front of LIB's old value with a `;` only when LIB held something. LIB is the Windows linker's list:
    Microsoft's LINK reads it `;`-separated, and so does LLVM's llvm-lib on any host (LibDriver.cpp,
    getSearchPaths: $LIB split at ';'), so a `:` would glue the folders into one path."""
    lines = variable_lines(fetched_variables(HOSTILE_FOLDER), windows=False)
    assert "Windows build" in lines[0] and "%" not in lines[0]
    exports = [line.strip() for line in lines[1:]]
    assert all(line.startswith("export ") for line in exports)
    env = {"PATH": "/usr/bin:/bin"} | ({"LIB": old_lib} if old_lib else {})
    show = 'printf "%s\\n%s" "$CMAKE_INCLUDE_PATH" "$LIB"'
    run = subprocess.run(
        [shell, "-c", "\n".join([*exports, show])], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert run.stdout.split("\n") == [HOSTILE_FOLDER + "/include", HOSTILE_FOLDER + expected_lib]
    assert not (tmp_path / "PWNED").exists()


def test_fetch_deps_names_a_variable_it_cannot_print_instead_of_printing_it() -> None:
    """A line break would start a command of its own in any shell; `%` is expanded by cmd inside quotes."""
    posix = variable_lines(fetched_variables("/tmp/c\nd"), windows=False)
    assert [line.split(":")[0].strip() for line in posix[1:]] == ["# CMAKE_INCLUDE_PATH", "# LIB"]
    assert all("not printed" in line and "U+000A" in line and "export" not in line for line in posix[1:])
    # A remark of the shell: pasted with the rest, it runs nothing and sets nothing.
    pasted = subprocess.run(
        ["bash", "-c", "\n".join([*(line.strip() for line in posix[1:]), 'printf %s "${LIB-unset}"'])],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert (pasted.returncode, pasted.stdout, pasted.stderr) == (0, "unset", "")
    cmd = variable_lines(fetched_variables("C:\\c%PATH%"), windows=True)
    assert cmd[1].strip().startswith("rem CMAKE_INCLUDE_PATH: not printed") and "a percent sign" in cmd[1]
    assert cmd[2].strip().startswith("rem LIB: not printed") and "set " not in cmd[2]


def test_fetch_deps_variables_on_windows_are_cmd_lines() -> None:
    """Inside `set "…"` cmd keeps spaces and & | < > ^ ( ) literal; the old LIB, when there is one, follows
    after `;` (what cmd makes of these lines: tests/cmd/test_printed_commands_real.py)."""
    lines = variable_lines(fetched_variables(WINDOWS_FOLDER, "\\"), windows=True)
    assert "cmd" in lines[0] and "export" not in "".join(lines)
    assert [line.strip() for line in lines[1:]] == [
        f'set "CMAKE_INCLUDE_PATH={WINDOWS_FOLDER}\\include"',
        f'if defined LIB (set "LIB={WINDOWS_FOLDER}\\lib;%LIB%") else (set "LIB={WINDOWS_FOLDER}\\lib")',
    ]
