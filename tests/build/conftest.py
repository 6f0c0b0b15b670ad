"""Fixtures of the build tier: a virtual environment for mini torch, and fresh copies of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from build_support import copy_fixture, make_venv


@pytest.fixture(scope="session")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python that mini torch installs into (so this Python's real torch is never replaced)."""
    return make_venv(tmp_path_factory.mktemp("venv") / "env")


@pytest.fixture
def mini_source(tmp_path: Path) -> Path:
    """A fresh copy of mini torch in a folder whose name has a space, as Windows user folders do."""
    return copy_fixture("mini_torch", tmp_path / "mini torch")
