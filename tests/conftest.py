"""Shared test setup: the tiers and the tools each one needs.

CI runs every tier; a tier whose tool is missing FAILS here instead of skipping, so a CI
machine without Wine or Redis cannot pass by silently running less.
"""

from __future__ import annotations

import shutil

import pytest
from support import run_invoke

from pytorch_winbuild.builder.built_arches import find_cuobjdump

# cuobjdump where build-ext finds it: CUDA's bin, PATH, or the nvidia-cuda-cuobjdump wheel (the test extra)
CUOBJDUMP = find_cuobjdump("/usr/local/cuda") or "cuobjdump"

# marker → the executables its tests drive for real
TIER_TOOLS = {
    "cmd": ["wine"],
    "network": ["7z", "7zz"],  # 7zz: Debian's 7zip (7-Zip 22+), 7z: p7zip-full
    "build": ["cmake", "ninja", "g++", "make", "git", "ccache", "sccache", "/usr/local/cuda/bin/nvcc", CUOBJDUMP],
    "services": ["redis-server", "memcached"],
    "browser": ["chromium", "chromedriver"],  # Debian's packages; Selenium drives them (tests/nightly)
    # pyenv's real CPythons as build Pythons, making venvs that pip fills from PyPI (its configured index)
    "pypi": [
        f"/root/.pyenv/versions/{version}/bin/python" for version in ("2.7.18", "3.6.15", "3.7.16", "3.9.18", "3.12.1")
    ],
    # PyTorch's real sources from Debian (apt-get source, with the deb-src lines .ci/run writes) and PyTorch's
    # CMake scripts run in script mode (select_compute_arch.cmake) by the cmake the project installs
    "client": ["apt-get", "apt-cache", "cmake"],
}


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker, tools in TIER_TOOLS.items():
        if item.get_closest_marker(marker):
            missing = [tool for tool in tools if shutil.which(tool) is None]
            if missing:
                pytest.fail(
                    f"the '{marker}' tier needs {', '.join(missing)} on PATH; .ci/run installs it (apt-get install "
                    "..., or pip: the test extra).",
                    pytrace=False,
                )


# The tiers whose tests run real builds, servers, browsers or installs: seconds to a minute each, where most of the
# suite takes milliseconds.
LONG_TIERS = ("build", "services", "pypi", "browser", "client", "cmd")
# Modules of the pure tier that take as long as those (2 workers): the fix matrix (19 s, one test), every shipped
# facts file through the CLI (14 s), the hostile command lines (a 20 s module fixture).
LONG_MODULES = ("test_fix_promise", "test_first_contact", "test_hostile_cli")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules holding a long tier's tests run first, the others after them, each in its collected order.

    pytest-xdist (--dist loadgroup, scripts/test.sh) hands tests out in collection order as workers free up, so on
    2 cores a 30 s test collected near the end (tests/test_readme_setup.py) ran alone while the other worker sat
    idle. Started first, the long tests overlap and the many short ones fill in behind them. Whole modules move, so
    a module's tests stay together and its module-scoped fixtures are made once per worker, as before; every test
    still runs, with the same fixtures and the same checks. xdist_group scopes are started first by xdist itself
    (--loadscope-reorder), whatever this order."""
    long_modules = set(LONG_MODULES) | {
        item.module.__name__
        for item in items
        if isinstance(item, pytest.Function) and any(item.get_closest_marker(tier) for tier in LONG_TIERS)
    }
    items.sort(key=lambda item: not (isinstance(item, pytest.Function) and item.module.__name__ in long_modules))


@pytest.fixture
def invoke_cli():
    return run_invoke
