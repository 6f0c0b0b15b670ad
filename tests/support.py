"""Helpers shared by the test modules (tests/ is on sys.path through pytest's rootdir conftest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HOSTS_DIR = REPO_ROOT / "build_config" / "hosts"


def run_invoke(
    *args: str, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `python -m invoke ARGS` from the repo root, as a user would, with real exit codes."""
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("PYTHONIOENCODING", "utf-8")
    return subprocess.run(
        [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )
