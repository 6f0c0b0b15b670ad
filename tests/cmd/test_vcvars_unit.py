"""vcvars capture without an interpreter: quoting, `set` parsing, diffs, decoding, Wine paths.

These run in the quick tier (no marker); test_vcvars_wine.py runs the same code through cmd. The
hand-written UTF-16 streams below are inputs in the form `cmd /u` writes (checked against the real cmd
there); the Wine path tests use the cmd tier's real Wine prefix, so they carry the `cmd` marker.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.cmd_line import _invocation, decode_output, from_wine_path, to_wine_path
from pytorch_winbuild.facts.vcvars import (
    MARKER,
    _split_sections,
    _toolchain_error,
    apply_changes,
    diff_environments,
    error_lines,
    find_program,
    parse_set_output,
    path_edits,
    vcvars_command_line,
)

VCVARSALL = r"C:\Program Files (x86)\Microsoft Visual Studio\2017\BuildTools\VC\Auxiliary\Build\vcvarsall.bat"


def payload(command_line: str) -> str:
    """What `cmd /s /c "..."` runs: the text after /c without its first and its last quote."""
    rest = command_line.split(" /c ", 1)[1]
    first, last = rest.index('"'), rest.rindex('"')
    return rest[:first] + rest[first + 1 : last] + rest[last + 1 :]


def unquoted_text(command: str) -> str:
    """The parts of a command cmd parses for operators: everything outside double quotes."""
    return "".join(command.split('"')[0::2])


# --- the command line ---------------------------------------------------------------------------


def test_command_line_is_exact() -> None:
    line = vcvars_command_line(VCVARSALL, ["x86_amd64", "-vcvars_ver=14.11"])

    assert (
        line == f'cmd /d /u /v:off /s /c "set && echo {MARKER} && "{VCVARSALL}" x86_amd64 -vcvars_ver=14.11 && echo '
        f'{MARKER} && set"'
    )
    assert payload(line) == f'set && echo {MARKER} && "{VCVARSALL}" x86_amd64 -vcvars_ver=14.11 && echo {MARKER} && set'


def test_special_characters_in_the_path_stay_inside_quotes() -> None:
    script = r"D:\R&D (x86)\Tools; 2017!\vcvarsall.bat"
    command = payload(vcvars_command_line(script, ["x64", "two words", "a&b"]))

    outside = unquoted_text(command)
    assert f'"{script}"' in command
    assert "(" not in outside and ")" not in outside and ";" not in outside
    assert re.sub("&&", "", outside).count("&") == 0  # the only & cmd sees are the four && operators
    assert outside.count("&&") == 4


@pytest.mark.parametrize(
    ("argument", "written"),
    [
        ("x64", "x64"),
        ("-vcvars_ver=14.11", "-vcvars_ver=14.11"),  # vcvarsall.bat compares it textually: no quotes
        ("10.0.17763.0", "10.0.17763.0"),
        ("-winsdk=C:\\sdk", "-winsdk=C:\\sdk"),
        ("two words", '"two words"'),
        ("a&b", '"a&b"'),
        ("(x86)", '"(x86)"'),
        ("8.1;store", '"8.1;store"'),
        ("", '""'),
    ],
)
def test_arguments_are_quoted_only_when_needed(argument: str, written: str) -> None:
    line = vcvars_command_line(VCVARSALL, [argument])
    assert f'"{VCVARSALL}" {written} && echo' in line


@pytest.mark.parametrize(
    ("script", "args", "reason"),
    [
        ('C:\\odd"name\\vcvarsall.bat', [], "double quote"),
        (VCVARSALL, ["%PATH%"], "percent sign"),
        (r"C:\100%\vcvarsall.bat", [], "percent sign"),
        (VCVARSALL, ["x64\nset X=1"], "line break"),
    ],
)
def test_text_cmd_cannot_carry_is_refused(script: str, args: list[str], reason: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        vcvars_command_line(script, args)
    assert reason in caught.value.message
    assert caught.value.exit_code == 2


# --- parsing `set` and diffing -----------------------------------------------------------------------


def test_set_output_is_parsed_with_equals_and_case_rules() -> None:
    text = "\r\n".join(
        [
            "=C:=C:\\Users\\build",  # per-drive folder, not a variable
            "ALLUSERSPROFILE=C:\\ProgramData",
            "CommonProgramFiles(x86)=C:\\Program Files (x86)\\Common Files",
            "EMPTY=",
            "Path=C:\\Windows\\system32;C:\\Windows",
            "PATH=a duplicate in other case",
            "WEIRD==x=y & (z) 100%",
            "",
        ]
    )

    assert parse_set_output(text) == {
        "ALLUSERSPROFILE": "C:\\ProgramData",
        "CommonProgramFiles(x86)": "C:\\Program Files (x86)\\Common Files",
        "EMPTY": "",
        "Path": "C:\\Windows\\system32;C:\\Windows",
        "WEIRD": "=x=y & (z) 100%",
    }


def test_a_value_with_a_line_break_is_kept_whole() -> None:
    env = parse_set_output("A=first\r\nsecond line\r\nB=2\r\n")
    assert env == {"A": "first\r\nsecond line", "B": "2"}
    assert parse_set_output("A=lf only\nB=2\n") == {"A": "lf only", "B": "2"}


def test_diff_compares_names_as_windows_does() -> None:
    before = {"Path": r"C:\Windows", "INCLUDE": "old", "GONE": "1", "SAME": "x"}
    after = {"PATH": r"C:\VC\bin;C:\Windows", "include": "old", "SAME": "x", "VCToolsVersion": "14.11.25503"}

    changes, removed = diff_environments(before, after)

    assert changes == {"PATH": r"C:\VC\bin;C:\Windows", "VCToolsVersion": "14.11.25503"}
    assert removed == ("GONE",)


def test_changes_apply_under_the_base_spelling() -> None:
    base = {"Path": r"C:\Windows", "GONE": "1", "KEEP": "k"}
    env = apply_changes(base, {"PATH": r"C:\VC;C:\Windows", "NEW": "n"}, ["gone"])
    assert env == {"Path": r"C:\VC;C:\Windows", "KEEP": "k", "NEW": "n"}


@pytest.mark.parametrize(
    ("before", "after", "edits"),
    [
        (r"C:\Windows", r"C:\VC\bin;C:\SDK\bin;C:\Windows", ([r"C:\VC\bin", r"C:\SDK\bin"], [])),
        (r"C:\Windows;C:\Tools", r"C:\VC;c:\windows;C:\TOOLS;C:\CMake\bin;", ([r"C:\VC"], [r"C:\CMake\bin"])),
        ("C:\\inc;", "C:\\VC\\include;C:\\inc;", (["C:\\VC\\include"], [])),
        (None, r"C:\VC\include", None),  # a new variable: no old value to find
        (r"C:\Windows;C:\Tools", r"C:\Tools;C:\Windows;C:\VC", None),  # rewritten, not extended
        (r"C:\Windows", r"C:\Windows", None),
    ],
)
def test_path_edits(before: str | None, after: str, edits: tuple[list[str], list[str]] | None) -> None:
    assert path_edits(before, after) == edits


# --- decoding and sections -----------------------------------------------------------------------------


def utf16(text: str) -> bytes:
    return text.encode("utf-16-le")


def test_output_is_decoded_as_utf16_or_code_page() -> None:
    assert decode_output(utf16("USERPROFILE=C:\\Users\\Zoë 张三\r\n")) == "USERPROFILE=C:\\Users\\Zoë 张三\r\n"
    assert decode_output(b"plain ascii\r\n") == "plain ascii\r\n"
    assert "\ufffd" not in decode_output(bytes(range(0x20, 0x7F)))


def test_error_lines_are_found_even_after_bytes_that_shift_the_stream() -> None:
    stream = (
        utf16("** Visual Studio 2017 Developer Command Prompt v15.9.4\r\n")
        + b"odd bytes from a program\r\nx"  # 27 bytes: what follows is no longer 2-byte aligned
        + utf16("[ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.\r\n")
        + b"[ERROR:tool.bat] written as plain bytes\r\n"
    )
    assert error_lines(stream) == [
        "[ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.",
        "[ERROR:tool.bat] written as plain bytes",
    ]
    assert error_lines(utf16("no problems here\r\n")) == []


def test_sections_are_cut_at_marker_lines_only() -> None:
    command = f'/d /u /v:off /s /c "set && echo {MARKER} && "C:\\v.bat" x64 && echo {MARKER} && set"'
    stdout = utf16(
        "A=1\r\n"
        f"__PYTORCH_WINBUILD_COMMAND={command}\r\n"
        f"{MARKER} \r\n"
        "banner\r\n"
        f"no newline at the end{MARKER} \r\n"
        "A=2\r\n"
    )

    sections = _split_sections(stdout)

    assert sections is not None
    before, script, after = sections
    assert parse_set_output(decode_output(before)) == {"A": "1", "__PYTORCH_WINBUILD_COMMAND": command}
    assert decode_output(script) == "banner\r\nno newline at the end"
    assert after is not None and decode_output(after) == "A=2\r\n"


def test_sections_when_the_script_cut_the_line_short() -> None:
    assert _split_sections(utf16("A=1\r\n")) is None
    assert _split_sections(utf16(f"A=1\r\n{MARKER} \r\nbye\r\n")) == (utf16("A=1\r\n"), utf16("bye\r\n"), None)
    assert _split_sections(f"A=1\r\n{MARKER} \r\nbye\r\n".encode("ascii")) == (b"A=1\r\n", b"bye\r\n", None)


def test_the_error_names_the_line_and_the_toolset_to_install() -> None:
    script = utf16(
        "[ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.\r\n"
        "[ERROR:VsDevCmd.bat] *** VsDevCmd.bat encountered errors. Environment may be incomplete and/or incorrect. "
        "***\r\n"
    )
    error = _toolchain_error("cmd /s /c ...", 0, script, b"")

    assert error is not None
    assert (
        "\"[ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.\" (and 1 more [ERROR] lines) and "
        "exited with status 0" in error.message
    )
    assert error.fix is not None and "v14.11 toolset" in error.fix and "(v14.11)" in error.fix
    assert _toolchain_error("cmd", 0, utf16("** banner **\r\n"), b"") is None
    failed = _toolchain_error("cmd", 2, utf16("first\r\nlast words\r\n"), b"")
    assert failed is not None and 'exited with status 2. Its last line was "last words".' in failed.message


# --- Wine paths and the PATH search --------------------------------------------------------------------


@pytest.fixture
def real_prefix(wine_prefix) -> Path:
    """The session's Wine prefix as wineboot made it: dosdevices/c: → drive_c, z: → /."""
    return wine_prefix.path


@pytest.mark.cmd
def test_wine_paths(real_prefix: Path, tmp_path: Path) -> None:
    folder = tmp_path / "Program Files (x86)" / "Hostx64"
    folder.mkdir(parents=True)

    assert to_wine_path(folder) == "Z:" + str(folder).replace("/", "\\")
    assert from_wine_path(to_wine_path(folder), real_prefix) == folder
    assert from_wine_path(to_wine_path(folder).replace("Hostx64", "HostX64").upper(), real_prefix) == folder
    assert (
        from_wine_path(r"c:\WINDOWS\System32\CMD.EXE", real_prefix)
        == real_prefix / "drive_c" / "windows" / "system32" / "cmd.exe"
    )
    assert from_wine_path(r"C:\windows\missing.exe", real_prefix) is None
    assert from_wine_path(r"Q:\no\such\drive", real_prefix) is None
    assert from_wine_path(r"relative\path", real_prefix) is None
    assert from_wine_path(r"\\server\share\x", real_prefix) is None
    with pytest.raises(ValueError):
        to_wine_path("relative/path")


@pytest.mark.cmd
def test_program_search_follows_path_and_pathext(real_prefix: Path, tmp_path: Path) -> None:
    empty = tmp_path / "Empty (x86)"
    wrapper = tmp_path / "Wrapper"
    compiler = tmp_path / "Hostx64" / "x64"
    for folder in (empty, wrapper, compiler):
        folder.mkdir(parents=True)
    (wrapper / "cl.bat").write_bytes(b"@echo off")
    # Kept double: MSVC's cl.exe cannot be installed on Linux; the search looks at names only.
    (compiler / "CL.EXE").write_bytes(b"MZ")
    (empty / "cl.exe").mkdir()  # a folder named cl.exe is not a program
    path = f'{to_wine_path(empty)};;"{to_wine_path(compiler)}";{to_wine_path(wrapper)}'

    found = find_program("cl", {"Path": path, "PATHEXT": ".COM;.EXE"}, real_prefix)
    assert found == to_wine_path(compiler / "CL.EXE")
    assert find_program(
        "cl", {"PATH": f"{to_wine_path(wrapper)};{to_wine_path(compiler)}", "PATHEXT": ".COM;.EXE;.BAT"}, real_prefix
    ) == to_wine_path(wrapper / "cl.bat")
    assert find_program("cl.exe", {"PATH": to_wine_path(compiler)}, real_prefix) == to_wine_path(compiler / "CL.EXE")
    assert find_program("cl", {"PATH": to_wine_path(empty), "PATHEXT": ".EXE"}, real_prefix) is None
    assert find_program("cl", {"PATHEXT": ".EXE"}, real_prefix) is None


# --- how cmd is started ---------------------------------------------------------------------------------


def test_windows_gets_the_command_line_as_one_string() -> None:
    arguments = vcvars_command_line(VCVARSALL, ["x64"]).removeprefix("cmd ")
    kwargs = _invocation(arguments, [r"C:\Windows\System32\cmd.exe"], {"Path": r"C:\Windows"}, windows=True)

    assert kwargs == {
        "args": "cmd " + arguments,
        "executable": r"C:\Windows\System32\cmd.exe",
        "env": {"Path": r"C:\Windows"},
    }
    with pytest.raises(ConfigurationError):
        _invocation(arguments, ["wine", "cmd"], {}, windows=True)


def test_wine_gets_only_words_it_passes_unchanged() -> None:
    arguments = vcvars_command_line(VCVARSALL, ["x64"]).removeprefix("cmd ")
    base = {"Path": r"C:\Tools & Co (x86);C:\windows\system32", "WINEPREFIX": "/tmp/p", "KEEP": "1"}

    kwargs = _invocation(arguments, ["/usr/bin/wine", "cmd"], base, windows=False)

    # Wine rebuilds the command line from argv and escapes quotes as \", which cmd does not
    # understand; words without quotes or spaces pass through as they are.
    assert kwargs["args"][:2] == ["/usr/bin/wine", "cmd"]
    assert not any('"' in word or " " in word for word in kwargs["args"])
    env = kwargs["env"]
    assert env["__PYTORCH_WINBUILD_COMMAND"] == arguments
    assert env["__PYTORCH_WINBUILD_PATH"] == base["Path"]
    assert env["PATH"] == os.environ.get("PATH", os.defpath)  # for finding wine itself
    assert "Path" not in env
    assert (env["WINEPREFIX"], env["KEEP"]) == ("/tmp/p", "1")
