"""The parsed-TOML cache of build_config/ (knowledge/config_files.py): same data as tomllib, reparsed
whenever a file changes, and never an error when the cache itself is missing, broken or unwritable.

The expected data always comes from Python's own tomllib reading the same file.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from pytorch_winbuild.knowledge import config_files
from pytorch_winbuild.knowledge.config_files import ParsedConfig, config_dir, load_toml, parsed_config_file

SHIPPED = sorted(path.name for path in config_dir().glob("*.toml"))


@pytest.fixture
def shipped_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A copy of build_config/ standing in for the shipped folder, and a fresh cache file; bytecode
    writing on (the cache follows it, and this machine's tests may run with PYTHONDONTWRITEBYTECODE)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    folder = tmp_path / "build_config"
    shutil.copytree(config_dir(), folder)
    cache = tmp_path / "cache" / "parsed-config.json"
    monkeypatch.setattr(config_files, "config_dir", lambda: folder)
    monkeypatch.setattr(config_files, "_parsed", ParsedConfig(cache))
    return folder, cache


def fresh_process_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the next command sees: the cache file, read again."""
    monkeypatch.setattr(config_files, "_parsed", ParsedConfig(cache))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_file_reads_the_same_from_the_cache(
    name: str, shipped_copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, cache = shipped_copy
    expected = tomllib.loads((folder / name).read_text(encoding="utf-8"))
    assert load_toml(name) == expected
    assert name in json.loads(cache.read_text(encoding="utf-8"))["files"]
    fresh_process_cache(cache, monkeypatch)
    assert load_toml(name) == expected


def test_an_edited_file_is_parsed_again(shipped_copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    folder, cache = shipped_copy
    path = folder / "resources.toml"
    original = path.read_text(encoding="utf-8")
    assert load_toml(path) == tomllib.loads(original)
    path.write_text(original + '\n[parsed_cache_probe]\nvalue = "edited"\n', encoding="utf-8")
    fresh_process_cache(cache, monkeypatch)
    assert load_toml(path)["parsed_cache_probe"] == {"value": "edited"}


def test_a_kept_answer_with_the_same_key_is_what_is_returned(
    shipped_copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proof that the cache (not the TOML) answers: a file rewritten with the same size and time."""
    folder, cache = shipped_copy
    path = folder / "gpu.toml"
    before = tomllib.loads(path.read_text(encoding="utf-8"))
    load_toml(path)
    stat = path.stat()
    path.write_bytes(b"#" * stat.st_size)  # same size, no tables at all
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    fresh_process_cache(cache, monkeypatch)
    assert load_toml(path) == before


def test_a_file_replaced_by_another_is_parsed_again(
    shipped_copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `git checkout` does: a new file renamed over the old one, here with the same size and time."""
    folder, cache = shipped_copy
    path = folder / "gpu.toml"
    load_toml(path)
    stat = path.stat()
    replacement = folder / "gpu.toml.new"
    replacement.write_bytes(b"x = 1\n" + b"#" * (stat.st_size - 6))
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, path)
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    fresh_process_cache(cache, monkeypatch)
    assert load_toml(path) == {"x": 1}


def test_callers_get_their_own_copy(shipped_copy: tuple[Path, Path]) -> None:
    first = load_toml("eras.toml")
    first.clear()
    assert load_toml("eras.toml") == tomllib.loads((shipped_copy[0] / "eras.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("content", ["not json at all", '{"format": 99, "files": {}}', '{"format": 1, "files": []}'])
def test_a_broken_or_foreign_cache_is_ignored_and_replaced(
    content: str, shipped_copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, cache = shipped_copy
    cache.parent.mkdir(parents=True)
    cache.write_text(content, encoding="utf-8")
    fresh_process_cache(cache, monkeypatch)
    assert load_toml("cuda.toml") == tomllib.loads((folder / "cuda.toml").read_text(encoding="utf-8"))
    assert json.loads(cache.read_text(encoding="utf-8"))["format"] == config_files.PARSED_FORMAT


def test_an_unwritable_cache_folder_only_means_parsing(
    tmp_path: Path, shipped_copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = shipped_copy
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setattr(config_files, "_parsed", ParsedConfig(blocker / "parsed-config.json"))
    assert load_toml("eras.toml") == tomllib.loads((folder / "eras.toml").read_text(encoding="utf-8"))
    assert not (blocker.parent / "parsed-config.json").exists()


def test_values_json_cannot_hold_are_parsed_every_time(
    shipped_copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, cache = shipped_copy
    path = folder / "dated.toml"
    path.write_text("[release]\nday = 2026-11-23\n", encoding="utf-8")
    assert load_toml(path) == tomllib.loads(path.read_text(encoding="utf-8"))
    assert not cache.exists()  # nothing else was loaded, and the dated file could not be kept


def test_files_outside_build_config_are_not_kept(tmp_path: Path, shipped_copy: tuple[Path, Path]) -> None:
    _, cache = shipped_copy
    mine = tmp_path / "matrix.toml"
    mine.write_text('[settings]\nname = "mine"\n', encoding="utf-8")
    assert load_toml(mine) == {"settings": {"name": "mine"}}
    assert not cache.exists()


def test_nothing_is_written_when_bytecode_is_not(
    shipped_copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """-B or PYTHONDONTWRITEBYTECODE: the user asked for no files beside the code."""
    folder, cache = shipped_copy
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert load_toml("cuda.toml") == tomllib.loads((folder / "cuda.toml").read_text(encoding="utf-8"))
    assert not cache.exists()


def test_the_real_cache_lives_beside_the_shipped_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where bytecode goes (ignored by git, skipped by the repo-unchanged checks), not the user's cache."""
    monkeypatch.setattr(config_files, "_parsed", None)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert config_files._parsed_config().path == config_dir() / "__pycache__" / "parsed-config.json"


def test_a_pycache_prefix_is_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PYTHONPYCACHEPREFIX keeps every cache file out of the installed tree; this one too."""
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path))
    folder = config_dir()
    assert parsed_config_file() == tmp_path / folder.relative_to(folder.anchor) / "parsed-config.json"
