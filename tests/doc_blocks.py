"""The fenced code blocks of the README and docs/: what the page promises runs, read as a reader copies it.

A block's info string names the shell it is for (`bash`, `cmd`, `powershell`) or says it is not a
command (`text`, `toml`, `json`); a command line is what a reader pastes, with bash's `\\` line
continuations joined, and without comment lines (`#` in bash, `rem` in cmd).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from support import REPO_ROOT

SHELLS = ("bash", "cmd", "powershell")
NOT_COMMANDS = ("text", "toml", "json")
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(?P<info>\S*)\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO_ROOT).as_posix()}:{self.line}"

    def commands(self) -> list[str]:
        """The command lines a reader runs, one entry per command."""
        joined = re.sub(r"\\\n", " ", self.text) if self.language == "bash" else self.text
        lines = [line.strip() for line in joined.splitlines()]
        return [line for line in lines if line and not _comment(line, self.language)]


def _comment(line: str, language: str) -> bool:
    if language == "cmd":
        return line.lower() == "rem" or line.lower().startswith(("rem ", "::"))
    return line.startswith("#")


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a Markdown page, in order."""
    found: list[Block] = []
    opened: tuple[int, str] | None = None
    body: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = _FENCE.match(line)
        if fence is None:
            if opened is not None:
                body.append(line)
            continue
        if opened is None:
            opened, body = (number, fence.group("info")), []
        else:
            found.append(Block(page, opened[0], opened[1], "\n".join(body)))
            opened = None
    assert opened is None, f"{page}: the block opened on line {opened[0]} is never closed"
    return found


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def readme_blocks(language: str) -> list[Block]:
    return [block for block in blocks(REPO_ROOT / "README.md") if block.language == language]
