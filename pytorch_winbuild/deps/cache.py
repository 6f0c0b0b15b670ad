"""The cache layout, its lock, and the rule that decides whether an extracted folder is trusted.

A folder is renamed into place only after a complete extraction, a layout check and its marker (MARKER_NAME), so a
folder without a valid marker (an interrupted run, a hand-made copy) is never trusted. CACHEDIR.TAG marks the folder
as a pytorch-winbuild cache: `clean` (deps/cache_clean.py) deletes nothing elsewhere. The layout: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TypeVar

from pytorch_winbuild import atomic_file
from pytorch_winbuild.errors import BusyError, DependencyError
from pytorch_winbuild.json_file import read_json
from pytorch_winbuild.knowledge.catalog import Archive

MARKER_NAME = ".pytorch-winbuild-archive.json"
MARKER_SCHEMA = 1
LOCK_NAME = ".lock"
# The Cache Directory Tagging Specification (bford.info/cachedir): backup tools skip a folder holding this file,
# and `clean` deletes only in a folder whose tag pytorch-winbuild wrote.
TAG_NAME = "CACHEDIR.TAG"
TAG_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
TAG_TEXT = (
    f"{TAG_SIGNATURE}\n# This file is a cache directory tag created by pytorch-winbuild.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
WORK_PREFIXES = (".tmp-", ".trash-")


@dataclass(frozen=True)
class Marker:
    """What the marker file records about an extracted archive."""

    file_name: str
    sha256: str
    size: int
    extractor: str


# A folder of this machine (Path) or of the machine a --host plan is for (PureWindowsPath).
AnyPath = TypeVar("AnyPath", bound=PurePath)


def downloads_root(cache_dir: AnyPath) -> AnyPath:
    return cache_dir / "downloads"


def deps_root(cache_dir: AnyPath) -> AnyPath:
    return cache_dir / "deps"


def deps_dir(cache_dir: AnyPath, archive: Archive) -> AnyPath:
    """Where `archive` is (or will be) extracted (a PureWindowsPath for another machine's plan)."""
    return deps_root(cache_dir) / archive.folder_name


def download_path(cache_dir: AnyPath, archive: Archive) -> AnyPath:
    return downloads_root(cache_dir) / archive.file_name


def partial_path(cache_dir: Path, archive: Archive) -> Path:
    return downloads_root(cache_dir) / (archive.file_name + ".part")


def read_marker(folder: Path) -> Marker | None:
    """The folder's marker, or None when it is missing or unreadable."""
    try:
        data: object = read_json(folder / MARKER_NAME)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MARKER_SCHEMA:
        return None
    file_name, sha256, size, extractor = (data.get(k) for k in ("file", "sha256", "size", "extractor"))
    if not (
        isinstance(file_name, str) and isinstance(sha256, str) and isinstance(size, int) and isinstance(extractor, str)
    ):
        return None
    return Marker(file_name=file_name, sha256=sha256, size=size, extractor=extractor)


def write_marker(folder: Path, marker: Marker) -> None:
    """Write the folder's marker whole and never through a link (atomic_file: a new temporary file, O_EXCL, renamed
    over the marker's name; a rename replaces a name, it follows no link). Anything but a regular file already under
    that name (a link, a folder, a device) raises OSError, as a marker written there would land elsewhere or
    nowhere."""
    data = {
        "schema": MARKER_SCHEMA,
        "file": marker.file_name,
        "sha256": marker.sha256,
        "size": marker.size,
        "extractor": marker.extractor,
    }
    target = folder / MARKER_NAME
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if not stat.S_ISREG(mode):
        raise OSError(errno.EEXIST, "not a regular file: a link, folder or device is in its place", str(target))
    atomic_file.write_json(target, data, ensure_ascii=True, newline="\n", mode=atomic_file.SHARED)


def missing_layout(folder: Path, layout: tuple[str, ...]) -> list[str]:
    """The layout paths that do not exist under `folder`."""
    return [item for item in layout if not (folder / item).exists()]


def archive_locator(cache_dir: PurePath, *, look: bool) -> Callable[[Archive], tuple[str, bool]]:
    """For a plan: where each archive is extracted in this cache, and whether it is there. `look` False: the
    cache of another machine (a --host plan), which cannot be looked into from here: every archive counts as
    missing."""

    def locate(archive: Archive) -> tuple[str, bool]:
        present = look and installed_path(Path(cache_dir), archive) is not None
        return str(deps_dir(cache_dir, archive)), present

    return locate


def installed_path(cache_dir: Path, archive: Archive, expected_sha256: str | None = None) -> Path | None:
    """The extracted folder of `archive`, only when its marker is valid.

    Valid: the marker names this file, records the checksum the catalog publishes (and
    `expected_sha256`, the lock file's, when given), and the layout is still there.
    """
    folder = deps_dir(cache_dir, archive)
    marker = read_marker(folder)
    if marker is None or marker.file_name != archive.file_name:
        return None
    for expected in (archive.sha256, expected_sha256):
        if expected is not None and marker.sha256 != expected:
            return None
    if missing_layout(folder, archive.layout):
        return None
    return folder


def _make_writable_and_retry(function: Callable[[str], object], path: str, _exc: object) -> None:
    """Windows refuses to delete read-only files (7-Zip keeps the archive's attributes)."""
    os.chmod(path, stat.S_IWRITE | stat.S_IREAD | stat.S_IEXEC)
    function(path)


def remove_tree(path: Path) -> None:
    """Delete a folder tree, read-only files included; a missing folder is fine."""
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=_make_writable_and_retry)
    else:
        shutil.rmtree(path, onerror=_make_writable_and_retry)


def sweep_work_folders(cache_dir: Path) -> None:
    """Remove extraction work folders that an interrupted run left (call with the cache lock held)."""
    root = deps_root(cache_dir)
    if not root.is_dir():
        return
    for entry in root.iterdir():
        if entry.name.startswith(WORK_PREFIXES):
            remove_tree(entry)


@contextmanager
def cache_lock(cache_dir: Path, *, timeout: float, log: Callable[[str], None]) -> Iterator[None]:
    """Hold the cache's lock; wait up to `timeout` seconds for another run to finish with it."""
    from filelock import FileLock, Timeout

    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DependencyError(
            f"cannot create the cache folder {cache_dir} ({exc.strerror or exc}).",
            fix="pass a writable folder with --cache-dir.",
        ) from None
    tag_cache(cache_dir)
    lock = FileLock(str(cache_dir / LOCK_NAME))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log(f"waiting for another pytorch-winbuild run that is using {cache_dir} ...")
        try:
            lock.acquire(timeout=timeout)
        except Timeout:
            raise BusyError(
                "another pytorch-winbuild run (fetch-deps, clean, a build or the nightly) has held the "
                f"cache {cache_dir} for more than {timeout:.0f} s.",
                fix="wait for it to finish and run the command again; if no such run exists, a crashed one left "
                "its lock: the lock is released when that process ends.",
            ) from None
    try:
        yield
    finally:
        lock.release()


def tag_cache(cache_dir: Path) -> None:
    """Mark the folder as a pytorch-winbuild cache (CACHEDIR.TAG), once; a folder that cannot be written stays
    as it is (a read-only cache is only read)."""
    tag = cache_dir / TAG_NAME
    if tag.is_file() and not tag.is_symlink():
        return
    with contextlib.suppress(OSError):
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(tag, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(TAG_TEXT)


def is_cache(cache_dir: Path) -> bool:
    """Whether pytorch-winbuild made this folder its cache: its CACHEDIR.TAG, or (a cache from before the tag) an
    archive folder under deps/ holding the marker only pytorch-winbuild writes."""
    tag = cache_dir / TAG_NAME
    try:
        if tag.is_file() and not tag.is_symlink() and "pytorch-winbuild" in tag.read_text("ascii", "replace")[:512]:
            return True
        folders = list(deps_root(cache_dir).iterdir()) if deps_root(cache_dir).is_dir() else []
    except OSError:
        return False
    return any(read_marker(folder) is not None for folder in folders if folder.is_dir() and not folder.is_symlink())


def write_error(exc: OSError, path: Path) -> DependencyError:
    """A DependencyError for a failed write: a full disk says so and how much room is left."""
    if exc.errno == errno.ENOSPC:
        try:
            free = f" ({shutil.disk_usage(path.parent).free // (1024 * 1024)} MB free)"
        except OSError:
            free = ""
        return DependencyError(
            f"the disk holding {path.parent} is full{free}.",
            fix="free some space (`invoke clean --downloads` removes downloaded archives) or pass --cache-dir on "
            "a larger disk, then run the command again.",
        )
    return DependencyError(
        f"cannot write {path} ({exc.strerror or exc}).",
        fix="check that the cache folder is writable and not held open by another program, or pass --cache-dir "
        "elsewhere.",
    )
