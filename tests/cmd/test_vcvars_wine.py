"""vcvars capture against stand-in Visual Studio scripts, run by Wine's cmd for real.

Every stand-in lives under `<tmp>/Program Files (x86)/...`, so each run also proves the command
line quoting survives spaces and `(x86)` (and `&` where noted).

Kept doubles: the Visual Studio scripts (standin_vs.py and the small .bat files below) and the `MZ`
placeholders named cl.exe, because Visual Studio cannot be installed on Linux; cmd itself is real.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from standin_vs import StandInVisualStudio, make_visual_studio, write_bat

from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.facts.cmd_line import from_wine_path, run_command_line, to_wine_path
from pytorch_winbuild.facts.vcvars import VcvarsResult, capture_vcvars, vcvars_command_line

if TYPE_CHECKING:
    from conftest import CmdResult, WinePrefix

pytestmark = pytest.mark.cmd

WINE = ["wine", "cmd"]
BASE_PATH = r"C:\windows\system32;C:\windows"


def capture(
    prefix: WinePrefix,
    script: str,
    args: list[str],
    *,
    base_env: dict[str, str] | None = None,
    cache_dir: Path | None = None,
) -> VcvarsResult:
    """capture_vcvars through Wine, starting from the prefix's environment with a plain PATH."""
    return capture_vcvars(
        script, args, base_env=base_env or prefix.windows_env(PATH=BASE_PATH), cache_dir=cache_dir, launcher=WINE
    )


@pytest.fixture
def vs2017(tmp_path: Path) -> StandInVisualStudio:
    return make_visual_studio(tmp_path)


def entries(value: str) -> list[str]:
    return [entry for entry in value.split(";") if entry]


# --- a good installation ------------------------------------------------------------------------


def test_cross_tools_with_an_older_toolset(wine_prefix: WinePrefix, vs2017: StandInVisualStudio) -> None:
    result = capture(wine_prefix, vs2017.script(), ["x86_amd64", "-vcvars_ver=14.11"])

    toolset = vs2017.toolset_dir("14.11.25503")
    env = result.env
    assert env["VCToolsVersion"] == "14.11.25503"
    assert env["VCToolsInstallDir"] == toolset + "\\"
    assert env["VSINSTALLDIR"] == to_wine_path(vs2017.install) + "\\"
    assert (env["VSCMD_ARG_HOST_ARCH"], env["VSCMD_ARG_TGT_ARCH"], env["CommandPromptType"], env["Platform"]) == (
        "x86",
        "x64",
        "Cross",
        "x64",
    )
    assert env["VisualStudioVersion"] == "15.0"
    assert env["WindowsSDKVersion"] == "10.0.17763.0\\"
    assert entries(env["INCLUDE"])[:2] == [toolset + r"\ATLMFC\include", toolset + r"\include"]
    assert any(entry.endswith(r"Windows Kits\10\include\10.0.17763.0\ucrt") for entry in entries(env["INCLUDE"]))
    assert toolset + r"\lib\x64" in entries(env["LIB"])
    assert toolset + r"\lib\x86\store\references" in entries(env["LIBPATH"])

    # The cross compiler first, then the host's own tools; the old PATH kept whole at the end.
    assert result.prepended["PATH"][:2] == [toolset + r"\bin\HostX86\x64", toolset + r"\bin\HostX86\x86"]
    assert env["PATH"].endswith(";" + BASE_PATH)
    assert env["__VSCMD_PREINIT_PATH"] == BASE_PATH
    assert "PATH" not in result.appended
    assert result.cl == toolset + r"\bin\HostX86\x64\cl.exe"

    # Only what the script did counts as a change: not Wine's own variables, not the trampoline's.
    assert {"INCLUDE", "LIB", "LIBPATH", "PATH", "VCToolsVersion", "VSCMD_ARG_TGT_ARCH"} <= set(result.changes)
    assert not {
        "ComSpec",
        "SystemRoot",
        "WINEPREFIX",
        "PROMPT",
        "__PYTORCH_WINBUILD_PATH",
        "__PYTORCH_WINBUILD_COMMAND",
    } & set(result.changes)
    assert result.removed == ()
    assert "** Visual Studio 2017 Developer Command Prompt v15.9.4" in result.output
    assert "[vcvarsall.bat] Environment initialized for: 'x86_amd64'" in result.output
    assert "VCToolsVersion=" not in result.output
    assert result.command_line == vcvars_command_line(vs2017.script(), ["x86_amd64", "-vcvars_ver=14.11"])
    assert result.from_cache is False


def test_native_x64_tools_with_the_default_toolset(wine_prefix: WinePrefix, vs2017: StandInVisualStudio) -> None:
    result = capture(wine_prefix, vs2017.script(), ["x64"])

    toolset = vs2017.toolset_dir("14.16.27023")
    assert result.env["VCToolsVersion"] == "14.16.27023"
    assert (result.env["VSCMD_ARG_HOST_ARCH"], result.env["VSCMD_ARG_TGT_ARCH"], result.env["CommandPromptType"]) == (
        "x64",
        "x64",
        "Native",
    )
    assert "VSCMD_ARG_VCVARS_VER" not in result.changes
    assert result.prepended["PATH"][0] == toolset + r"\bin\HostX64\x64"
    assert result.cl == toolset + r"\bin\HostX64\x64\cl.exe"  # the folder is Hostx64 on disk: found case-insensitively


def test_the_cross_tools_shortcut_named_in_the_facts(wine_prefix: WinePrefix, vs2017: StandInVisualStudio) -> None:
    facts = vs2017.facts()
    script = facts.vcvars["vcvarsx86_amd64.bat"]
    assert " (x86)" in script

    result = capture(wine_prefix, script, ["-vcvars_ver=14.11"])

    assert result.env["VCToolsVersion"] == "14.11.25503"
    assert result.env["CommandPromptType"] == "Cross"
    assert result.cl.endswith(r"\14.11.25503\bin\HostX86\x64\cl.exe")


# --- failures that exit with status 0 -------------------------------------------------------------


def test_missing_toolset_is_an_error_despite_exit_status_zero(wine_prefix: WinePrefix, tmp_path: Path) -> None:
    vs = make_visual_studio(tmp_path, toolsets=("14.16.27023",))
    args = ["x64", "-vcvars_ver=14.11"]

    # The script really does report success: this is what makes the check necessary.
    raw = run_command_line(
        vcvars_command_line(vs.script(), args).removeprefix("cmd "),
        env=wine_prefix.windows_env(PATH=BASE_PATH),
        launcher=WINE,
    )
    assert raw.returncode == 0

    with pytest.raises(ToolchainError) as caught:
        capture(wine_prefix, vs.script(), args)

    error = caught.value
    assert error.exit_code == 3
    assert "\"[ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.\"" in error.message
    assert "(and 3 more [ERROR] lines)" in error.message
    assert "exited with status 0" in error.message
    assert error.fix is not None and "Visual Studio Installer" in error.fix and "v14.11" in error.fix
    assert error.paragraph().startswith("toolchain error: ")
    assert "\n" not in error.paragraph()


def test_no_compiler_on_path_is_an_error(wine_prefix: WinePrefix, tmp_path: Path) -> None:
    vs = make_visual_studio(tmp_path, with_compiler=False)

    with pytest.raises(ToolchainError) as caught:
        capture(wine_prefix, vs.script(), ["x64"])

    assert "no cl.exe" in caught.value.message
    assert caught.value.fix is not None and "Desktop development with C++" in caught.value.fix


def test_an_unknown_argument_is_an_error(wine_prefix: WinePrefix, vs2017: StandInVisualStudio) -> None:
    with pytest.raises(ToolchainError) as caught:
        capture(wine_prefix, vs2017.script(), ["arm65"])

    assert '"[ERROR:vcvarsall.bat] Invalid argument found : arm65"' in caught.value.message
    assert caught.value.fix is not None and "VSCMD_DEBUG=1" in caught.value.fix


# --- other failures -------------------------------------------------------------------------------


def test_a_failing_exit_status_is_an_error(wine_prefix: WinePrefix, tmp_path: Path) -> None:
    script = write_bat(
        tmp_path / "Program Files (x86)" / "Broken Tools" / "vcvars.bat",
        "@echo off\necho Looking for the compiler...\nexit /b 5\n",
    )

    with pytest.raises(ToolchainError) as caught:
        capture(wine_prefix, to_wine_path(script), ["x64"])

    assert "exited with status 5" in caught.value.message
    assert '"Looking for the compiler..."' in caught.value.message


def test_a_script_that_ends_cmd_is_an_error(wine_prefix: WinePrefix, tmp_path: Path) -> None:
    script = write_bat(tmp_path / "Program Files (x86)" / "Rude Tools" / "vcvars.bat", "@echo off\nexit 0\n")

    with pytest.raises(ToolchainError) as caught:
        capture(wine_prefix, to_wine_path(script), [])

    assert "ended the command interpreter" in caught.value.message


def test_a_missing_script_is_an_error(wine_prefix: WinePrefix, tmp_path: Path) -> None:
    with pytest.raises(ToolchainError) as caught:
        capture(wine_prefix, to_wine_path(tmp_path / "Program Files (x86)" / "vcvarsall.bat"), ["x64"])

    assert "does not exist" in caught.value.message


# --- values that cmd could mangle -----------------------------------------------------------------

TRICKY_SCRIPT = """@echo off
set "WINBUILD_ODD=a & b %%PATH%% c (x86) d=e ^ f"
set "WINBUILD_EQUALS==x=y"
set "PATH=%~dp0bin;%PATH%"
exit /b 0
"""


def test_special_characters_survive(wine_prefix: WinePrefix, tmp_path: Path) -> None:
    folder = tmp_path / "Program Files (x86)" / "R&D Tools (x86)"
    script = write_bat(folder / "setvars.bat", TRICKY_SCRIPT)
    (folder / "bin").mkdir()
    (folder / "bin" / "cl.exe").write_bytes(b"MZ")
    # No % in this PATH: Wine's cmd, unlike Windows', expands %...% again inside the value that
    # the script's %PATH% produced. The % cases are the two WINBUILD_ variables instead.
    base_path = r"C:\Tools & Co (x86)\a=b;" + BASE_PATH
    base_env = wine_prefix.windows_env(
        PATH=base_path, WINBUILD_BASE="x=1 & y=(x86) 100% sure; ^ !", WINBUILD_USER="Zoë 张三"
    )

    result = capture(wine_prefix, to_wine_path(script), [], base_env=base_env)

    assert result.env["WINBUILD_ODD"] == "a & b %PATH% c (x86) d=e ^ f"
    assert result.env["WINBUILD_EQUALS"] == "=x=y"
    assert result.changes.keys() == {"WINBUILD_ODD", "WINBUILD_EQUALS", "PATH"}
    assert result.prepended == {"PATH": [to_wine_path(folder / "bin")]}
    assert result.env["PATH"] == to_wine_path(folder / "bin") + ";" + base_path
    assert result.env["WINBUILD_BASE"] == "x=1 & y=(x86) 100% sure; ^ !"
    assert result.env["WINBUILD_USER"] == "Zoë 张三"
    assert result.cl == to_wine_path(folder / "bin" / "cl.exe")


# --- the cache ----------------------------------------------------------------------------------------


def cache_files(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.iterdir())


def test_second_capture_comes_from_the_cache(
    wine_prefix: WinePrefix, vs2017: StandInVisualStudio, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache" / "vcvars"
    base_env = wine_prefix.windows_env(
        PATH=BASE_PATH, GITHUB_TOKEN="ghp_" + "a1B2c3D4" * 5, SCCACHE_REDIS_PASSWORD="hunter2-hunter2"
    )

    fresh = capture(wine_prefix, vs2017.script(), ["x64"], base_env=base_env, cache_dir=cache_dir)
    cached = capture(wine_prefix, vs2017.script(), ["x64"], base_env=base_env, cache_dir=cache_dir)

    assert (fresh.from_cache, cached.from_cache) == (False, True)
    assert cached.seconds * 10 < fresh.seconds, (cached.seconds, fresh.seconds)
    assert cached.env == fresh.env
    assert (cached.changes, cached.removed, cached.prepended, cached.cl, cached.output) == (
        fresh.changes,
        fresh.removed,
        fresh.prepended,
        fresh.cl,
        fresh.output,
    )
    [file] = cache_files(cache_dir)  # one entry, no temporary file left behind
    text = file.read_text(encoding="utf-8")
    assert json.loads(text)["changes"] == fresh.changes
    assert "ghp_" not in text and "hunter2" not in text and "WINEPREFIX" not in text
    assert cached.env["GITHUB_TOKEN"] == base_env["GITHUB_TOKEN"]  # the caller's variables still pass through


def test_a_changed_script_is_captured_again(
    wine_prefix: WinePrefix, vs2017: StandInVisualStudio, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir)
    script = vs2017.build_dir / "vcvarsall.bat"

    stat = script.stat()
    os.utime(script, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    touched = capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir)
    assert touched.from_cache is False
    assert capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir).from_cache is True

    write_bat(
        script,
        script.read_text(encoding="ascii").replace("@echo off\n", '@echo off\nset "VSCMD_SKIP_SENDTELEMETRY=1"\n', 1),
    )
    edited = capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir)
    assert edited.from_cache is False
    assert edited.changes["VSCMD_SKIP_SENDTELEMETRY"] == "1"
    assert len(cache_files(cache_dir)) == 1  # the stale entry was replaced, not kept beside


@pytest.mark.parametrize("garbage", ["{not json", "[]", '{"identity": 1}', ""])
def test_a_corrupt_cache_entry_is_ignored_and_rewritten(
    wine_prefix: WinePrefix, vs2017: StandInVisualStudio, tmp_path: Path, garbage: str
) -> None:
    cache_dir = tmp_path / "cache"
    first = capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir)
    [file] = cache_files(cache_dir)
    file.write_text(garbage, encoding="utf-8")

    again = capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir)

    assert again.from_cache is False
    assert again.changes == first.changes
    assert json.loads(file.read_text(encoding="utf-8"))["changes"] == first.changes
    assert capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir).from_cache is True


def test_the_starting_environment_is_part_of_the_key(
    wine_prefix: WinePrefix, vs2017: StandInVisualStudio, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir)

    other_path = capture(
        wine_prefix,
        vs2017.script(),
        ["x64"],
        cache_dir=cache_dir,
        base_env=wine_prefix.windows_env(PATH=r"C:\Tools;" + BASE_PATH),
    )
    assert other_path.from_cache is False
    assert other_path.env["PATH"].endswith(r";C:\Tools;" + BASE_PATH)

    # INCLUDE is extended by the script, so a different starting INCLUDE needs a new capture.
    other_include = capture(
        wine_prefix,
        vs2017.script(),
        ["x64"],
        cache_dir=cache_dir,
        base_env=wine_prefix.windows_env(PATH=BASE_PATH, INCLUDE=r"C:\mkl\include"),
    )
    assert other_include.from_cache is False
    assert other_include.env["INCLUDE"].endswith(r";C:\mkl\include")

    other_args = capture(wine_prefix, vs2017.script(), ["x86_amd64"], cache_dir=cache_dir)
    assert other_args.from_cache is False


def test_a_removed_compiler_is_noticed_despite_the_cache(
    wine_prefix: WinePrefix, vs2017: StandInVisualStudio, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    result = capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir)
    cl = from_wine_path(result.cl, wine_prefix.path)
    assert cl is not None
    cl.unlink()

    with pytest.raises(ToolchainError, match=r"no cl\.exe"):
        capture(wine_prefix, vs2017.script(), ["x64"], cache_dir=cache_dir)


# --- the fixtures other cmd tests use -------------------------------------------------------------


def test_run_cmd_passes_the_command_line_exactly(
    run_cmd: Callable[..., CmdResult], wine_path: Callable[[Path], str], tmp_path: Path
) -> None:
    script = write_bat(
        tmp_path / "Program Files (x86)" / "R&D" / "show.bat", "@echo off\necho all=[%*]\necho first=[%~1]\nexit /b 3\n"
    )

    result = run_cmd(f'"{wine_path(script)}" "two words" x=1')

    assert result.stdout.splitlines() == ['all=["two words" x=1]', "first=[two words]"]
    assert result.exit_code == 3


def test_wine_paths_map_both_ways(wine_prefix: WinePrefix, tmp_path: Path) -> None:
    folder = tmp_path / "Program Files (x86)"
    folder.mkdir()
    assert to_wine_path(folder) == "Z:" + str(folder).replace("/", "\\")
    assert from_wine_path(to_wine_path(folder), wine_prefix.path) == folder
    cmd = from_wine_path(r"C:\WINDOWS\SYSTEM32\CMD.EXE", wine_prefix.path)
    assert cmd is not None and cmd.is_file() and cmd.name == "cmd.exe"
