"""The README and docs/ as a reader copies from them: each block names its shell, a bash block is bash,
a cmd block is cmd, and the README stays a user's guide.

What each block does when run is tested where its shell is real: `cmd` blocks under Wine
(tests/cmd/test_readme_cmd.py), the README's bash blocks in a fresh copy of the repository
(tests/test_readme_setup.py). Here: what a shell's own parser says, and the sample output against
the real output of the command the README prints above it.
"""

from __future__ import annotations

import subprocess

import pytest
from doc_blocks import NOT_COMMANDS, SHELLS, Block, all_blocks, readme_blocks
from support import REPO_ROOT, run_invoke

BLOCKS = all_blocks()
README_MAX_LINES = 250  # issue 27: a user's guide first, at most 250 lines; the reference lives in docs/


def test_every_block_names_its_shell_or_says_it_is_not_a_command():
    unnamed = [f"{b.where} ```{b.language}" for b in BLOCKS if b.language not in SHELLS + NOT_COMMANDS]
    assert not unnamed, f"name the shell ({', '.join(SHELLS)}) or {', '.join(NOT_COMMANDS)}: {unnamed}"


def test_the_readme_is_a_users_guide():
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[:3] == ["## Install", "## What one Windows machine needs", "## Build PyTorch"]
    for page in ("docs/reference.md", "docs/nightly.md", "docs/performance.md", "docs/architecture.md"):
        assert f"]({page})" in text and (REPO_ROOT / page).is_file(), page


def test_the_readme_opens_with_its_two_commands():
    """The first block: the command that sets up and runs the main job, then the one that passes the tests."""
    first = readme_blocks("bash")[0]
    assert first.commands() == [
        "python3 -m venv .venv && .venv/bin/python -m pip install -e . && .venv/bin/invoke doctor "
        "&& .venv/bin/invoke build --dry-run",
        "bash .ci/run",
    ]
    assert (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip().endswith("bash scripts/test.sh")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "bash"], ids=lambda b: b.where)
def test_bash_blocks_parse_in_bash(block: Block):
    checked = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, f"{block.where}: {checked.stderr}"


def _unquoted_backslashes(command: str) -> list[int]:
    """Where bash would eat a backslash: outside quotes (`C:\\src` arrives as `C:src`)."""
    found, quote = [], ""
    for index, character in enumerate(command):
        if quote:
            quote = "" if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == "\\":
            found.append(index)
    return found


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "bash"], ids=lambda b: b.where)
def test_bash_blocks_hold_no_windows_paths(block: Block):
    eaten = [command for command in block.commands() if _unquoted_backslashes(command)]
    assert not eaten, f"{block.where}: bash removes these backslashes; make the block cmd: {eaten}"


def test_the_backslash_check_sees_what_bash_does():
    for argument, bash_gives in [("C:\\src\\pytorch", "C:srcpytorch"), ("'C:\\a'", "C:\\a"), ('"C:\\a"', "C:\\a")]:
        ran = subprocess.run(["bash", "-c", f"printf %s {argument}"], capture_output=True, text=True, check=True)
        assert ran.stdout == bash_gives
        assert bool(_unquoted_backslashes(f"invoke build --source {argument}")) == ("\\" not in bash_gives)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "cmd"], ids=lambda b: b.where)
def test_cmd_blocks_hold_no_bash_comments(block: Block):
    """cmd has no `#` comment: the words after it would reach the program as arguments."""
    assert not [command for command in block.commands() if " #" in command or command.startswith("#")], block.where


def test_the_sample_output_is_what_the_command_prints():
    """The README's "What a successful plan looks like": its text block is the start of the real output of the
    bash command above it, run as printed (from the repository folder, as the README's setup leaves the reader)."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## What a successful plan looks like", 1)[1].split("\n## ", 1)[0]
    command_block, sample_block = (b for b in readme_blocks("bash") + readme_blocks("text") if b.text in section)
    [command] = command_block.commands()
    assert command.startswith("invoke ")
    result = run_invoke(*command.split()[1:])
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()
    sample = sample_block.text.splitlines()
    assert printed[: len(sample)] == sample
