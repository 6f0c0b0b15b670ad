"""Invoke's configuration files cannot blow up memory through YAML aliases (issue 29 point 6: an 814-byte
invoke.yaml of nested aliases, maps 10 wide and 8 deep outside `winbuild:`, passed the pre-check, and
Invoke's merge copied every alias: 2.3 GB in 16 s). PyYAML loads an alias as a shared reference, so the file
loads cheaply; the pre-check counts what a copy (or Invoke's own debug repr of the loaded data) would make and
refuses it. Real Invoke, real files: -f FILE with `invoke`, and a user's ~/.invoke.yaml (through HOME) with the
`pytorch-winbuild` console script, which checks the system and user files before Invoke reads them; plain
`invoke` reads those two before it imports any task, so no code of ours can run first there."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO_ROOT, run_invoke


def _bomb(wide: int = 10, deep: int = 8) -> str:
    """The issue's shape: each level a map of `wide` aliases to the level below, outside `winbuild:`."""
    lines = [f"l0: &l0 {{{', '.join(f'k{i}: x' for i in range(wide))}}}"]
    for level in range(1, deep + 1):
        lines.append(f"l{level}: &l{level} {{{', '.join(f'k{i}: *l{level - 1}' for i in range(wide))}}}")
    return "\n".join(lines) + "\n"


def _run_limited(*args: str, home: Path, console_script: bool) -> subprocess.CompletedProcess[str]:
    """The real tool with its address space capped at 1 GiB, so the old behaviour fails fast instead of
    taking the machine's memory."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    script = shutil.which("pytorch-winbuild")
    assert script, "pytorch-winbuild is installed by `pip install -e .` (see .ci/run)"
    program = [script] if console_script else [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT)]
    return subprocess.run(
        [*program, *args],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8"},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit,
    )


@pytest.mark.parametrize("where", ["user", "runtime"])
def test_nested_aliases_are_refused_before_invoke_copies_them(tmp_path: Path, where: str):
    text = _bomb()
    assert len(text.encode()) < 1000  # the file was 814 bytes
    path = tmp_path / ".invoke.yaml" if where == "user" else tmp_path / "bomb.yaml"
    path.write_text(text, encoding="utf-8")
    args = ("build", "--dry-run") if where == "user" else ("-f", str(path), "build", "--dry-run")
    result = _run_limited(*args, home=tmp_path, console_script=where == "user")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr[-2000:]
    # What a full copy holds, counted from the shape: a level-0 map is itself, 10 keys and 10 values; a level-k map
    # is itself, 10 keys and 10 copies of level k-1; the document is itself, its 9 keys and the 9 levels.
    level = [21]
    for _ in range(8):
        level.append(1 + 10 + 10 * level[-1])
    expanded = 1 + 9 + sum(level)
    assert f"config file {path}: its YAML aliases expand to {expanded:,} values" in result.stderr


def test_an_alias_that_contains_itself_is_refused(tmp_path: Path):
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [1, *a]\n", encoding="utf-8")
    result = run_invoke("-f", str(path), "build", "--dry-run")
    assert result.returncode == 2 and "a YAML alias (*name) contains itself" in result.stderr, result.stderr


def test_a_few_aliases_are_still_a_configuration(tmp_path: Path):
    path = tmp_path / "anchors.yaml"
    path.write_text("defaults: &d {cuda: cpu}\nwinbuild: *d\n", encoding="utf-8")
    result = run_invoke(
        "-f", str(path), "build", "--dry-run", "--host", str(REPO_ROOT / "build_config/hosts/cpu-only.json")
    )
    assert result.returncode == 0, result.stderr
