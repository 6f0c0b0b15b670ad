"""Fixtures of the nightly tests: the stand-in PyTorch repository, a real Redis and a real memcached on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from nightly_support import REDIS_PASSWORD, Redis, free_port, make_repo, wait_for_port


@contextlib.contextmanager
def _server(program: str, install: str, arguments: Callable[[int], list[str]]) -> Iterator[int]:
    """A real server on a free port of 127.0.0.1, up until the block ends; a missing one fails the test."""
    executable = shutil.which(program)
    if executable is None:
        pytest.fail(f"{program} is not installed ({install}).", pytrace=False)
    port = free_port()
    process = subprocess.Popen([executable, *arguments(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def mini_repo(tmp_path: Path) -> Path:
    """A git repository of mini torch (branches main and broken), the matrix's "PyTorch repo"."""
    return make_repo(tmp_path / "pytorch-repo")


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Redis]:
    """redis-server on a free port of 127.0.0.1, in memory only, with a password (the runner's secret)."""
    with _server(
        "redis-server",
        "apt-get install redis-server; the shared-cache tests need a real one",
        lambda port: [
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
    ) as port:
        yield Redis(port, REDIS_PASSWORD)


@pytest.fixture
def memcached_server() -> Iterator[int]:
    """memcached (Debian's package, which .ci/run installs) on a free port of 127.0.0.1, TCP only; its port.

    Ready once it answers the text protocol's `version` command with its own VERSION line."""
    # memcached refuses to start as root unless told which user to run as
    as_user = ["-u", "root"] if os.geteuid() == 0 else []
    with _server(
        "memcached",
        "apt-get install memcached; the clcache shared-cache test needs a real one",
        lambda port: ["-l", "127.0.0.1", "-p", str(port), "-U", "0", *as_user],
    ) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
            connection.sendall(b"version\r\n")
            reply = connection.makefile("rb").readline().decode()
        assert reply.startswith("VERSION "), reply
        yield port
