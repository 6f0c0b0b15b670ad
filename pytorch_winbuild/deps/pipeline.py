"""The cold path of fetch-deps: download (or copy) and verify, then extract, overlapped.

Downloads run in one thread pool and extractions in another, so one archive extracts while the
next is still downloading. Every archive is checked against the published checksums (deps.toml,
the shipped lock) or the cache's first-use record before it is renamed out of its `.part` file; one
without a published checksum is recorded in the cache's lock only once it has extracted with the
expected layout. A failed download leaves no `.part` file (one stopped by Ctrl-C stays, to resume).
Kept apart from fetch.py so a warm run never imports requests or py7zr.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import requests

from pytorch_winbuild import atomic_file
from pytorch_winbuild.deps import cache
from pytorch_winbuild.deps.archive_checks import BadArchive
from pytorch_winbuild.deps.download import (
    Cancelled,
    Download,
    DownloadSettings,
    Received,
    copy_local,
    new_session,
    sha256_of,
    size_bound,
)
from pytorch_winbuild.deps.extract import install_archive
from pytorch_winbuild.deps.lockfile import LockEntry, LockFile, Pin, contradicted, pins_for
from pytorch_winbuild.deps.progress import make_progress
from pytorch_winbuild.deps.records import FIRST_USE, FetchedArchive, Source, trust_of
from pytorch_winbuild.deps.remedies import remedies_for
from pytorch_winbuild.errors import DependencyError
from pytorch_winbuild.knowledge.catalog import Archive
from pytorch_winbuild.text.redact import redact_text


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
        shipped: LockFile,
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
        self.shipped = shipped  # build_config/deps.lock: read only
        self.lock = lock  # the cache's first-use record (or --lock-file)
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
            with (
                ThreadPoolExecutor(jobs, thread_name_prefix="fetch-deps-download") as downloads,
                ThreadPoolExecutor(extract_workers, thread_name_prefix="fetch-deps-extract") as extractions,
            ):
                try:
                    obtaining = {
                        downloads.submit(self._obtain, archive, row): archive for row, archive in enumerate(archives)
                    }
                    installing: dict[Future[FetchedArchive], Archive] = {}
                    for future in as_completed(obtaining):
                        archive = obtaining[future]
                        try:
                            obtained = future.result()
                        except DependencyError as exc:
                            errors.append((archive, exc))
                            continue
                        installing[extractions.submit(self._install, archive, obtained)] = archive
                    for installed in as_completed(installing):
                        archive = installing[installed]
                        try:
                            results[archive] = installed.result()
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

    def _pins(self, archive: Archive) -> list[Pin]:
        """The checksums a download must match: the published ones, else the cache's record (unless --update-lock)."""
        return pins_for(archive, self.shipped, self.lock, update_lock=self.update_lock)

    def _expected_size(self, archive: Archive) -> tuple[int | None, str]:
        """The size a download must have, and where it is recorded (for the messages)."""
        for pin in self._pins(archive):
            if pin.size is not None:
                return pin.size, f"recorded for it in {pin.where}"
        return None, ""

    def _where(self, archive: Archive) -> str:
        if self.source.folder is not None:
            return str(self.source.folder / archive.file_name)
        return (self.source.base_url or archive.base_url) + archive.file_name

    def _obtain(self, archive: Archive, row: int) -> _Obtained:
        started = time.monotonic()
        final = cache.download_path(self.cache_dir, archive)
        part = cache.partial_path(self.cache_dir, archive)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise cache.write_error(exc, final) from None
        if final.exists():
            expected_size, size_source = self._expected_size(archive)
            limit, limit_text = size_bound(self.settings, expected_size, size_source)
            if final.stat().st_size > limit:  # not read: past the bound, it cannot be the archive
                self.log(
                    f"{archive.file_name}: the copy in {final.parent} is larger than {limit_text}; fetching it again"
                )
                final.unlink()
            else:
                sha256, size = sha256_of(final, self.settings.chunk_size)
                if self._mismatch(archive, sha256, size) is None:
                    return _Obtained(final, sha256, size, 0, "extracted from downloads/", started)
                self.log(
                    f"{archive.file_name}: the copy in {final.parent} does not match the expected checksum; "
                    "fetching it again"
                )
                final.unlink()
        try:
            received, action = self._receive(archive, row, part)
            self._verify(archive, received)
            try:
                atomic_file.replace(part, final)
            except OSError as exc:
                raise cache.write_error(exc, final) from None
        except Cancelled:
            raise  # Ctrl-C: the .part stays, and the next run resumes it
        except BaseException:
            _discard(part)  # a failed download never leaves a .part behind (an endless body, a full disk, a bad file)
            raise
        return _Obtained(final, received.sha256, received.size, received.transferred, action, started)

    def _receive(self, archive: Archive, row: int, part: Path) -> tuple[Received, str]:
        progress = make_progress(archive.file_name, row, self.log, copying=self.source.folder is not None)
        expected_size, size_source = self._expected_size(archive)  # a copy has the bound a download has
        if self.source.folder is not None:
            remedies = remedies_for(self.source, archive)
            received = copy_local(
                self.source.folder / archive.file_name,
                part,
                settings=self.settings,
                progress=progress,
                cancel=self.cancel,
                missing_fix=remedies.missing,
                expected_size=expected_size,
                size_source=size_source,
                limit_fix=remedies.limits,
            )
            return received, "copied"
        assert self._session is not None
        received = Download(
            self._where(archive),
            part,
            session=self._session,
            settings=self.settings,
            expected_size=expected_size,
            size_source=size_source,
            progress=progress,
            cancel=self.cancel,
            log=self.log,
            remedies=remedies_for(self.source, archive),
        ).run()
        return received, "downloaded"

    def _mismatch(self, archive: Archive, sha256: str, size: int) -> str | None:
        """What a file's checksum or size contradicts (published checksums, or the cache's record unless
        --update-lock), or None."""
        pin = contradicted(self._pins(archive), sha256, size)
        if pin is None:
            return None
        size_text = f" ({pin.size} bytes)" if pin.size is not None else ""
        return (
            f"SHA-256 {pin.sha256}{size_text} "
            f"{'published in' if pin.published else 'recorded at its first download in'} {pin.where}"
        )

    def _verify(self, archive: Archive, received: Received) -> None:
        conflict = self._mismatch(archive, received.sha256, received.size)
        if conflict is None:
            entry = self.lock.get(archive.file_name)
            if (
                self.update_lock
                and entry is not None
                and entry.sha256 != received.sha256
                and not any(p.published for p in self._pins(archive))
            ):
                self.log(
                    f"{archive.file_name}: differs from {self.lock.path} (SHA-256 {entry.sha256}); accepting "
                    "the new file because of --update-lock"
                )
            return
        published = any(pin.published for pin in self._pins(archive))
        fix = (
            "run the command again to fetch it afresh; if the mismatch stays, the file on the server or mirror is "
            "not the published one: get it from the public bucket or another mirror (--update-lock does not override "
            "a published checksum)."
            if published
            else "run the command again to fetch it afresh; if the mismatch stays, the file on the server or mirror "
            "differs from the one recorded: accept it with `invoke fetch-deps --update-lock` only if you trust "
            "where it comes from."
        )
        raise DependencyError(
            f"checksum mismatch for {archive.file_name} from {redact_text(self._where(archive))}: expected "
            f"{conflict}, got SHA-256 {received.sha256} ({received.size} bytes). The file was deleted; nothing was "
            "extracted.",
            fix=fix,
        )

    def _install(self, archive: Archive, obtained: _Obtained) -> FetchedArchive:
        target = cache.deps_dir(self.cache_dir, archive)
        try:
            tool = install_archive(
                obtained.file,
                archive,
                target,
                sha256=obtained.sha256,
                size=obtained.size,
                prefer=self.prefer,
                native=self.native,
                log=self.log,
            )
        except BadArchive:
            obtained.file.unlink(missing_ok=True)
            raise
        self.log(f"{archive.file_name}: extracted with {tool} into {target}")
        pins = self._pins(archive)
        if pins:
            trust, where = trust_of(pins, obtained.sha256)
        else:
            trust, where = FIRST_USE, str(self.lock.path)
            self._record(archive, LockEntry(sha256=obtained.sha256, size=obtained.size))
        seconds = time.monotonic() - obtained.started
        return FetchedArchive(
            archive=archive,
            path=target,
            downloaded_bytes=obtained.transferred,
            seconds=seconds,
            action=obtained.action,
            trust=trust,
            checked_against=where,
            sha256=obtained.sha256,
        )

    def _record(self, archive: Archive, entry: LockEntry) -> None:
        """Pin, in the cache's lock, the checksum of an archive nothing published vouches for, once it has
        extracted completely."""
        with self._lock_write:
            if self.lock.get(archive.file_name) == entry:
                return
            try:
                self.lock.record(archive.file_name, entry)
            except OSError as exc:
                self.log(
                    f"warning: could not record the checksum of {archive.file_name} in {self.lock.path} "
                    f"({exc.strerror or exc}); pass a writable --lock-file"
                )
                return
            self.log(
                f"{archive.file_name}: recorded SHA-256 {entry.sha256} in {self.lock.path} "
                "(trust on first use: no published checksum to verify it against; later downloads must match it)"
            )


def _discard(part: Path) -> None:
    with contextlib.suppress(OSError):  # Windows: held open by a virus scanner; the next run starts it over
        part.unlink(missing_ok=True)


def _combined(errors: list[tuple[Archive, DependencyError]]) -> DependencyError:
    if len(errors) == 1:
        return errors[0][1]
    message = f"{len(errors)} archives failed: " + " ".join(
        f"({i}) {archive.file_name}: {error.message}" for i, (archive, error) in enumerate(errors, 1)
    )
    fixes = list(dict.fromkeys(error.fix for _, error in errors if error.fix))
    return DependencyError(message, fix=" Also: ".join(fixes) if fixes else None)
