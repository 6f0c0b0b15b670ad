"""Every `cmd` block of the README and docs/, typed at Windows' Command Prompt (Wine's cmd), then carried
out by the real pytorch-winbuild against a facts-file Windows machine.

Two steps, because no Windows Python runs under this Wine and a Linux program that Wine starts is
neither waited for nor given its arguments the Windows way:

1. cmd runs the line as printed (`cmd /s /c`, as at the prompt: `&&` chains, quoting, carets). The
   programs it names (`invoke`, `py`, `.venv\\Scripts\\python`, `.venv\\Scripts\\invoke`) are stand-ins
   that print their arguments as Windows' CommandLineToArgvW splits them (a JScript file under
   cscript, as in test_printed_commands_real.py).
2. Each `invoke` the line ran is run for real with exactly those arguments, on Linux, planning for the
   README's machine (build_config/hosts/vs2017-cuda90-cuda100.json: VS 2017, CUDA 9.0 and 10.0, a GTX
   1080 Ti). What stands in for Windows, and why:
   - `--host FACTS` is added for the tasks that take it (this machine is not that one);
   - `--dry-run` is added to `build` and `fetch-deps`: a real build needs MSVC and a real fetch
     PyTorch's bucket, neither of which is here (the build and network tiers run both for real);
   - a `C:\\...` path is that machine's: `C:\\src\\pytorch` becomes a tree with PyTorch v1.1.0's
     version.txt and setup.py (the two files the planner reads).
   The install line's `py`/`python` steps are compared with the README's bash line, which
   tests/test_readme_setup.py runs for real.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import wine_cmd  # tests/cmd/conftest.py
from doc_blocks import PAGES, Block, blocks, readme_blocks
from support import HOSTS_DIR, run_invoke

from pytorch_winbuild.facts.cmd_line import decode_output, to_wine_path

if TYPE_CHECKING:
    from conftest import WinePrefix

pytestmark = [pytest.mark.cmd, pytest.mark.xdist_group("readme_cmd")]  # one Wine prefix for every line

FACTS = HOSTS_DIR / "vs2017-cuda90-cuda100.json"
ARGV_JS = 'for (var i = 0; i < WScript.Arguments.length; i++) WScript.Echo("ARG:" + WScript.Arguments(i));\r\n'
STAND_INS = ("invoke", "py", r".venv\Scripts\python", r".venv\Scripts\invoke")
CMD_LINES = [
    pytest.param(block, command, id=f"{block.where}:{command[:60]}")
    for page in PAGES
    for block in blocks(page)
    if block.language == "cmd"
    for command in block.commands()
]


@pytest.fixture(scope="module")
def prompt(wine_prefix: WinePrefix, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the prompt is in, with the stand-ins: `invoke` and `py` on PATH, the venv's under `.venv\\Scripts`."""
    folder = tmp_path_factory.mktemp("prompt")
    (folder / "argv.js").write_text(ARGV_JS, encoding="ascii")
    for name in STAND_INS:
        bat = folder / (name.replace("\\", "/") + ".bat")
        bat.parent.mkdir(parents=True, exist_ok=True)
        argv = to_wine_path(folder / "argv.js")
        bat.write_text(f'@echo RUN:{name}\r\n@cscript.exe //nologo "{argv}" %*\r\n', encoding="ascii")
    return folder


def typed(wine_prefix: WinePrefix, prompt: Path, command: str) -> list[tuple[str, list[str]]]:
    """(program, arguments) of each program cmd started for `command`, typed at a prompt in `prompt`."""
    env = wine_prefix.windows_env(PATH=f"{to_wine_path(prompt)};C:\\windows\\system32;C:\\windows")
    ran = wine_cmd(f'/d /s /c "cd /d {to_wine_path(prompt)} && {command}"', env)
    output = decode_output(ran.stdout).splitlines()
    assert ran.returncode == 0, f"cmd ran {command!r}: exit {ran.returncode}\n{decode_output(ran.stderr)}"
    runs: list[tuple[str, list[str]]] = []
    for line in output:
        if line.startswith("RUN:"):
            runs.append((line.removeprefix("RUN:"), []))
        else:
            assert line.startswith("ARG:") and runs, f"{command!r} printed {line!r}"
            runs[-1][1].append(line.removeprefix("ARG:"))
    return runs


def windows_machine(tmp: Path) -> dict[str, Path]:
    """The facts-file machine's folders the pages name, as trees here."""
    source = tmp / "C" / "src" / "pytorch"
    source.mkdir(parents=True)
    (source / "version.txt").write_text("1.1.0a0\n", encoding="ascii")  # v1.1.0 version.txt
    (source / "setup.py").write_text("# PyTorch v1.1.0 setup.py (the planner reads version.txt beside it)\n")
    return {"C:\\src\\pytorch": source}


@cache
def _takes(task: str, flag: str) -> bool:
    return f"--{flag}" in run_invoke(task, "--help").stdout


def carried_out(arguments: list[str], machine: dict[str, Path]) -> list[str]:
    """The arguments the real tool gets on Linux for the facts-file machine (see the module docstring)."""
    task = arguments[0]
    words = [str(machine[word]) if word in machine else word for word in arguments]
    assert not [w for w in words if re.match(r"[A-Za-z]:\\", w)], f"map the machine's folders in {words}"
    if task in ("build", "fetch-deps") and "--dry-run" not in words:
        words.append("--dry-run")
    if "--host" not in words and _takes(task, "host"):
        words += ["--host", str(FACTS)]
    return words


@pytest.mark.parametrize(("block", "command"), CMD_LINES)
def test_cmd_line_runs_as_printed(wine_prefix, prompt: Path, tmp_path: Path, block: Block, command: str):
    runs = typed(wine_prefix, prompt, command)
    assert runs, f"{block.where}: cmd started nothing for {command!r}"
    machine = windows_machine(tmp_path)
    for program, arguments in runs:
        if program.endswith("invoke"):
            words = carried_out(arguments, machine)
            # A task that plans for the facts-file machine uses that machine's cache (a dry run writes nothing);
            # the others (verify) get a fresh cache here.
            cache = {} if "--host" in words else {"INVOKE_WINBUILD_CACHE_DIR": str(tmp_path / "cache")}
            result = run_invoke(*words, cwd=tmp_path, env=cache)
            assert result.returncode == 0, f"{block.where}: {command!r} → invoke {' '.join(words)}\n{result.stderr}"


def test_the_windows_install_line_is_the_bash_one():
    """The README's cmd install line runs the same steps as its bash line, with Windows' names for them."""
    [windows] = [c for b in readme_blocks("cmd") for c in b.commands() if c.startswith("py ")]
    bash = readme_blocks("bash")[0].commands()[0]
    as_windows = bash.replace("python3 ", "py -3 ").replace(".venv/bin/", ".venv\\Scripts\\")
    assert windows == as_windows


def test_the_install_line_chains_in_cmd(wine_prefix, prompt: Path):
    [windows] = [c for b in readme_blocks("cmd") for c in b.commands() if c.startswith("py ")]
    assert typed(wine_prefix, prompt, windows) == [
        ("py", ["-3", "-m", "venv", ".venv"]),
        (r".venv\Scripts\python", ["-m", "pip", "install", "-e", "."]),
        (r".venv\Scripts\invoke", ["doctor"]),
        (r".venv\Scripts\invoke", ["build", "--dry-run"]),
    ]
