"""build_config/deps.lock: the SHA-256 and size of every archive, recorded at its first verified download.

No checksums are published for PyTorch's MKL/MAGMA archives, so trust is established once (a
download that extracts completely with the expected layout) and pinned: every later download,
on any machine sharing the repo, must produce the same bytes. `--update-lock` accepts a new
file, for when the bucket really replaced one.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..config_files import config_dir, load_toml, require
from ..errors import ConfigurationError

LOCK_FILE = "deps.lock"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_HEADER = """\
# SHA-256 and size of each MKL/MAGMA archive, written by `invoke fetch-deps` at the first
# verified download (the files have no published checksums). Every later download must match;
# `invoke fetch-deps --update-lock` accepts a changed file. Commit this file.
"""


@dataclass(frozen=True)
class LockEntry:
    sha256: str
    size: int


def default_lock_path() -> Path:
    """build_config/deps.lock in a checkout (commit it); beside the user cache when installed,
    because site-packages is no place to write to."""
    from ..paths import default_cache_dir, running_from_checkout

    return config_dir() / LOCK_FILE if running_from_checkout() else default_cache_dir() / LOCK_FILE


def _basic_string(text: str) -> str:
    """A TOML basic string (file names are plain, but quote defensively)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class LockFile:
    """The entries of one lock file; `record` merges into what is on disk at that moment."""

    def __init__(self, path: Path, entries: dict[str, LockEntry]) -> None:
        self.path = path
        self.entries = entries

    @classmethod
    def load(cls, path: Path) -> LockFile:
        """Read the lock file; a missing file is an empty lock."""
        if not path.exists():
            return cls(path, {})
        data = load_toml(path)
        entries: dict[str, LockEntry] = {}
        for file_name, entry in data.items():
            where = f"{path}: [\"{file_name}\"]"
            if not isinstance(entry, dict):
                raise ConfigurationError(f"{where}: expected a table with sha256 and size.", fix=f"correct it, or delete {path} to record the checksums again.")
            sha256 = require(entry, "sha256", str, where)
            size = require(entry, "size", int, where)
            if not _SHA256.match(sha256) or size <= 0:
                raise ConfigurationError(f"{where}: sha256 must be 64 lowercase hex digits and size a positive integer.", fix="correct it, or delete the entry to record it again.")
            entries[file_name] = LockEntry(sha256=sha256, size=size)
        return cls(path, entries)

    def get(self, file_name: str) -> LockEntry | None:
        return self.entries.get(file_name)

    def record(self, file_name: str, entry: LockEntry) -> None:
        """Write one entry, keeping entries another run may have written since we read the file."""
        current = LockFile.load(self.path).entries
        current[file_name] = entry
        self.entries = dict(sorted(current.items()))
        lines = [_HEADER]
        for name, item in self.entries.items():
            lines.append(f"\n[{_basic_string(name)}]\nsha256 = \"{item.sha256}\"\nsize = {item.size}\n")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp_name = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as tmp:
                tmp.write("".join(lines))
            os.replace(tmp_name, self.path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
