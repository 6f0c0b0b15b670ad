"""Quoting for the emitted scripts: refusals, the PowerShell rules, and sh run by real shells.

The .bat side runs under Wine's cmd in tests/cmd/test_quoting_real.py. PowerShell cannot run
here: `apt-cache policy powershell` prints nothing (Debian has no such package, and Microsoft's
own package feed is out of reach), so the .ps1 lines are read back by a reader
written from the PowerShell language specification (section 2.3.5.2, verbatim string literals:
a single-quote-character is any of U+0027, U+2018, U+2019, U+201A, U+201B, and two of them
stand for one), which checks that each value is one literal that ends where the line ends.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from support import BIDI, HOSTS_DIR, plan_options, run_invoke

from pytorch_winbuild.builder.environment import build_environment
from pytorch_winbuild.builder.settings import RunEnv
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces.render import render_bat, render_ps1, render_sh
from pytorch_winbuild.facts.model import facts_from_dict, load_facts
from pytorch_winbuild.facts.vcvars import vcvars_command_line
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import EnvChange, Plan
from pytorch_winbuild.planning.request import PlanRequest
from pytorch_winbuild.text import quoting_bat as bat
from pytorch_winbuild.text import quoting_ps1 as ps1
from pytorch_winbuild.text import quoting_sh as sh

# Values that break naive quoting in at least one of cmd, PowerShell and sh.
HOSTILE = {
    "bang": "a!b",
    "bang_pair": "!PATH!",
    "caret_bang": "x^y!z",
    "percent": "100%",
    "percent_var": "%PATH%",
    "percent_tilde": "%~dp0",
    "caret": "^",
    "caret_end": "C:\\a^",
    "amp": "a&b",
    "pipe": "a|b",
    "redirect": "a<b>c",
    "parens": "C:\\Program Files (x86)",
    "double_quotes": '"q"',
    "odd_quote": 'a"b&c',
    "quote_bang": 'say "hi!" ^ a"b!^(x)',
    "single_quotes": "'s'",
    "smart_quotes": "it’s ‘x’ ‚y‛",
    "juergen": "C:\\Users\\Jürgen Müller",
    "japanese": "日本語",
    "euro": "€ 5",
    "subshell": "$(touch x)",
    "backticks": "`touch x`",
    "semicolon": "a;b",
    "trailing_backslash": "C:\\dir\\",
    "spaces": " a  b ",
    "dollar": "$HOME ${PATH}",
    "hash": "#x",
    "equals": "a=b",
    "star": "*?[a]",
    "everything": "R&D 100% ^x! \"Jürgen\" (x86) 's' ; | < > `$(x)` 日本\\",
}
CONTROL = ["\n", "\r", "\r\n", "\x00", "\t", "\x1b[31m", "\x7f", "\x85", "\x08"]
KNOWLEDGE = load_knowledge()


def hostile_changes(values: dict[str, str]) -> tuple[EnvChange, ...]:
    return tuple(
        EnvChange(f"HOSTILE_{key.upper()}", value, "set", f"hostile value {key}") for key, value in values.items()
    )


def windows_plan(changes: tuple[EnvChange, ...]) -> Plan:
    """A real Windows plan whose changes are replaced: no vcvars call, so cmd can run it anywhere."""
    plan = make_plan(
        PlanRequest(plan_options(cuda="cpu", pytorch_version="2.6", cache_dir="C:\\c")),
        load_facts(HOSTS_DIR / "vs2019-vs2022-cuda12.json"),
        KNOWLEDGE,
    )
    return replace(plan, vcvars=None, changes=changes)


def linux_plan(changes: tuple[EnvChange, ...]) -> Plan:
    data = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    data.update(os="linux", visual_studio=[])
    return replace(
        make_plan(PlanRequest(plan_options(cuda="cpu", cache_dir="/tmp/c")), facts_from_dict(data), KNOWLEDGE),
        changes=changes,
    )


# --- control characters: refused everywhere, naming the variable, never showing the value -----------


@pytest.mark.parametrize("control", CONTROL, ids=ascii)
@pytest.mark.parametrize("module", [bat, ps1, sh], ids=["bat", "ps1", "sh"])
def test_every_format_refuses_control_characters_naming_the_variable(module, control: str) -> None:
    for line in (
        lambda: module.set_line("CUDA_PATH", f"C:\\cuda{control}secret"),
        lambda: module.prepend_line("CUDA_PATH", f"x{control}secret"),
    ):
        with pytest.raises(ConfigurationError) as caught:
            line()
        assert caught.value.exit_code == 2
        assert caught.value.message.startswith("CUDA_PATH holds the control character U+")
        assert "secret" not in caught.value.message
    with pytest.raises(ConfigurationError, match=r"^the reason given for X holds"):
        module.comment(f"ok{control}echo INJECTED", "the reason given for X")


# Unicode's bidirectional controls (support.BIDI, UAX #9): an override or isolate makes an editor show a
# line in another order than the interpreter reads it (Trojan Source, CVE-2021-42574).


@pytest.mark.parametrize("bidi", list(BIDI), ids=lambda char: f"U+{ord(char):04X}")
@pytest.mark.parametrize("module", [bat, ps1, sh], ids=["bat", "ps1", "sh"])
def test_every_format_refuses_bidi_controls_naming_the_variable(module, bidi: str) -> None:
    expected = f"CUDA_PATH holds the bidirectional control character U+{ord(bidi):04X} at position 8,"
    for line in (
        lambda: module.set_line("CUDA_PATH", f"C:\\cuda{bidi}secret"),
        lambda: module.prepend_line("CUDA_PATH", f"C:\\cuda{bidi}secret"),
    ):
        with pytest.raises(ConfigurationError) as caught:
            line()
        assert caught.value.exit_code == 2
        assert caught.value.message.startswith(expected)
        assert "secret" not in caught.value.message
    with pytest.raises(ConfigurationError, match=r"^the reason given for X holds the bidirectional control"):
        module.comment(f"ok{bidi} echo INJECTED", "the reason given for X")


def test_the_build_runner_refuses_bidi_controls_as_the_scripts_do(tmp_path: Path) -> None:
    plan = windows_plan((EnvChange("CUDA_PATH", "C:\\cuda\u202e", "set", "test"),))
    with pytest.raises(ConfigurationError, match=r"^CUDA_PATH holds the bidirectional control character U[+]202E"):
        build_environment(plan, tmp_path, (), base={})


@pytest.mark.parametrize("module", [bat, ps1, sh], ids=["bat", "ps1", "sh"])
@pytest.mark.parametrize("name", ["A B", "A=B", "1A", "A%B", "A!B", "A;B", "A$B", ""])
def test_every_format_writes_only_plain_names(module, name: str) -> None:
    with pytest.raises(ConfigurationError, match="is not a variable name"):
        module.set_line(name, "x")


@pytest.mark.parametrize("render", [render_bat, render_ps1])
def test_a_remark_cannot_carry_a_command_into_the_script(render) -> None:
    plan = windows_plan((EnvChange("X", "1", "set", "reason\r\necho INJECTED"),))
    with pytest.raises(ConfigurationError, match=r"^the reason given for X holds the control character U[+]000D"):
        render(plan)


def test_the_build_runner_refuses_what_the_scripts_refuse(tmp_path: Path) -> None:
    plan = windows_plan((EnvChange("CUDA_PATH", "C:\\cuda\r\necho INJECTED", "set", "test"),))
    with pytest.raises(ConfigurationError, match=r"^CUDA_PATH holds the control character U[+]000D"):
        build_environment(plan, tmp_path, (), base={})
    with pytest.raises(ConfigurationError, match=r"^SCCACHE_DIR holds the control character U[+]0000"):
        build_environment(windows_plan(()), tmp_path, (RunEnv("SCCACHE_DIR", "C:\\s\x00", "test"),), base={})


def test_vcvars_capture_refuses_every_control_character() -> None:
    with pytest.raises(ConfigurationError, match=r"^the vcvars argument holds the control character U[+]001B"):
        vcvars_command_line("C:\\vs\\vcvarsall.bat", ["x64\x1b"])


# --- .bat text ---------------------------------------------------------------------------------------


def test_bat_plain_values_stay_readable() -> None:
    assert (
        bat.set_line("CLCACHE_DIR", "C:\\R&D 100% (x86)\\it's cache")
        == 'set "CLCACHE_DIR=C:\\R&D 100%% (x86)\\it\'s cache"'
    )
    assert bat.set_line("X", 'a"b&c"d') == 'set "X=a"b^&c"d"'  # the operator after an odd quote is escaped
    assert bat.set_line("X", "x^y!z") == 'set "X=x%__WINBUILD_CARET%y%__WINBUILD_BANG%z"'


def test_bat_prepend_keeps_the_old_value_inside_the_quotes() -> None:
    assert bat.prepend_line("PATH", "C:\\a b") == 'set "PATH=C:\\a b;%PATH%"'
    with pytest.raises(ConfigurationError, match="odd number of double quotes"):
        bat.prepend_line("PATH", 'C:\\a"b')


@pytest.mark.parametrize("text", ['C:\\odd"name\\vcvarsall.bat', "C:\\100%\\vcvarsall.bat", "C:\\a^b\\vcvarsall.bat"])
def test_bat_call_refuses_what_call_changes(text: str) -> None:
    with pytest.raises(ConfigurationError, match="which cmd's CALL cannot pass on unchanged"):
        bat.call_line(text, ["x64"])


def test_bat_remarks_keep_percent_and_the_next_line() -> None:
    assert bat.comment("100% sure, %~dp0", "r") == "rem 100%% sure, %%~dp0"
    assert bat.comment("ends in ^", "r") == "rem ends in ^ "


def test_bat_without_special_values_has_no_prologue_and_ascii_remarks() -> None:
    plan = make_plan(
        PlanRequest(plan_options(cuda="9.0", pytorch_version="1.0.1", cache_dir="C:\\c")),
        load_facts(HOSTS_DIR / "vs2017-cuda90-cuda100.json"),
        KNOWLEDGE,
    )
    text = render_bat(plan)
    assert text.isascii()  # the plan's own "→" in a remark is written "->"
    assert "__WINBUILD_BANG" not in text and "__WINBUILD_CODE_PAGE" not in text and "chcp" not in text
    assert 'x64 -vcvars_ver=14.11 >"%__WINBUILD_VCVARS_LOG%" 2>&1\r\nif errorlevel 1 (\r\n' in text
    assert text.endswith("\r\nexit /b 0\r\n")


# A model of real cmd's parsing of `set` lines, written from the documented phases (percent
# expansion; carets and quotes; delayed expansion, where `^` escapes even inside quotes and a
# lone `!` is dropped). Wine's delayed expansion differs (it drops every `!`), so this is what
# checks the /v:on writing of `!` and `^`, including after a value's own odd quote.


def _model_line(line: str, env: dict[str, str], delayed: bool) -> None:
    """Run one `[if not defined NAME ]set "NAME=..."` line the way cmd.exe does."""
    if line.startswith("if not defined "):
        name, _, line = line[len("if not defined ") :].partition(" ")
        if name in env:
            return
    text = re.sub(r"%%|%([^%]*)%", lambda m: "%" if m.group(0) == "%%" else env.get(m.group(1), ""), line)
    out, inside, chars = [], False, iter(text)
    for char in chars:  # carets and quotes
        if char == '"':
            inside = not inside
        elif char == "^" and not inside:
            char = next(chars, "")
        out.append(char)
    text = "".join(out)
    if delayed and "!" in text:
        out, index = [], 0
        while index < len(text):
            char, index = text[index], index + 1
            if char == "^":
                out.append(text[index : index + 1])
                index += 1
            elif char == "!":
                end = text.find("!", index)
                if end >= 0:  # !NAME! is expanded; a lone ! is dropped
                    out.append(env.get(text[index:end], ""))
                    index = end + 1
            else:
                out.append(char)
        text = "".join(out)
    assert text.startswith('set "') and text.count('"') >= 2, line
    name, _, value = text[5 : text.rindex('"')].partition("=")
    if value:
        env[name] = value
    else:
        env.pop(name, None)


@pytest.mark.parametrize("delayed", [False, True], ids=["v:off", "v:on"])
def test_bat_lines_give_the_value_back_in_a_model_of_real_cmd(delayed: bool) -> None:
    text = bat.script(
        [],
        [],
        [
            line
            for key, value in HOSTILE.items()
            for line in (
                bat.set_line(f"H_{key}", value),
                bat.prepend_line(f"L_{key}", value) if value.count('"') % 2 == 0 else "",
            )
        ],
    )
    env: dict[str, str] = {f"L_{key}": "old" for key in HOSTILE}
    probes = []
    for line in text.split(bat.NEWLINE):
        if line.startswith(("set ", "if not defined ")):
            _model_line(line, env, delayed)
            probes += [env["__WINBUILD_PROBE"]] if "__WINBUILD_PROBE" in env else []
    assert probes == ["a^!b", "€"]  # the script's own checks pass: real cmd keeps "!" in both modes
    assert not [name for name in env if name.startswith("__WINBUILD_")]
    for key, value in HOSTILE.items():
        assert env[f"H_{key}"] == value, key
        if value.count('"') % 2 == 0:
            assert env[f"L_{key}"] == value + ";old", key


# --- .ps1 --------------------------------------------------------------------------------------------

_PS_SINGLE_QUOTES = "'\u2018\u2019\u201a\u201b"


def read_verbatim_literal(text: str, start: int) -> tuple[str, int]:
    """PowerShell's verbatim-string-literal at text[start]: (its value, the index after it)."""
    assert text[start] in _PS_SINGLE_QUOTES, text[start:]
    value, index = [], start + 1
    while True:
        char = text[index]
        if char in _PS_SINGLE_QUOTES:
            if index + 1 < len(text) and text[index + 1] in _PS_SINGLE_QUOTES:
                value.append(text[index + 1])
                index += 2
                continue
            return "".join(value), index + 1
        value.append(char)
        index += 1


@pytest.mark.parametrize("key", HOSTILE)
def test_ps1_value_is_one_verbatim_literal_that_ends_the_line(key: str) -> None:
    value = HOSTILE[key]
    line = ps1.set_line("X", value)
    prefix = "$env:X = "
    assert line.startswith(prefix)
    read, end = read_verbatim_literal(line, len(prefix))
    assert (read, end) == (value, len(line))
    line = ps1.prepend_line("PATH", value)
    read, end = read_verbatim_literal(line, len(prefix.replace("X", "PATH")))
    assert (read, line[end:]) == (value + ";", " + $env:PATH")


def test_ps1_with_non_ascii_text_starts_with_a_bom() -> None:
    text = render_ps1(windows_plan(hostile_changes(HOSTILE)))
    assert text.startswith("\ufeff# Build environment") and text.encode("utf-8").startswith(b"\xef\xbb\xbf")
    assert not render_ps1(windows_plan(hostile_changes({"amp": "a&b"}))).startswith("\ufeff")


def test_invoke_env_writes_a_ps1_with_non_ascii_text_as_utf8_with_bom(tmp_path: Path) -> None:
    script = tmp_path / "build_env.ps1"
    result = run_invoke(
        "env",
        "--host",
        str(HOSTS_DIR / "vs2017-cuda90-cuda100.json"),
        "--cuda",
        "9.0",
        "--format",
        "ps1",
        "--cache-dir",
        "C:\\Users\\Jürgen’s cache",
        "--output",
        str(script),
    )
    assert result.returncode == 0, result.stderr
    data = script.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf# Build environment")
    assert "'C:\\Users\\Jürgen’’s cache\\deps\\".encode() in data


# --- .sh, run by bash and dash -----------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "dash"])
def test_sh_values_survive_a_real_shell_byte_for_byte(tmp_path: Path, shell: str) -> None:
    changes = hostile_changes(HOSTILE) + tuple(
        EnvChange(f"LIST_{key.upper()}", value, "prepend", "list") for key, value in HOSTILE.items()
    )
    script = tmp_path / "build_env.sh"
    script.write_text(render_sh(linux_plan(changes)), encoding="utf-8", newline="")
    names = [change.name for change in changes]
    reader = ". ./build_env.sh && printf '%s\\0' " + " ".join(f'"${name}"' for name in names)
    # every list but two already holds "old"; those two take the value alone, with no ":"
    seeded = {name: "old" for name in names if name.startswith("LIST_") and name not in ("LIST_BANG", "LIST_EURO")}
    result = subprocess.run(
        [shell, "-c", reader],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **seeded},
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    got = dict(zip(names, result.stdout.decode("utf-8").split("\0"), strict=False))  # printf leaves a last, empty field
    for change in changes:
        expected = change.value + (":old" if change.name in seeded else "")
        assert got[change.name] == expected, change.name
    assert sorted(path.name for path in tmp_path.iterdir()) == ["build_env.sh"]  # nothing ran: no file x


# --- through the real CLI: exit 2, one paragraph, nothing written -----------------------------------


def _facts_with(tmp_path: Path, change) -> str:
    data = json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "host.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("fmt", ["bat", "ps1"])
@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("cache_dir_flag", "CLCACHE_DIR holds the control character U+000D"),
        ("vs_product", "the Visual Studio instance's name holds the control character U+000D"),
        ("cuda_path", "CUDA_PATH holds the control character U+001B"),
    ],
)
def test_cli_refuses_control_characters_from_flags_and_facts(tmp_path: Path, fmt: str, source: str, named: str) -> None:
    args = ["env", "--cuda", "9.0", "--format", fmt, "--compiler-cache", "clcache"]
    if source == "cache_dir_flag":
        args += ["--host", str(HOSTS_DIR / "vs2017-cuda90-cuda100.json"), "--cache-dir", "C:\\c\r\necho INJECTED"]
    elif source == "vs_product":
        args += [
            "--host",
            _facts_with(tmp_path, lambda d: d["visual_studio"][0].update(product="BuildTools\r\necho INJECTED")),
        ]
    else:
        args += ["--host", _facts_with(tmp_path, lambda d: d["cuda"][0].update(path="C:\\CUDA\x1b[2J"))]
    result = run_invoke(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"configuration error: {named}")
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_refuses_a_control_character_in_an_sh_script() -> None:
    result = run_invoke("env", "--format", "sh", "--cuda", "cpu", "--cache-dir", "/tmp/c\nexport INJECTED=1")
    assert result.returncode == 2 and result.stdout == ""
    assert "holds the control character U+000A at position 7" in result.stderr and "INJECTED" not in result.stderr
