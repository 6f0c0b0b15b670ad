"""Shared test setup: the tiers and the tools each one needs.

CI runs every tier; a tier whose tool is missing FAILS here instead of skipping, so a CI
machine without Wine or Redis cannot pass by silently running less.
"""

from __future__ import annotations

import shutil

import pytest
from support import run_invoke

# marker → the executables its tests drive for real
TIER_TOOLS = {
    "cmd": ["wine"],
    "network": ["7z", "7zz"],  # 7zz: Debian's 7zip (7-Zip 22+), 7z: p7zip-full
    "build": ["cmake", "ninja", "g++", "make", "git", "ccache", "sccache", "/usr/local/cuda/bin/nvcc"],
    "services": ["redis-server", "memcached"],
    "browser": ["chromium", "chromedriver"],  # Debian's packages; Selenium drives them (tests/nightly)
    # pyenv's real CPythons as build Pythons, making venvs that pip fills from PyPI (its configured index)
    "pypi": [f"/root/.pyenv/versions/{version}/bin/python" for version in ("2.7.18", "3.7.16", "3.9.18")],
}


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker, tools in TIER_TOOLS.items():
        if item.get_closest_marker(marker):
            missing = [tool for tool in tools if shutil.which(tool) is None]
            if missing:
                pytest.fail(
                    f"the '{marker}' tier needs {', '.join(missing)} on PATH; .ci/run installs it (apt-get install "
                    "...).",
                    pytrace=False,
                )


@pytest.fixture
def invoke_cli():
    return run_invoke
