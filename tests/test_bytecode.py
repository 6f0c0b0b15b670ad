"""Our modules keep their bytecode under Invoke, which turns bytecode writing off for every run.

Without the fix in tasks.py and faces/program.py every command compiled the package from source
again (about 0.1-0.2 s). The evidence is the interpreter's own: the .pyc files it writes, sent to
a private folder with PYTHONPYCACHEPREFIX so the checkout is not touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytorch_winbuild.paths import REPO_ROOT

# Imported only once a task runs (after Invoke set its flag), so they show the fix at work.
LAZY = ("pytorch_winbuild/facts/probe", "pytorch_winbuild/planning/plan")
CONSOLE_SCRIPT = "import sys; from pytorch_winbuild.faces.program import main; sys.argv[0] = 'pytorch-winbuild'; main()"


def run(command: list[str], prefix: Path, tmp_path: Path, **extra: str) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(prefix), **extra)
    cache = tmp_path / "cache"
    done = subprocess.run(
        [*command, "env", "--cuda", "cpu", "--cache-dir", str(cache)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def written(prefix: Path) -> set[str]:
    tag = sys.implementation.cache_tag
    return {str(path.relative_to(prefix)) for path in prefix.rglob(f"*.{tag}.pyc")}


def lazily_imported(prefix: Path) -> list[str]:
    tag = sys.implementation.cache_tag
    found = written(prefix)
    return [module for module in LAZY if any(path.endswith(f"{module}.{tag}.pyc") for path in found)]


@pytest.mark.parametrize(
    "command", [[sys.executable, "-m", "invoke"], [sys.executable, "-c", CONSOLE_SCRIPT]], ids=["invoke", "console"]
)
def test_the_package_keeps_its_bytecode(command: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "pycache"
    run(command, prefix, tmp_path)
    assert lazily_imported(prefix) == list(LAZY)
    # The parsed build_config/ follows the same choice and place (knowledge/config_files.py).
    assert [path.name for path in prefix.rglob("parsed-config.json")] == ["parsed-config.json"]


@pytest.mark.parametrize(
    "command", [[sys.executable, "-m", "invoke"], [sys.executable, "-c", CONSOLE_SCRIPT]], ids=["invoke", "console"]
)
def test_the_users_no_bytecode_choice_is_kept(command: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "pycache"
    run(command, prefix, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert written(prefix) == set()
    assert not list(prefix.rglob("parsed-config.json"))
