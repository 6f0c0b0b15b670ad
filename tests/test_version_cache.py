"""The probe's version cache (facts/version_cache.py) with a real tool: ninja, copied so its file
can be changed. A counting wrapper around the real runner says how often the tool was started."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytorch_winbuild.facts.probe_common import CommandResult, run_command
from pytorch_winbuild.facts.version_cache import VersionCache


class Counting:
    """The real runner, counting the commands it starts."""

    def __init__(self) -> None:
        self.started: list[list[str]] = []

    def __call__(self, args: Sequence[str], timeout: float) -> CommandResult:
        self.started.append(list(args))
        return run_command(args, timeout)


@pytest.fixture
def ninja(tmp_path: Path) -> Path:
    found = shutil.which("ninja")
    assert found, "ninja is a dependency of this project (pip install -e .)"
    copy = tmp_path / "bin" / "ninja"
    copy.parent.mkdir()
    shutil.copy2(Path(found).resolve(), copy)  # the binary itself, not pip's launcher script
    return copy


def test_an_unchanged_tool_is_asked_once_across_runs(ninja: Path, tmp_path: Path) -> None:
    store = tmp_path / "cache" / "versions.json"
    first_runner = Counting()
    first = VersionCache(store, first_runner)
    answer = first([str(ninja), "--version"], 10)
    assert answer.ok and answer.stdout.strip()[0].isdigit() and len(first_runner.started) == 1
    first.save()

    second_runner = Counting()
    second = VersionCache(store, second_runner)
    assert second([str(ninja), "--version"], 10).stdout == answer.stdout
    assert second_runner.started == []  # answered from the file: ninja was not started


def test_a_changed_executable_is_asked_again(ninja: Path, tmp_path: Path) -> None:
    store = tmp_path / "versions.json"
    cache = VersionCache(store, Counting())
    cache([str(ninja), "--version"], 10)
    cache.save()
    stat = ninja.stat()
    os.utime(ninja, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # an upgrade in place
    runner = Counting()
    VersionCache(store, runner)([str(ninja), "--version"], 10)
    assert len(runner.started) == 1


def test_only_version_queries_and_only_answers_are_kept(ninja: Path, tmp_path: Path) -> None:
    store = tmp_path / "versions.json"
    runner = Counting()
    cache = VersionCache(store, runner)
    cache([str(ninja), "-t", "list"], 10)  # not a version query: the machine's state, always asked
    cache([str(ninja), "-t", "list"], 10)
    cache([str(tmp_path / "missing"), "--version"], 10)  # could not start: nothing to keep
    cache.save()
    assert len(runner.started) == 3 and not store.exists()


def test_a_broken_or_unwritable_store_only_means_asking(ninja: Path, tmp_path: Path) -> None:
    store = tmp_path / "versions.json"
    store.write_text("{not json", encoding="utf-8")
    runner = Counting()
    cache = VersionCache(store, runner)
    assert cache([str(ninja), "--version"], 10).ok and len(runner.started) == 1
    blocked = VersionCache(tmp_path / "a-file" / "versions.json", Counting())
    (tmp_path / "a-file").write_text("a file where the folder would go", encoding="utf-8")
    blocked([str(ninja), "--version"], 10)
    blocked.save()  # no error, nothing written
    assert (tmp_path / "a-file").is_file()
