"""Lock files: the SHA-256 and size of archives, checked on every download.

The shipped lock (build_config/deps.lock, only read) makes an archive *verified*; the cache's lock (<cache>/deps.lock,
trust on first use) makes later downloads match the first, which stays *unverified*.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild import atomic_file
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.catalog import CATALOG_FILE, Archive
from pytorch_winbuild.knowledge.config_files import config_dir, load_toml, require

LOCK_FILE = "deps.lock"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HEADER = """\
# SHA-256 and size of each MKL/MAGMA archive as this cache first received it (trust on first use),
# written by `invoke fetch-deps` for archives that build_config/deps.lock does not pin. Later
# downloads into this cache must match; nothing here was checked against a published checksum.
# `invoke fetch-deps --update-lock` accepts a changed file.
"""


@dataclass(frozen=True)
class LockEntry:
    sha256: str
    size: int


def shipped_lock_path() -> Path:
    """build_config/deps.lock: the checksums shipped with pytorch-winbuild (read, never written by fetch-deps)."""
    return config_dir() / LOCK_FILE


def default_lock_path(cache_dir: Path) -> Path:
    """The cache's own lock, where first-seen checksums go: <cache>/deps.lock (`clean` keeps it)."""
    return Path(cache_dir) / LOCK_FILE


def _leading_comments(path: Path) -> str | None:
    """The comment block a lock file starts with, kept when the file is rewritten."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except OSError:
        return None
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line if line.endswith("\n") else line + "\n")
    return "".join(header) or None


def _basic_string(text: str) -> str:
    """A TOML basic string (file names are plain, but quote defensively)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _regular_or_absent(path: Path) -> Path:
    """The file to read and replace: a symlink's target (written through, as `env --output` does), which must be a
    regular file or not exist yet. A device, pipe, socket or folder is refused: reading a pipe would hang, and
    replacing /dev/null with a lock file would break the system."""
    target = path.resolve() if path.is_symlink() else path
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise ConfigurationError(
            f"the lock file {path} cannot be read ({exc.strerror or exc}); nothing was read or written.",
            fix="name a readable regular file with --lock-file, or leave it out for the cache's deps.lock.",
        ) from None
    if not stat.S_ISREG(mode):
        raise ConfigurationError(
            f"the lock file {path} is not a regular file (a device, pipe, socket or folder); nothing was read or "
            "written.",
            fix="name a regular file with --lock-file (a new one is created), or leave it out for the cache's "
            "deps.lock.",
        )
    return target


class LockFile:
    """The entries of one lock file; `record` merges into what is on disk at that moment."""

    def __init__(self, path: Path, entries: dict[str, LockEntry]) -> None:
        self.path = path
        self.entries = entries

    @classmethod
    def load(cls, path: Path) -> LockFile:
        """Read the lock file; a missing file is an empty lock."""
        path = _regular_or_absent(path)
        if not path.exists():
            return cls(path, {})
        data = load_toml(path)
        entries: dict[str, LockEntry] = {}
        for file_name, entry in data.items():
            where = f'{path}: ["{file_name}"]'
            if not isinstance(entry, dict):
                raise ConfigurationError(
                    f"{where}: expected a table with sha256 and size.",
                    fix=f"correct it, or delete {path} to record the checksums again.",
                )
            sha256 = require(entry, "sha256", str, where)
            size = require(entry, "size", int, where)
            if not _SHA256.fullmatch(sha256) or size <= 0:
                raise ConfigurationError(
                    f"{where}: sha256 must be 64 lowercase hex digits and size a positive integer.",
                    fix="correct it, or delete the entry to record it again.",
                )
            entries[file_name] = LockEntry(sha256=sha256, size=size)
        return cls(path, entries)

    def get(self, file_name: str) -> LockEntry | None:
        return self.entries.get(file_name)

    def record(self, file_name: str, entry: LockEntry) -> None:
        """Write one entry, keeping entries another run may have written since we read the file."""
        current = LockFile.load(self.path).entries
        current[file_name] = entry
        self.entries = dict(sorted(current.items()))
        lines = [_leading_comments(self.path) or _HEADER]
        for name, item in self.entries.items():
            lines.append(f'\n[{_basic_string(name)}]\nsha256 = "{item.sha256}"\nsize = {item.size}\n')
        self.path = _regular_or_absent(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_file.write_text(self.path, "".join(lines), newline="\n")


@dataclass(frozen=True)
class Pin:
    """A checksum an archive must have, and where it comes from."""

    sha256: str
    size: int | None
    where: str  # "build_config/deps.toml [known]" or a lock file's path
    published: bool  # deps.toml or the shipped lock (verified) vs this cache's first-use record (not)


def pins_for(archive: Archive, shipped: LockFile, cache_lock: LockFile, *, update_lock: bool = False) -> list[Pin]:
    """What `archive` is checked against: the published checksums (deps.toml [known], the shipped
    lock), else the cache's first-use record unless `update_lock`. Empty: nothing, trust on first use."""
    pins = []
    if archive.sha256 is not None:
        pins.append(Pin(archive.sha256, archive.size, f"build_config/{CATALOG_FILE} [known]", True))
    entry = shipped.get(archive.file_name)
    if entry is not None:
        pins.append(Pin(entry.sha256, entry.size, str(shipped.path), True))
    if pins:
        return pins  # a first-use record never overrides (nor contradicts) a published checksum
    entry = cache_lock.get(archive.file_name)
    if entry is not None and not update_lock:
        pins.append(Pin(entry.sha256, entry.size, str(cache_lock.path), False))
    return pins


def contradicted(pins: list[Pin], sha256: str, size: int) -> Pin | None:
    """The first pin a file with this checksum and size does not match, or None."""
    for pin in pins:
        if sha256 != pin.sha256 or (pin.size is not None and size != pin.size):
            return pin
    return None
