"""The .bat quoting, proven by Wine's cmd with delayed expansion off (/v:off) and on (/v:on).

Each script sets many hostile values at once (Wine starts slowly) and `set` lists what cmd
holds afterwards, written as UTF-16 by `cmd /u`, so no code page stands between cmd and the
comparison. Two interpreters take part:

- Wine's cmd as installed: it reads a script in the OEM code page (437) and ignores `chcp`, as
  a cmd without a console does, and its delayed expansion drops every `!`, escaped or not. The
  script's probes must notice both and stop (exit 1, a message, no value set) rather than set
  changed values.
- the same cmd.exe, copied with a manifest that gives it the UTF-8 code page (as Windows' "Use
  Unicode UTF-8 for worldwide language support" does): it reads the script as UTF-8, as a
  Windows console does after the script's `chcp 65001`. Wine 8 cannot show that switch itself.

What no Wine can show is real cmd's delayed expansion turning `^!` into `!`: there the script's
own probe decides at run time (see pytorch_winbuild/text/quoting_bat.py).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import WINE_DEFAULT_PATH, wine_cmd  # tests/cmd/conftest.py
from support import HOSTS_DIR, run_invoke
from test_quoting import HOSTILE, hostile_changes, windows_plan

from pytorch_winbuild.faces.render import render_bat
from pytorch_winbuild.facts.cmd_line import decode_output, to_wine_path
from pytorch_winbuild.planning.plan_model import EnvChange
from pytorch_winbuild.text import quoting_bat as bat

if TYPE_CHECKING:
    from conftest import WinePrefix

pytestmark = pytest.mark.cmd

UTF8_MANIFEST = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<assembly xmlns="urn:schemas-microsoft-com:asm.v1" manifestVersion="1.0">
  <application xmlns="urn:schemas-microsoft-com:asm.v3">
    <windowsSettings>
      <activeCodePage xmlns="http://schemas.microsoft.com/SMI/2019/WindowsSettings">UTF-8</activeCodePage>
    </windowsSettings>
  </application>
</assembly>
"""
BANG_REFUSED = "with delayed expansion on, this cmd drops the exclamation marks"
UTF8_REFUSED = "this cmd does not read the script as UTF-8"
# Wine's cmd nests quotes ("quotes within quotes are fun!", programs/cmd/wcmdmain.c) where real
# cmd toggles them, so after `say "hi` it keeps a `^` that real cmd removes. tests/test_quoting.py
# checks this value against a model of real cmd instead.
WINE = {key: value for key, value in HOSTILE.items() if key != "quote_bang"}
ASCII_PLAIN = {key: value for key, value in WINE.items() if value.isascii() and "!" not in value}
ASCII_BANG = {key: value for key, value in WINE.items() if value.isascii() and "!" in value}
NON_ASCII = {key: value for key, value in WINE.items() if not value.isascii() and "!" not in value}


@dataclass(frozen=True)
class Run:
    exit_code: int
    env: dict[str, str]  # names upper-cased
    stderr: str


@pytest.fixture(scope="session")
def interpreters(wine_prefix: WinePrefix) -> dict[str, str]:
    """The command interpreters by kind: Wine's own cmd, and a copy whose code page is UTF-8."""
    folder = wine_prefix.path / "drive_c" / "winbuild-utf8"
    folder.mkdir(exist_ok=True)
    shutil.copyfile(wine_prefix.path / "drive_c" / "windows" / "system32" / "cmd.exe", folder / "cmd.exe")
    (folder / "cmd.exe.manifest").write_text(UTF8_MANIFEST, encoding="utf-8")
    return {"oem": "cmd", "utf8": "C:\\winbuild-utf8\\cmd.exe"}


@pytest.fixture(scope="session")
def run_bat(
    wine_prefix: WinePrefix, interpreters: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., Run]:
    """`run_bat(text, kind, mode, before="")`: write `text` as UTF-8, run `call script && set` in
    that interpreter with /v:<mode> after the commands in `before`, and read back its variables."""
    folder = tmp_path_factory.mktemp("bat")

    def run(text: str, kind: str, mode: str, before: str = "") -> Run:
        script = folder / f"env-{len(list(folder.iterdir()))}.bat"
        script.write_bytes(text.encode("utf-8"))
        inner = f'{interpreters[kind]} /d /u /v:{mode} /s /c "{before}call "{to_wine_path(script)}" && set"'
        completed = wine_cmd(f'/d /s /c "{inner}"', wine_prefix.windows_env())
        env = {}
        for line in decode_output(completed.stdout).splitlines():
            name, sep, value = line.partition("=")
            if sep and name:
                env.setdefault(name.upper(), value)
        return Run(completed.returncode, env, decode_output(completed.stderr))

    return run


def assert_exact(run: Run, values: dict[str, str]) -> None:
    assert run.exit_code == 0, run.stderr
    for key, value in values.items():
        assert run.env.get(f"HOSTILE_{key.upper()}") == value, key
    assert not [name for name in run.env if name.startswith("__WINBUILD_")], "helper variables left behind"


def assert_refused(run: Run, message: str) -> None:
    assert run.exit_code == 1
    assert message in run.stderr
    assert not [name for name in run.env if name.startswith(("HOSTILE_", "__WINBUILD_"))]


@pytest.mark.parametrize("kind", ["oem", "utf8"])
@pytest.mark.parametrize("mode", ["off", "on"])
def test_plain_ascii_values_survive_everywhere(run_bat, kind: str, mode: str) -> None:
    lists = {key: value for key, value in ASCII_PLAIN.items() if value.count('"') % 2 == 0}
    changes = hostile_changes(ASCII_PLAIN) + tuple(
        EnvChange(f"LIST_{key.upper()}", value, "prepend", "list") for key, value in lists.items()
    )
    text = render_bat(windows_plan(changes))
    assert "__WINBUILD_" not in text and "chcp" not in text  # nothing here needs the helpers
    seed = "".join(f'set "LIST_{key.upper()}=C:\\old" && ' for key in lists)
    run = run_bat(text, kind, mode, before=seed)
    assert_exact(run, ASCII_PLAIN)
    for key, value in lists.items():
        assert run.env[f"LIST_{key.upper()}"] == value + ";C:\\old", key


@pytest.mark.parametrize("kind", ["oem", "utf8"])
@pytest.mark.parametrize("mode", ["off", "on"])
def test_exclamation_marks_survive_or_the_script_stops(run_bat, kind: str, mode: str) -> None:
    run = run_bat(render_bat(windows_plan(hostile_changes(ASCII_BANG))), kind, mode)
    if mode == "off":
        assert_exact(run, ASCII_BANG)
    else:
        assert_refused(run, BANG_REFUSED)  # Wine's delayed expansion cannot keep a "!"; real cmd's can


@pytest.mark.parametrize("kind", ["oem", "utf8"])
@pytest.mark.parametrize("mode", ["off", "on"])
def test_non_ascii_values_survive_or_the_script_stops(run_bat, kind: str, mode: str) -> None:
    run = run_bat(render_bat(windows_plan(hostile_changes(NON_ASCII))), kind, mode)
    if kind == "utf8":
        assert_exact(run, NON_ASCII)
    else:
        assert_refused(run, UTF8_REFUSED)


def test_every_value_at_once_survives_a_utf8_cmd_without_delayed_expansion(run_bat) -> None:
    assert_exact(run_bat(render_bat(windows_plan(hostile_changes(WINE))), "utf8", "off"), WINE)


def test_a_failing_vcvars_call_that_needs_the_helpers_cleans_up(run_bat, tmp_path: Path) -> None:
    folder = tmp_path / "VS! Jürgen & Co (x86)"
    folder.mkdir()
    (folder / "vcvarsall.bat").write_bytes(b"@exit /b 1\r\n")
    text = bat.script(
        ["rem test"],
        ["", bat.call_line(to_wine_path(folder / "vcvarsall.bat"), ["x64"])],
        ["", bat.set_line("HOSTILE_AFTER", "a!b")],
    )
    assert text.index("__WINBUILD_BANG=!") < text.index("call ") < text.index("if errorlevel 1 (")
    run = run_bat(text, "utf8", "off")
    assert run.exit_code == 1
    assert not [name for name in run.env if name.startswith(("HOSTILE_", "__WINBUILD_"))]


# Kept double: Visual Studio's vcvarsall.bat needs a Visual Studio install, which cannot exist on Linux.
STAND_IN_VCVARSALL = r"""@echo off
set "STANDIN_SCRIPT=%~f0"
set "STANDIN_ARGS=%*"
set "PATH=C:\standin\bin;%PATH%"
exit /b 0
"""


def test_invoke_env_bat_end_to_end(run_bat, tmp_path: Path) -> None:
    """`invoke env --format bat --output` for a machine whose Visual Studio folder and cache folder
    hold `!`, `&`, `%`, `^`, parentheses and non-ASCII text: the script gives exactly the final values
    of `invoke env --format json` (whose `%NAME%` stands for the value before the script)."""
    vs = tmp_path / "Program Files (x86)" / "VS! Jürgen & Co"
    build_dir = vs / "VC" / "Auxiliary" / "Build"
    build_dir.mkdir(parents=True)
    (build_dir / "vcvarsall.bat").write_bytes(STAND_IN_VCVARSALL.replace("\n", "\r\n").encode("ascii"))
    data = json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))
    data["visual_studio"][0]["path"] = to_wine_path(vs)
    data["visual_studio"][0]["vcvars"] = {"vcvarsall.bat": to_wine_path(build_dir / "vcvarsall.bat")}
    host = tmp_path / "host.json"
    host.write_text(json.dumps(data), encoding="utf-8")
    cache = to_wine_path(tmp_path / "R&D 100% ^caret! Müller 日本")
    flags = [
        "--host",
        str(host),
        "--cuda",
        "9.0",
        "--pytorch-version",
        "1.0.1",
        "--compiler-cache",
        "clcache",
        "--cache-dir",
        cache,
    ]
    script = tmp_path / "build_env.bat"
    written = run_invoke("env", *flags, "--format", "bat", "--output", str(script))
    assert written.returncode == 0, written.stderr
    final = json.loads(run_invoke("env", *flags, "--format", "json").stdout)["env"]
    text = script.read_bytes().decode("utf-8")

    run = run_bat(text, "utf8", "off")
    assert run.exit_code == 0, run.stderr
    # cmd keeps the blank before the call's log redirection in `%*`; vcvarsall splits its arguments at
    # blanks, so that blank is no argument.
    assert (run.env["STANDIN_SCRIPT"], run.env["STANDIN_ARGS"].rstrip(" ")) == (
        to_wine_path(build_dir / "vcvarsall.bat"),
        "x64 -vcvars_ver=14.11",
    )
    before = {"PATH": "C:\\standin\\bin;" + WINE_DEFAULT_PATH}
    for name, value in final.items():
        assert run.env.get(name.upper()) == value.replace(f"%{name}%", before.get(name, "")), name
    assert run.env["CLCACHE_DIR"] == cache + "\\clcache"

    assert_refused(run_bat(text, "utf8", "on"), BANG_REFUSED)
    assert_refused(run_bat(text, "oem", "off"), UTF8_REFUSED)
