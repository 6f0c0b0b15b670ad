"""Shared test setup: the tiers and the tools each one needs.

CI runs every tier; a tier whose tool is missing FAILS here instead of skipping, so a CI
machine without Wine or Redis cannot pass by silently running less.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
HOSTS_DIR = REPO_ROOT / "build_config" / "hosts"

# marker → the executables its tests drive for real
TIER_TOOLS = {
    "cmd": ["wine"],
    "network": ["7z"],
    "build": ["cmake", "ninja", "g++", "ccache"],
    "services": ["redis-server"],
}


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker, tools in TIER_TOOLS.items():
        if item.get_closest_marker(marker):
            missing = [tool for tool in tools if shutil.which(tool) is None]
            if missing:
                pytest.fail(f"the '{marker}' tier needs {', '.join(missing)} on PATH; .ci/run installs it (apt-get install ...).", pytrace=False)


def run_invoke(*args: str, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
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


@pytest.fixture
def invoke_cli():
    return run_invoke
