"""Fixtures of the nightly tests: the stand-in PyTorch repository and a real Redis on 127.0.0.1."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from nightly_support import REDIS_PASSWORD, Redis, free_port, make_repo, wait_for_port


@pytest.fixture
def mini_repo(tmp_path: Path) -> Path:
    """A git repository of mini torch (branches main and broken), the matrix's "PyTorch repo"."""
    return make_repo(tmp_path / "pytorch-repo")


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Redis]:
    """redis-server on a free port of 127.0.0.1, in memory only, with a password (the runner's secret)."""
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.fail(
            "redis-server is not installed (apt-get install redis-server); the shared-cache tests need a real one.",
            pytrace=False,
        )
    port = free_port()
    process = subprocess.Popen(
        [
            executable,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--requirepass",
            REDIS_PASSWORD,
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield Redis(port, REDIS_PASSWORD)
    finally:
        process.terminate()
        process.wait(timeout=10)
