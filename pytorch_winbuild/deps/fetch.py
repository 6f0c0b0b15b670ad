"""Make archives present in the cache: nothing to do when their markers are valid, else fetch them.

The warm path reads a few small files and returns; it imports neither requests nor py7zr, so a
build that calls this on every run pays nothing. The cold path takes the cache lock (a second
run waits, then finds the work done) and hands the missing archives to pipeline.Pipeline.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from pytorch_winbuild.deps import cache
from pytorch_winbuild.deps.lockfile import LockFile, default_lock_path, pins_for
from pytorch_winbuild.deps.lockfile import shipped_lock_path as default_shipped_lock_path
from pytorch_winbuild.deps.progress import human_size, log_line
from pytorch_winbuild.deps.records import (
    FIRST_USE,
    PINNED,
    VERIFIED,
    FetchedArchive,
    Source,
    resolve_source,
    trust_of,
)
from pytorch_winbuild.knowledge.catalog import Archive, BuildVariable, Catalog, archive_variables, load_catalog
from pytorch_winbuild.text.redact import redact_text
from pytorch_winbuild.text.terminal_text import terminal_lines

if TYPE_CHECKING:
    from pytorch_winbuild.deps.download import DownloadSettings

DEFAULT_LOCK_TIMEOUT = 3600.0  # a second run waits this long for the first one's downloads


@dataclass(frozen=True)
class FetchResult:
    archives: tuple[FetchedArchive, ...]
    seconds: float

    @property
    def downloaded_bytes(self) -> int:
        return sum(item.downloaded_bytes for item in self.archives)

    @property
    def unverified(self) -> list[FetchedArchive]:
        """The archives no published checksum vouches for (trust on first use)."""
        return [item for item in self.archives if not item.verified]

    def folder(self, name: str) -> Path | None:
        """The folder of the archive named "mkl" or "magma", if it was requested."""
        return next((item.path for item in self.archives if item.archive.name == name), None)

    def variables(self) -> list[BuildVariable]:
        return [variable for item in self.archives for variable in archive_variables(item.archive, item.path)]


def describe_fetch(
    archives: Sequence[Archive], *, cache_dir: PurePath, mirror: str | None = None, from_dir: str | Path | None = None
) -> str:
    """What `fetch-deps` would do, touching nothing: each archive, where it comes from, where it goes.

    `cache_dir` may be another machine's folder (a PureWindowsPath on Linux): then nothing here
    can say whether it is already there. Paths and URLs come from flags and the configuration, so the
    lines pass terminal_lines."""
    source = resolve_source(mirror, from_dir)
    lines = []
    for archive in archives:
        if source.folder is not None:
            origin = str(source.folder / archive.file_name)
        else:
            origin = redact_text((source.base_url or archive.base_url) + archive.file_name)
        folder = cache.deps_dir(cache_dir, archive)
        state = (
            ("already there" if cache.installed_path(cache_dir, archive) else "to fetch")
            if isinstance(cache_dir, Path)
            else "on that machine"
        )
        lines.append(f"{archive.description}: {origin}")
        lines.append(f"  download  {cache.download_path(cache_dir, archive)}")
        lines.append(f"  extract   {folder} ({state})")
    return terminal_lines(lines, show_sequences=True) + "\n"


def trust_text(item: FetchedArchive) -> str:
    """'verified against build_config/deps.lock', or why the archive is not verified."""
    if item.trust == VERIFIED:
        return f"verified against {item.checked_against}"
    if item.trust == FIRST_USE:
        return f"UNVERIFIED: trusted on first use, recorded in {item.checked_against}"
    if item.trust == PINNED:
        return f"UNVERIFIED: matches its first-use record in {item.checked_against}"
    return "UNVERIFIED: no checksum published or recorded"


def format_summary(result: FetchResult, *, windows: bool = os.name == "nt") -> str:
    """Where each archive is, whether it is verified, and the variables a build sets, in the syntax of
    this machine's shell (variable_lines; for a terminal: terminal_lines, as the cache folder comes
    from a flag or the configuration)."""
    lines = []
    for item in result.archives:
        done = (
            "already in the cache"
            if item.action == "cached"
            else f"{item.action}, {human_size(item.downloaded_bytes)} in {item.seconds:.1f} s"
        )
        lines.append(f"{item.archive.description}: {item.path} ({done}; {trust_text(item)})")
    unverified = result.unverified
    if unverified:
        lines.append("")
        lines.append("Unverified archives (trust on first use: no published checksum exists for them):")
        for item in unverified:
            lines.append(f"  {item.archive.file_name}  SHA-256 {item.sha256 or 'unknown'}")
        lines.append(
            "This cache accepted the first copy it got of each; later copies must match it. To verify one, "
            "compare its SHA-256 with a copy you trust; a checksum from a published source belongs in "
            "build_config/deps.lock."
        )
    variables = result.variables()
    if variables:
        lines.append("")
        lines.extend(variable_lines(variables, windows=windows))
    return terminal_lines(lines, show_sequences=True)


# The archives are Windows builds: LIB is the Windows linker's list, `;`-separated whatever shell sets it
# (deps.toml's prepend; LLVM's llvm-lib, LibDriver.cpp getSearchPaths: $LIB split at ';').
_WINDOWS_LIST_SEPARATOR = ";"


def variable_lines(variables: Sequence[BuildVariable], *, windows: bool) -> list[str]:
    """The variables a Windows build sets for the archives, as lines to paste into this machine's shell:
    cmd's `set "NAME=value"` on Windows (`;%NAME%` after a prepended value), POSIX `export NAME='value'`
    elsewhere (a prepended value joined with `;`, only when the variable holds something: LIB is the
    Windows linker's list, which MSVC's link.exe and LLVM's lld-link/llvm-lib split at `;` on every
    host). A value that cannot be pasted safely is named, with why, in a remark of that shell (`rem`,
    `#`) instead of printed, so pasting the lines runs nothing else."""
    from pytorch_winbuild.errors import ConfigurationError
    from pytorch_winbuild.text import quoting_bat, quoting_sh

    if windows:
        lines = ["Variables the build needs, for cmd (`invoke build` sets them itself):"]
    else:
        lines = [
            "Variables a Windows build needs for these archives, for this shell (they hold Windows libraries: "
            "a build on this machine uses none of them, as PyTorch finds these libraries from the system or pip; "
            "on Windows `invoke build` sets them itself):"
        ]
    for variable in variables:
        try:
            if windows:
                line = quoting_bat.printed_set_line(variable.name, variable.value, prepend=variable.prepend)
            elif variable.prepend:
                line = quoting_sh.prepend_line(variable.name, variable.value, _WINDOWS_LIST_SEPARATOR)
            else:
                line = quoting_sh.set_line(variable.name, variable.value)
        except ConfigurationError as error:
            remark = "rem" if windows else "#"
            line = f"{remark} {variable.name}: not printed, as no line sets it safely: {error.message}"
        lines.append("  " + line)
    return lines


def fetch_archives(
    archives: Sequence[Archive],
    *,
    cache_dir: Path,
    mirror: str | None = None,
    mirror_label: str = "--mirror",
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
    shipped_lock_path: Path | None = None,
    before_writing: Callable[[], None] | None = None,
) -> FetchResult:
    """Make every archive present in `cache_dir`; return where each one is and how far it is trusted.

    `mirror` (http(s):// or file://) replaces the bucket's base URL, and messages name it as
    `mirror_label` (--mirror, winbuild.mirror); `from_dir` takes files downloaded by hand.
    Checksums: an archive must match the published ones (deps.toml [known], the shipped lock
    `shipped_lock_path`, default build_config/deps.lock, which is only read);
    without one it is trusted on first use and recorded in `lock_path` (default <cache>/deps.lock),
    which later downloads must match unless `update_lock`. `jobs` = parallel downloads (0: one per
    archive, at most 4). `download_settings` is a download.DownloadSettings (timeouts, retries,
    size/speed/time limits; default: deps.toml [download]). `prefer` ("native"/"py7zr") and
    `native_7zip` (a 7-Zip program) override the catalog's extraction choice. `before_writing` runs before
    the first write to the cache (its lock), only when an archive is missing: a cache that holds everything is
    only read, so it may be read-only.
    """
    started = time.monotonic()
    cache_dir = Path(cache_dir)
    source = resolve_source(mirror, from_dir, mirror_label)
    shipped = LockFile.load(shipped_lock_path or default_shipped_lock_path())
    lock = LockFile.load(lock_path or default_lock_path(cache_dir))
    done: dict[Archive, FetchedArchive] = {}
    pending = _not_installed(archives, cache_dir, shipped, lock, done)
    if pending:
        if before_writing is not None:
            before_writing()
        with cache.cache_lock(cache_dir, timeout=lock_timeout, log=log):
            cache.sweep_work_folders(cache_dir)
            lock = LockFile.load(lock.path)  # another run may have recorded checksums while we waited
            pending = _not_installed(pending, cache_dir, shipped, lock, done)
            if pending:
                done.update(
                    _fetch_missing(
                        pending,
                        cache_dir,
                        source,
                        shipped,
                        lock,
                        update_lock,
                        jobs,
                        download_settings,
                        prefer,
                        native_7zip,
                        catalog,
                        log,
                    )
                )
    return FetchResult(archives=tuple(done[archive] for archive in archives), seconds=time.monotonic() - started)


def _not_installed(
    archives: Sequence[Archive], cache_dir: Path, shipped: LockFile, lock: LockFile, done: dict[Archive, FetchedArchive]
) -> list[Archive]:
    """Record the installed archives in `done` and return the others."""
    pending = []
    for archive in archives:
        pins = pins_for(archive, shipped, lock)
        folder = None
        checksums: list[str | None] = [pin.sha256 for pin in pins] or [None]
        for expected in checksums:  # every pin must hold for the installed folder's marker
            folder = cache.installed_path(cache_dir, archive, expected)
            if folder is None:
                break
        if folder is None:
            pending.append(archive)
            continue
        marker = cache.read_marker(folder)
        sha256 = marker.sha256 if marker else ""
        trust, where = trust_of(pins, sha256)
        done[archive] = FetchedArchive(
            archive=archive,
            path=folder,
            downloaded_bytes=0,
            seconds=0.0,
            action="cached",
            trust=trust,
            checked_against=where,
            sha256=sha256,
        )
    return pending


def _fetch_missing(
    archives: list[Archive],
    cache_dir: Path,
    source: Source,
    shipped: LockFile,
    lock: LockFile,
    update_lock: bool,
    jobs: int,
    download_settings: DownloadSettings | None,
    prefer: str | None,
    native_7zip: str | None,
    catalog: Catalog | None,
    log: Callable[[str], None],
) -> dict[Archive, FetchedArchive]:
    # Imported here: requests costs ~0.1 s to import (py7zr as much, where no native 7-Zip reads the
    # archives), and a warm run must not pay that.
    from pytorch_winbuild.deps.download import DownloadSettings
    from pytorch_winbuild.deps.pipeline import Pipeline
    from pytorch_winbuild.deps.seven_zip import find_native_7zip

    catalog = catalog or load_catalog()
    extract_settings = catalog.extract
    limits = catalog.download
    settings = download_settings or DownloadSettings(
        max_size=limits.max_size, speed_limit=limits.speed_limit, speed_time=limits.speed_time, deadline=limits.deadline
    )
    pipeline = Pipeline(
        cache_dir=cache_dir,
        source=source,
        shipped=shipped,
        lock=lock,
        update_lock=update_lock,
        settings=settings,
        prefer=prefer or extract_settings.prefer,
        native=native_7zip or find_native_7zip(extract_settings),
        jobs=jobs,
        log=log,
    )
    return pipeline.run(archives)
