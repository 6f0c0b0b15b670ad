"""Make archives present in the cache: nothing to do when their markers are valid, else fetch them.

The warm path reads a few small files and returns; it imports neither requests nor py7zr, so a
build that calls this on every run pays nothing. The cold path takes the cache lock (a second
run waits, then finds the work done) and hands the missing archives to pipeline.Pipeline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING
from urllib.parse import urlparse
from urllib.request import url2pathname

from ..errors import ConfigurationError
from ..redact import redact_text
from . import cache
from .catalog import Archive, BuildVariable, Catalog, archive_variables, load_catalog
from .lockfile import LockFile, default_lock_path
from .progress import human_size, log_line

if TYPE_CHECKING:
    from .download import DownloadSettings

DEFAULT_LOCK_TIMEOUT = 3600.0  # a second run waits this long for the first one's downloads


@dataclass(frozen=True)
class Source:
    """Where archive files come from: the catalog's bucket, a mirror URL, or a local folder."""

    base_url: str | None = None  # http(s) mirror ending in "/"; None with no folder → the catalog's URL
    folder: Path | None = None  # file:// mirror or --from-dir
    from_dir: bool = False


def resolve_source(mirror: str | None, from_dir: str | Path | None) -> Source:
    """Validate --mirror / --from-dir and say where files come from."""
    if mirror and from_dir:
        raise ConfigurationError("--mirror and --from-dir were both given.", fix="use --from-dir for files downloaded by hand, or --mirror for a server or folder holding them, not both.")
    if from_dir:
        folder = Path(from_dir).expanduser()
        if not folder.is_dir():
            raise ConfigurationError(f"--from-dir {folder}: no such folder.", fix="pass the folder holding the downloaded .7z files.")
        return Source(folder=folder, from_dir=True)
    if not mirror:
        return Source()
    parsed = urlparse(mirror)
    if parsed.scheme == "file":
        path = url2pathname(parsed.path)
        if parsed.netloc and parsed.netloc != "localhost":
            path = "//" + parsed.netloc + path  # a UNC share: file://server/share/
        folder = Path(path)
        if not folder.is_dir():
            raise ConfigurationError(f"--mirror {redact_text(mirror)}: the folder {folder} does not exist.", fix="pass file:///path/to/folder/ of an existing folder holding the .7z files.")
        return Source(folder=folder)
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return Source(base_url=mirror.rstrip("/") + "/")
    raise ConfigurationError(
        f"--mirror {redact_text(mirror)} is not an http://, https:// or file:// URL.",
        fix="pass the base URL of a flat folder holding the archives, e.g. https://mirror.example.com/ossci-windows/ or file:///D:/mirror/.",
    )


@dataclass(frozen=True)
class FetchedArchive:
    """Where one archive is and what this run did for it."""

    archive: Archive
    path: Path
    downloaded_bytes: int
    seconds: float
    action: str  # "cached", "downloaded", "copied", "extracted from downloads/"


@dataclass(frozen=True)
class FetchResult:
    archives: tuple[FetchedArchive, ...]
    seconds: float

    @property
    def downloaded_bytes(self) -> int:
        return sum(item.downloaded_bytes for item in self.archives)

    def folder(self, name: str) -> Path | None:
        """The folder of the archive named "mkl" or "magma", if it was requested."""
        return next((item.path for item in self.archives if item.archive.name == name), None)

    def variables(self) -> list[BuildVariable]:
        return [variable for item in self.archives for variable in archive_variables(item.archive, item.path)]


def describe_fetch(archives: Sequence[Archive], *, cache_dir: PurePath, mirror: str | None = None, from_dir: str | Path | None = None) -> str:
    """What `fetch-deps` would do, touching nothing: each archive, where it comes from, where it goes.

    `cache_dir` may be another machine's folder (a PureWindowsPath on Linux): then nothing here
    can say whether it is already there."""
    source = resolve_source(mirror, from_dir)
    local = isinstance(cache_dir, Path)
    lines = []
    for archive in archives:
        if source.folder is not None:
            origin = str(source.folder / archive.file_name)
        else:
            origin = redact_text((source.base_url or archive.base_url) + archive.file_name)
        folder = cache.deps_dir(cache_dir, archive)  # type: ignore[arg-type]
        state = ("already there" if cache.installed_path(cache_dir, archive) else "to fetch") if local else "on that machine"  # type: ignore[arg-type]
        lines.append(f"{archive.description}: {origin}")
        lines.append(f"  download  {cache.download_path(cache_dir, archive)}")  # type: ignore[arg-type]
        lines.append(f"  extract   {folder} ({state})")
    return "\n".join(lines) + "\n"


def format_summary(result: FetchResult) -> str:
    """Where each archive is and the variables a build sets, as cmd.exe lines."""
    lines = []
    for item in result.archives:
        done = "already in the cache" if item.action == "cached" else f"{item.action}, {human_size(item.downloaded_bytes)} in {item.seconds:.1f} s"
        lines.append(f"{item.archive.description}: {item.path} ({done})")
    variables = result.variables()
    if variables:
        lines.append("")
        lines.append("Variables the build needs (`invoke build` sets them itself):")
        for variable in variables:
            value = f"{variable.value};%{variable.name}%" if variable.prepend else variable.value
            lines.append(f'  set "{variable.name}={value}"')
    return "\n".join(lines)


def fetch_archives(
    archives: Sequence[Archive],
    *,
    cache_dir: Path,
    mirror: str | None = None,
    from_dir: str | Path | None = None,
    update_lock: bool = False,
    lock_path: Path | None = None,
    jobs: int = 0,
    download_settings: DownloadSettings | None = None,
    prefer: str | None = None,
    native_7zip: str | None = None,
    catalog: Catalog | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    log: Callable[[str], None] = log_line,
) -> FetchResult:
    """Make every archive present and trusted in `cache_dir`; return where each one is.

    `mirror` (http(s):// or file://) replaces the bucket's base URL; `from_dir` takes files
    downloaded by hand; `update_lock` accepts files whose checksum differs from the lock file.
    `jobs` = parallel downloads (0: one per archive, at most 4). `download_settings` is a
    download.DownloadSettings (timeouts, retries). `prefer` ("native"/"py7zr") and `native_7zip`
    (a 7-Zip program) override the catalog's extraction choice.
    """
    started = time.monotonic()
    cache_dir = Path(cache_dir)
    source = resolve_source(mirror, from_dir)
    lock = LockFile.load(lock_path or default_lock_path())
    done: dict[Archive, FetchedArchive] = {}
    pending = _not_installed(archives, cache_dir, lock, done)
    if pending:
        with cache.cache_lock(cache_dir, timeout=lock_timeout, log=log):
            cache.sweep_work_folders(cache_dir)
            lock = LockFile.load(lock.path)  # another run may have recorded checksums while we waited
            pending = _not_installed(pending, cache_dir, lock, done)
            if pending:
                done.update(_fetch_missing(pending, cache_dir, source, lock, update_lock, jobs, download_settings, prefer, native_7zip, catalog, log))
    return FetchResult(archives=tuple(done[archive] for archive in archives), seconds=time.monotonic() - started)


def _not_installed(archives: Sequence[Archive], cache_dir: Path, lock: LockFile, done: dict[Archive, FetchedArchive]) -> list[Archive]:
    """Record the installed archives in `done` and return the others."""
    pending = []
    for archive in archives:
        entry = lock.get(archive.file_name)
        folder = cache.installed_path(cache_dir, archive, entry.sha256 if entry else None)
        if folder is None:
            pending.append(archive)
        else:
            done[archive] = FetchedArchive(archive=archive, path=folder, downloaded_bytes=0, seconds=0.0, action="cached")
    return pending


def _fetch_missing(
    archives: list[Archive],
    cache_dir: Path,
    source: Source,
    lock: LockFile,
    update_lock: bool,
    jobs: int,
    download_settings: DownloadSettings | None,
    prefer: str | None,
    native_7zip: str | None,
    catalog: Catalog | None,
    log: Callable[[str], None],
) -> dict[Archive, FetchedArchive]:
    # Imported here: requests and py7zr cost ~0.25 s to import, and a warm run must not pay that.
    from .download import DownloadSettings  # noqa: F811
    from .extract import find_native_7zip
    from .pipeline import Pipeline

    extract_settings = (catalog or load_catalog()).extract
    pipeline = Pipeline(
        cache_dir=cache_dir, source=source, lock=lock, update_lock=update_lock, settings=download_settings or DownloadSettings(),
        prefer=prefer or extract_settings.prefer, native=native_7zip or find_native_7zip(extract_settings), jobs=jobs, log=log,
    )
    return pipeline.run(archives)
