"""Retention: keep the last N days of nightly outputs, and always each entry's newest wheel.

The newest wheel of an entry is the one users install while the entry is broken, so it is
kept (with its record) however old it is, even for an entry since removed from the matrix.
Only folders named like a date (YYYY-MM-DD) are touched; anything else in the output folder
(state.json, a user's notes) is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from pytorch_winbuild.deps.cache import remove_tree
from pytorch_winbuild.json_file import JsonObject

DATE_FOLDER = re.compile(r"\d{4}-\d{2}-\d{2}")
WHEEL_RECORD_SUFFIX = ".nightly.json"  # written next to each collected wheel: where it came from


@dataclass(frozen=True)
class RetentionResult:
    keep_days: int
    oldest_kept: str
    removed_folders: tuple[str, ...]  # date folders removed entirely
    kept_wheels: tuple[str, ...]  # wheels kept in expired folders as their entry's newest

    def to_dict(self) -> JsonObject:
        return {
            "keep_days": self.keep_days,
            "oldest_kept": self.oldest_kept,
            "removed_folders": list(self.removed_folders),
            "kept_wheels": list(self.kept_wheels),
        }


def published(relative: Path) -> bool:
    """Whether a channel's file is one to publish (copied, staged, merged), by its path below a folder of the channel:
    no hidden component (the hash cache, a staging folder) and no temporary file (atomic_file's `.NAME.*.tmp`)."""
    return not any(part.startswith(".") or part.endswith(".tmp") for part in relative.parts)


def date_folders(output_dir: Path) -> list[tuple[date, Path]]:
    """The run folders under the output folder, oldest first."""
    found = []
    if output_dir.is_dir():
        for child in output_dir.iterdir():
            if child.is_dir() and DATE_FOLDER.fullmatch(child.name):
                try:
                    found.append((date.fromisoformat(child.name), child))
                except ValueError:
                    continue
    return sorted(found)


def newest_wheels(output_dir: Path) -> dict[str, Path]:
    """Entry name → its newest collected wheel (latest date folder, then latest file)."""
    newest: dict[str, tuple[date, float, Path]] = {}
    for day, folder in date_folders(output_dir):
        for wheel in folder.glob("*/*.whl"):
            key = (day, wheel.stat().st_mtime, wheel)
            entry = wheel.parent.name
            if entry not in newest or key[:2] > newest[entry][:2]:
                newest[entry] = key
    return {entry: value[2] for entry, value in newest.items()}


def _remove_empty_folders(folder: Path) -> None:
    for child in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(child.iterdir()):
            child.rmdir()
    if not any(folder.iterdir()):
        folder.rmdir()


def apply_retention(output_dir: Path, keep_days: int, today: date) -> RetentionResult:
    """Remove date folders older than `keep_days` days (today counts as one), except protected wheels."""
    oldest_kept = today - timedelta(days=keep_days - 1)
    protected = set()
    for wheel in newest_wheels(output_dir).values():
        protected |= {wheel, wheel.with_name(wheel.name + WHEEL_RECORD_SUFFIX)}
    removed, kept = [], []
    for day, folder in date_folders(output_dir):
        if day >= oldest_kept:
            continue
        keep_here = sorted(path for path in protected if folder in path.parents)
        if not keep_here:
            remove_tree(folder)
            removed.append(str(folder))
            continue
        for path in sorted(folder.rglob("*"), reverse=True):
            if path.is_file() and path not in protected:
                path.unlink()
        _remove_empty_folders(folder)
        kept += [str(path) for path in keep_here if path.suffix == ".whl"]
    return RetentionResult(keep_days, oldest_kept.isoformat(), tuple(removed), tuple(kept))
