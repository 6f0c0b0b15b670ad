"""Fixtures of the nightly tests: the stand-in PyTorch repository, a real Redis and a real memcached on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import socket
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


@pytest.fixture
def memcached_server() -> Iterator[int]:
    """memcached (Debian's package, which .ci/run installs) on a free port of 127.0.0.1, TCP only; its port.

    Ready once it answers the text protocol's `version` command with its own VERSION line."""
    executable = shutil.which("memcached")
    if executable is None:
        pytest.fail(
            "memcached is not installed (apt-get install memcached); the clcache shared-cache test needs a real one.",
            pytrace=False,
        )
    port = free_port()
    # memcached refuses to start as root unless told which user to run as
    as_user = ["-u", "root"] if os.geteuid() == 0 else []
    process = subprocess.Popen(
        [executable, "-l", "127.0.0.1", "-p", str(port), "-U", "0", *as_user],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall(b"version\r\n")
            reply = connection.makefile("rb").readline().decode()
        assert reply.startswith("VERSION "), reply
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)
