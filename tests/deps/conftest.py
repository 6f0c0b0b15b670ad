"""Fixtures for the fetch-deps tests: archives made once per session, a fault-injecting server per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deps_support import FaultServer, make_tree, methods, pack_py7zr, pack_ultra

from pytorch_winbuild.deps.catalog import Archive, select_archives
from pytorch_winbuild.deps.download import DownloadSettings
from pytorch_winbuild.deps.fetch import FetchResult, fetch_archives

MKL = "mkl_2020.2.254.7z"
MAGMA_PY7ZR = "magma_2.4.0_cuda90_release.7z"  # CUDA 9.0: written by py7zr
MAGMA_BCJ2 = "magma_2.5.4_cuda101_release.7z"  # CUDA 10.1: written by 7-Zip -mx=9 (BCJ2)

# Small timeouts and waits so fault tests take seconds, not minutes.
FAST = DownloadSettings(connect_timeout=2.0, read_timeout=0.5, attempts=3, backoff=0.05, max_backoff=0.2, chunk_size=64 * 1024)


@dataclass(frozen=True)
class Made:
    files: dict[str, Path]  # catalog file name → archive
    trees: dict[str, Path]  # catalog file name → the folder it was made from
    work: Path


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
    return select_archives(cuda="10.1", mkl_version="2020.2.254", magma_versions=["2.5.4"])


@pytest.fixture
def cuda90() -> list[Archive]:
    """MKL and MAGMA 2.4.0 for CUDA 9.0, both py7zr-made."""
    return select_archives(cuda="9.0", mkl_version="2020.2.254", magma_versions=[])


class Fetcher:
    """fetch_archives with this test's cache, lock file, fast timeouts and a captured log."""

    def __init__(self, tmp_path: Path) -> None:
        self.cache_dir = tmp_path / "cache"
        self.lock_path = tmp_path / "deps.lock"
        self.lines: list[str] = []

    def __call__(self, archives: list[Archive], **options: Any) -> FetchResult:
        options.setdefault("download_settings", FAST)
        return fetch_archives(archives, cache_dir=self.cache_dir, lock_path=self.lock_path, log=self.lines.append, **options)

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def work_folders(self) -> list[str]:
        deps = self.cache_dir / "deps"
        return sorted(p.name for p in deps.iterdir() if p.name.startswith((".tmp-", ".trash-"))) if deps.is_dir() else []


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
