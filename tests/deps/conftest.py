"""Fixtures for the fetch-deps tests: archives made once per session, a fault-injecting server per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from deps_support import (
    MAGMA_BCJ2,
    MAGMA_PY7ZR,
    MKL,
    FaultServer,
    Fetcher,
    Made,
    make_tree,
    methods,
    pack_py7zr,
    pack_ultra,
)

from pytorch_winbuild.knowledge.catalog import Archive, select_archives
from pytorch_winbuild.knowledge.model import load_knowledge


@pytest.fixture(scope="session")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    work = tmp_path_factory.mktemp("archives")
    trees = {
        MKL: make_tree(work / "mkl", "mkl", 1_500_000, seed=1),
        MAGMA_PY7ZR: make_tree(work / "magma90", "magma", 1_000_000, seed=3),
        MAGMA_BCJ2: make_tree(work / "magma101", "magma", 2_000_000, seed=5),
    }
    files = {
        MKL: pack_py7zr(trees[MKL], work / "served" / MKL),
        MAGMA_PY7ZR: pack_py7zr(trees[MAGMA_PY7ZR], work / "served" / MAGMA_PY7ZR),
        MAGMA_BCJ2: pack_ultra(trees[MAGMA_BCJ2], work / "served" / MAGMA_BCJ2),
    }
    assert "BCJ2" in methods(files[MAGMA_BCJ2]), "7-Zip's Ultra preset should have used BCJ2 on the .dll"
    assert "BCJ2" not in methods(files[MKL])
    return Made(files=files, trees=trees, work=work)


@pytest.fixture
def server(made: Made) -> Iterator[FaultServer]:
    running = FaultServer(made.files).start()
    yield running
    running.stop()


@pytest.fixture
def cuda101() -> list[Archive]:
    """MKL (py7zr-made) and MAGMA 2.5.4 for CUDA 10.1 (BCJ2)."""
    return select_archives(cuda=load_knowledge().cuda["10.1"], mkl_version="2020.2.254", magma_versions=["2.5.4"])


@pytest.fixture
def cuda90() -> list[Archive]:
    """MKL and MAGMA 2.4.0 for CUDA 9.0, both py7zr-made."""
    return select_archives(cuda=load_knowledge().cuda["9.0"], mkl_version="2020.2.254", magma_versions=[])


@pytest.fixture
def fetch(tmp_path: Path) -> Fetcher:
    return Fetcher(tmp_path)


@pytest.fixture(autouse=True)
def no_proxy_for_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test server is on 127.0.0.1: a proxy from the caller's environment must not be used for it."""
    for name in list(os.environ):
        if name.upper() in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY") or name.upper().startswith("INVOKE_WINBUILD_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
