"""What the faces print for a person never acts on the terminal, whatever a facts file, a flag or a server says.

Hostile values go through the real command line (`python -m invoke ...`): escape sequences as
ECMA-48 and xterm define them (CSI is ESC [, SGR 31 sets red; OSC is ESC ], `0;` sets the window
title, BEL ends it), a CR LF that would start a line of its own, and Unicode's bidirectional
controls (UAX #9). Nothing of them may reach stdout or stderr raw, and the value must still be
there to read, as escapes. Machine formats (JSON) keep the exact data.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import unicodedata
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support import BIDI, HOSTS_DIR, REPO_ROOT, run_invoke

from pytorch_winbuild.text.terminal_text import terminal_json, terminal_lines, terminal_safe

# What a terminal acts on: C0 controls but LF (TAB is harmless), DEL, C1 (8-bit CSI is U+009B), bidi.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(BIDI) + "]")

# OSC 0 (window title, ended by BEL), then CSI 31 m (SGR: red), as a terminal receives them.
ESCAPES = "\x1b]0;title\x07\x1b[31mRED"
ESCAPES_SHOWN = "\\x1b]0;title\\x07\\x1b[31mRED"
NEWLINE = "\r\nset EVIL=1"
NEWLINE_SHOWN = "\\x0d\\x0aset EVIL=1"
RLO = "\u202eexe.cpp"
RLO_SHOWN = "\\u202eexe.cpp"


@pytest.mark.parametrize("char", list(BIDI), ids=lambda char: f"U+{ord(char):04X}")
def test_bidi_controls_are_shown_as_escapes(char: str) -> None:
    assert unicodedata.name(char) == BIDI[char]  # the test's list is Unicode's
    shown = f"\\u{ord(char):04x}"
    assert terminal_safe(f"a{char}b") == f"a{shown}b"
    assert terminal_safe(f"a{char}b", keep="") == f"a{shown}b"
    assert terminal_safe(f"a{shown}b") == f"a{shown}b"  # idempotent
    assert json.loads(terminal_json({"k": f"a{char}b"})) == {"k": f"a{char}b"}
    assert char not in terminal_json({"k": f"a{char}b"})


def test_terminal_lines_keep_every_line_one_line() -> None:
    text = terminal_lines(["a" + NEWLINE, "b\tc" + ESCAPES], show_sequences=True)
    assert text == "a" + NEWLINE_SHOWN + "\nb\tc" + ESCAPES_SHOWN
    assert terminal_lines(["b" + ESCAPES]) == "bRED"  # a program's colours are removed


@pytest.fixture(scope="module")
def hostile_facts(tmp_path_factory: pytest.TempPathFactory) -> str:
    data = json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))
    data["visual_studio"][0]["path"] += ESCAPES
    data["cuda"][0]["path"] += NEWLINE
    data["cache_dir"] += ESCAPES + RLO
    data["python"]["executable"] += NEWLINE + RLO
    data["gpus"][0]["name"] += ESCAPES + RLO
    path = tmp_path_factory.mktemp("facts") / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def assert_safe(done: subprocess.CompletedProcess[str]) -> str:
    output = done.stdout + done.stderr
    assert not RAW.search(output), repr(RAW.search(output))
    assert "Traceback" not in output
    assert not any(line.startswith("set EVIL") for line in output.splitlines())  # no faked line
    return output


def test_hostile_facts_are_shown_escaped_by_doctor(hostile_facts: str) -> None:
    done = run_invoke("doctor", "--host", hostile_facts)
    assert done.returncode == 0, done.stderr
    output = assert_safe(done)
    assert NEWLINE_SHOWN in output and RLO_SHOWN in output
    assert f"BuildTools{ESCAPES_SHOWN}" in output and f"1080 Ti{ESCAPES_SHOWN}{RLO_SHOWN}" in output


@pytest.fixture(scope="module")
def hostile_plan_facts(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Hostile values only where a plan shows them but prints no command with them (a command with a
    control character is refused: see test_printed_commands.py)."""
    data = json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))
    data["cuda"][0]["path"] += NEWLINE
    data["python"]["executable"] += NEWLINE + RLO
    data["gpus"][0]["name"] += ESCAPES + RLO
    path = tmp_path_factory.mktemp("facts") / "hostile-plan.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "args",
    [["build", "--dry-run", "--cuda", "9.0"], ["env", "--cuda", "9.0"], ["env", "--cuda", "9.0", "--format", "table"]],
    ids=["build-dry-run", "env", "env-table"],
)
def test_hostile_facts_are_shown_escaped_in_plans(hostile_plan_facts: str, hostile_facts: str, args: list[str]) -> None:
    done = run_invoke(*args, "--host", hostile_plan_facts)
    assert done.returncode == 0, done.stderr
    output = assert_safe(done)
    assert NEWLINE_SHOWN in output and RLO_SHOWN in output
    refused = run_invoke(*args, "--host", hostile_facts)  # the cache folder and VS path reach printed commands
    assert refused.returncode == 2 and "control character U+001B" in assert_safe(refused)


@pytest.mark.parametrize(
    "args", [["doctor", "--json"], ["env", "--cuda", "9.0", "--format", "json"]], ids=["doctor", "env"]
)
def test_json_keeps_the_exact_values(hostile_facts: str, args: list[str]) -> None:
    done = run_invoke(*args, "--host", hostile_facts)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\r" not in done.stdout  # JSON escapes C0 itself
    text = json.dumps(json.loads(done.stdout), ensure_ascii=False)
    assert json.dumps(ESCAPES + RLO, ensure_ascii=False)[1:-1] in text
    assert json.dumps(NEWLINE, ensure_ascii=False)[1:-1] in text


def test_a_hostile_cache_dir_flag_is_refused_and_said_safely() -> None:
    host = str(HOSTS_DIR / "vs2017-cuda90-cuda100.json")
    done = run_invoke("build", "--dry-run", "--cuda", "cpu", "--host", host, "--cache-dir", "C:\\x\x1b]0;T\x07")
    assert done.returncode == 2  # it would reach the printed fetch-deps command: refused, and said safely
    assert "the cache folder holds the control character U+001B" in assert_safe(done)


def test_the_wrote_line_shows_a_hostile_file_name_escaped(tmp_path: Path) -> None:
    target = tmp_path / f"env{ESCAPES}{RLO}.bat"
    done = run_invoke(
        "env", "--cuda", "cpu", "--host", str(HOSTS_DIR / "cpu-only.json"), "--format", "bat", "--output", str(target)
    )
    assert done.returncode == 0, done.stderr
    assert f"env{ESCAPES_SHOWN}{RLO_SHOWN}.bat" in assert_safe(done)
    assert target.read_text(encoding="utf-8").startswith("@echo off")  # the file itself is the exact script


def test_fetch_and_clean_listings_show_a_hostile_cache_dir_escaped(tmp_path: Path) -> None:
    folder = tmp_path / f"cache{ESCAPES}{RLO}"
    listing = run_invoke("fetch-deps", "--dry-run", "--cuda", "cpu", "--cache-dir", str(folder))
    assert listing.returncode == 0, listing.stderr
    assert f"cache{ESCAPES_SHOWN}{RLO_SHOWN}" in assert_safe(listing)
    cleaned = run_invoke("clean", "--deps", "--cache-dir", str(folder))
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"nothing to remove in {tmp_path}/cache{ESCAPES_SHOWN}{RLO_SHOWN}" in assert_safe(cleaned)


def test_error_paragraphs_and_diagnose_show_bidi_controls(tmp_path: Path) -> None:
    missing = run_invoke("doctor", "--host", str(tmp_path / f"host{RLO}.json"))
    assert missing.returncode == 2
    assert f"host{RLO_SHOWN}.json" in assert_safe(missing)
    log = tmp_path / "build.log"
    log.write_text(f"a{RLO}(1): fatal error C1083: Cannot open include file: 'x.h'\n", encoding="utf-8")
    diagnosed = run_invoke("diagnose", str(log))
    assert diagnosed.returncode == 0, diagnosed.stderr
    assert f"a{RLO_SHOWN}(1): fatal error C1083" in assert_safe(diagnosed)


@pytest.mark.parametrize("fmt", ["bat", "ps1"])
def test_scripts_refuse_a_bidi_control_from_a_facts_file(tmp_path: Path, fmt: str) -> None:
    data = json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))
    data["cuda"][0]["path"] += RLO
    host = tmp_path / "host.json"
    host.write_text(json.dumps(data), encoding="utf-8")
    done = run_invoke("env", "--cuda", "9.0", "--format", fmt, "--host", str(host))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("configuration error: CUDA_PATH holds the bidirectional control character U+202E")
    assert len(assert_safe(done).strip().splitlines()) == 1


class HostileStatus(BaseHTTPRequestHandler):
    """Every request gets a 503 whose reason phrase sets the window title and clears the screen."""

    def do_GET(self) -> None:
        self.wfile.write(b"HTTP/1.1 503 Busy \x1b]0;PWNED\x07\x1b[2J\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def hostile_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HostileStatus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.network
def test_a_servers_status_line_reaches_the_retry_line_escaped(hostile_server: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), "fetch-deps", "--cuda", "cpu"]
    command += ["--mirror", hostile_server, "--cache-dir", str(tmp_path / "cache")]
    with subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8"
    ) as process:
        assert process.stderr is not None
        try:
            line = next(line for line in process.stderr if "retrying" in line)  # the first retry; then stop
        finally:
            process.kill()
    assert not RAW.search(line.rstrip("\n")), repr(line)
    assert "503 Busy \\x1b]0;PWNED\\x07\\x1b[2J" in line
