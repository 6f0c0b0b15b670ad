"""A file written through atomic_file is the old one or the new one, never half, and no temporary stays."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytorch_winbuild import atomic_file


def test_the_new_text_replaces_the_old_whole(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("old")
    atomic_file.write_text(target, "new\n", newline="\n")
    assert target.read_bytes() == b"new\n"
    assert os.listdir(tmp_path) == ["record.json"]


def test_a_write_that_fails_halfway_keeps_the_old_file_and_leaves_nothing(tmp_path: Path) -> None:
    """A lone surrogate cannot be encoded as UTF-8: the write fails after the file was created."""
    target = tmp_path / "record.json"
    target.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        atomic_file.write_text(target, "a" * 100_000 + "\udc80")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["record.json"]


def test_a_missing_folder_is_the_callers_to_make(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_file.write_text(tmp_path / "absent" / "record.json", "x")
