"""The cold path of fetch-deps: download (or copy) and verify, then extract, overlapped.

Downloads run in one thread pool and extractions in another, so one archive extracts while the
next is still downloading. Every archive is verified against the catalog's and the lock file's
checksums before it is renamed out of its `.part` file, and recorded in the lock file only once
it has extracted with the expected layout. Kept apart from fetch.py so a warm run never imports
requests or py7zr.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import requests

from ..errors import DependencyError
from ..redact import redact_text
from . import cache
from .catalog import Archive
from .download import DownloadSettings, Received, copy_local, download, new_session, sha256_of
from .extract import BadArchive, install_archive
from .fetch import FetchedArchive, Source
from .lockfile import LockEntry, LockFile
from .progress import make_progress


@dataclass(frozen=True)
class _Obtained:
    """A verified archive file in downloads/, waiting for extraction."""

    file: Path
    sha256: str
    size: int
    transferred: int
    action: str
    started: float


class Pipeline:
    """Fetches the archives of one run; the caller holds the cache lock."""

    def __init__(
        self,
        *,
        cache_dir: Path,
        source: Source,
        lock: LockFile,
        update_lock: bool,
        settings: DownloadSettings,
        prefer: str,
        native: str | None,
        jobs: int,
        log: Callable[[str], None],
    ) -> None:
        self.cache_dir = cache_dir
        self.source = source
        self.lock = lock
        self.update_lock = update_lock
        self.settings = settings
        self.prefer = prefer  # "native" or "py7zr" (see build_config/deps.toml [extract])
        self.native = native
        self.jobs = jobs
        self.log = log
        self.cancel = threading.Event()
        self._lock_write = threading.Lock()
        self._session: requests.Session | None = None

    def run(self, archives: list[Archive]) -> dict[Archive, FetchedArchive]:
        """Fetch every archive; failures of some do not stop the others, and are raised together at the end."""
        jobs = max(1, min(self.jobs or 4, len(archives)))
        # LZMA decoding is single-threaded per archive: one extraction per core is the fast path.
        extract_workers = max(1, min(len(archives), os.cpu_count() or 1))
        results: dict[Archive, FetchedArchive] = {}
        errors: list[tuple[Archive, DependencyError]] = []
        if self.source.folder is None:
            self._session = new_session(jobs)
        try:
            with ThreadPoolExecutor(jobs, thread_name_prefix="fetch-deps-download") as downloads, ThreadPoolExecutor(
                extract_workers, thread_name_prefix="fetch-deps-extract"
            ) as extractions:
                try:
                    obtaining = {downloads.submit(self._obtain, archive, row): archive for row, archive in enumerate(archives)}
                    installing: dict[Future[FetchedArchive], Archive] = {}
                    for future in as_completed(obtaining):
                        archive = obtaining[future]
                        try:
                            obtained = future.result()
                        except DependencyError as exc:
                            errors.append((archive, exc))
                            continue
                        installing[extractions.submit(self._install, archive, obtained)] = archive
                    for future in as_completed(installing):
                        archive = installing[future]
                        try:
                            results[archive] = future.result()
                        except DependencyError as exc:
                            errors.append((archive, exc))
                except BaseException:
                    self.cancel.set()
                    raise
        finally:
            if self._session is not None:
                self._session.close()
        if errors:
            raise _combined(errors)
        return results

    def _expected(self, archive: Archive) -> tuple[str | None, int | None]:
        """The checksum and size a download must have: the catalog's, else the lock file's (unless --update-lock)."""
        entry = self.lock.get(archive.file_name)
        sha256 = archive.sha256 or (entry.sha256 if entry and not self.update_lock else None)
        size = archive.size or (entry.size if entry and not self.update_lock else None)
        return sha256, size

    def _where(self, archive: Archive) -> str:
        if self.source.folder is not None:
            return str(self.source.folder / archive.file_name)
        return (self.source.base_url or archive.base_url) + archive.file_name

    def _missing_fix(self, archive: Archive) -> str:
        if self.source.folder is not None and self.source.from_dir:
            return f"download {archive.url} by hand into {self.source.folder}, or leave out --from-dir to download it."
        if self.source.folder is not None or self.source.base_url is not None:
            return (
                f"a mirror is a flat folder holding the same file names as {archive.base_url}: copy {archive.file_name} there, "
                "or leave out --mirror to use the public bucket."
            )
        return "the public bucket no longer serves this file: pick another version (--mkl-version, --magma-version), or get the file elsewhere and pass --from-dir."

    def _obtain(self, archive: Archive, row: int) -> _Obtained:
        started = time.monotonic()
        final = cache.download_path(self.cache_dir, archive)
        part = cache.partial_path(self.cache_dir, archive)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise cache.write_error(exc, final) from None
        if final.exists():
            sha256, size = sha256_of(final, self.settings.chunk_size)
            if self._mismatch(archive, sha256, size) is None:
                return _Obtained(final, sha256, size, 0, "extracted from downloads/", started)
            self.log(f"{archive.file_name}: the copy in {final.parent} does not match the expected checksum; fetching it again")
            final.unlink()
        expected_sha256, expected_size = self._expected(archive)
        progress = make_progress(archive.file_name, row, self.log)
        if self.source.folder is not None:
            received = copy_local(
                self.source.folder / archive.file_name, part, settings=self.settings, progress=progress, cancel=self.cancel, missing_fix=self._missing_fix(archive)
            )
            action = "copied"
        else:
            assert self._session is not None
            received = download(
                self._where(archive), part, session=self._session, settings=self.settings, expected_size=expected_size,
                progress=progress, cancel=self.cancel, log=self.log, missing_fix=self._missing_fix(archive),
            )
            action = "downloaded"
        self._verify(archive, received, part)
        try:
            os.replace(part, final)
        except OSError as exc:
            raise cache.write_error(exc, final) from None
        return _Obtained(final, received.sha256, received.size, received.transferred, action, started)

    def _mismatch(self, archive: Archive, sha256: str, size: int) -> str | None:
        """What a file's checksum or size contradicts (catalog, or lock file unless --update-lock), or None."""
        if archive.sha256 is not None and (sha256 != archive.sha256 or (archive.size is not None and size != archive.size)):
            return f"the published SHA-256 {archive.sha256} in build_config/deps.toml"
        entry = self.lock.get(archive.file_name)
        if entry is not None and not self.update_lock and (sha256 != entry.sha256 or size != entry.size):
            return f"SHA-256 {entry.sha256} ({entry.size} bytes) recorded in {self.lock.path}"
        return None

    def _verify(self, archive: Archive, received: Received, part: Path) -> None:
        conflict = self._mismatch(archive, received.sha256, received.size)
        if conflict is None:
            entry = self.lock.get(archive.file_name)
            if entry is not None and entry.sha256 != received.sha256:
                self.log(f"{archive.file_name}: differs from {self.lock.path} (SHA-256 {entry.sha256}); accepting the new file because of --update-lock")
            return
        part.unlink(missing_ok=True)
        raise DependencyError(
            f"checksum mismatch for {archive.file_name} from {redact_text(self._where(archive))}: expected {conflict}, got SHA-256 {received.sha256} "
            f"({received.size} bytes). The file was deleted; nothing was extracted.",
            fix="run the command again to fetch it afresh; if the mismatch stays, the file on the server or mirror differs from the one recorded: "
            "accept it with `invoke fetch-deps --update-lock` only if you trust where it comes from.",
        )

    def _install(self, archive: Archive, obtained: _Obtained) -> FetchedArchive:
        target = cache.deps_dir(self.cache_dir, archive)
        try:
            tool = install_archive(
                obtained.file, archive, target, sha256=obtained.sha256, size=obtained.size, prefer=self.prefer, native=self.native, log=self.log
            )
        except BadArchive:
            obtained.file.unlink(missing_ok=True)
            raise
        self.log(f"{archive.file_name}: extracted with {tool} into {target}")
        self._record(archive, LockEntry(sha256=obtained.sha256, size=obtained.size))
        seconds = time.monotonic() - obtained.started
        return FetchedArchive(archive=archive, path=target, downloaded_bytes=obtained.transferred, seconds=seconds, action=obtained.action)

    def _record(self, archive: Archive, entry: LockEntry) -> None:
        """Pin the checksum of an archive that has just proven itself by extracting completely."""
        with self._lock_write:
            if self.lock.get(archive.file_name) == entry:
                return
            try:
                self.lock.record(archive.file_name, entry)
            except OSError as exc:
                self.log(f"warning: could not record the checksum of {archive.file_name} in {self.lock.path} ({exc.strerror or exc}); pass a writable --lock-file")
                return
            self.log(f"{archive.file_name}: recorded SHA-256 {entry.sha256} in {self.lock.path}")


def _combined(errors: list[tuple[Archive, DependencyError]]) -> DependencyError:
    if len(errors) == 1:
        return errors[0][1]
    message = f"{len(errors)} archives failed: " + " ".join(f"({i}) {archive.file_name}: {error.message}" for i, (archive, error) in enumerate(errors, 1))
    fixes = list(dict.fromkeys(error.fix for _, error in errors if error.fix))
    return DependencyError(message, fix=" Also: ".join(fixes) if fixes else None)
