"""Issue 11 (items 4, 5): hostile or broken mirrors on a real HTTP server on 127.0.0.1, and the lock files.

Each server misbehaves in one way: an endless body, a body larger than announced or recorded, a
byte at a time, a host name that does not resolve. Every case must end within seconds with exit
code 4, name the URL and the limit, write no more than the limit and leave no `.part` behind.
The tracked build_config/deps.lock is never written: first-seen checksums go to the cache's lock,
and the output says which archives are unverified.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from deps_support import FAST, MKL, FaultServer, Fetcher, Made, run_cli

from pytorch_winbuild.deps.cache import download_path, installed_path, partial_path
from pytorch_winbuild.deps.fetch import format_summary
from pytorch_winbuild.deps.lockfile import LockEntry, LockFile
from pytorch_winbuild.deps.records import FIRST_USE, PINNED, VERIFIED
from pytorch_winbuild.errors import DependencyError
from pytorch_winbuild.knowledge.catalog import Archive, select_archives
from pytorch_winbuild.knowledge.config_files import config_dir

pytestmark = pytest.mark.network

# Small limits so that every case ends in about a second.
LIMITED = replace(FAST, read_timeout=2.0, max_size=2_000_000, speed_limit=16 * 1024, speed_time=1.0, deadline=20.0)
SMALL_MAX = replace(LIMITED, max_size=300_000)
SERVER_CAP = 256 * 1024 * 1024  # a safety net: the endless server stops here even if the client never does
TRACKED_LOCK = config_dir() / "deps.lock"


def mkl() -> list[Archive]:
    return select_archives(cuda=None, mkl_version="2020.2.254", magma_versions=[])


class HostileServer:
    """http.server on 127.0.0.1 answering every GET in one way ("endless", "drip", "drop-then-503",
    "huge-length"), counting bytes sent."""

    def __init__(self, mode: str, *, drip_interval: float = 0.2, length: int = 1_000_000) -> None:
        self.mode = mode
        self.sent = 0
        self.requests = 0
        self._stop = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes: no length needed

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner.requests += 1
                with contextlib.suppress(OSError):  # the client hung up: what a client that stops must do
                    owner._answer(self, drip_interval, length)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    def _answer(self, handler: BaseHTTPRequestHandler, drip_interval: float, length: int) -> None:
        if self.mode == "drop-then-503" and self.requests > 1:
            handler.send_response(503)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-7z-compressed")
        if self.mode == "endless":
            handler.end_headers()
            chunk = b"\0" * 65536
            while self.sent < SERVER_CAP and not self._stop.is_set():
                handler.wfile.write(chunk)
                self.sent += len(chunk)
        elif self.mode == "drip":
            handler.send_header("Content-Length", str(length))
            handler.end_headers()
            while self.sent < length and not self._stop.is_set():
                handler.wfile.write(b"x")
                handler.wfile.flush()
                self.sent += 1
                self._stop.wait(drip_interval)
        elif self.mode == "drop-then-503":
            handler.send_header("Content-Length", str(length))
            handler.end_headers()
            handler.wfile.write(b"\0" * 200_000)
            handler.wfile.flush()
            self.sent += 200_000
            handler.connection.shutdown(socket.SHUT_RDWR)
        elif self.mode == "huge-length":
            handler.send_header("Content-Length", str(length))
            handler.end_headers()
            handler.wfile.write(b"\0" * 1000)
            self.sent += 1000

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


def no_part(fetch: Fetcher, archive: Archive) -> bool:
    downloads = fetch.cache_dir / "downloads"
    leftovers = sorted(p.name for p in downloads.iterdir()) if downloads.is_dir() else []
    return not partial_path(fetch.cache_dir, archive).exists() and leftovers == []


def stopped_after(message: str) -> int:
    return int(re.search(r"stopped after (\d+) bytes", message).group(1))


@pytest.fixture
def tracked_lock() -> Iterator[bytes]:
    """The tracked build_config/deps.lock's bytes; the test fails if they changed."""
    before = TRACKED_LOCK.read_bytes()
    yield before
    assert TRACKED_LOCK.read_bytes() == before, "fetch-deps rewrote the tracked build_config/deps.lock"


# --- size limits --------------------------------------------------------------------------------


def test_endless_body_stops_at_the_size_the_lock_records(fetch: Fetcher) -> None:
    archives = mkl()
    LockFile.load(fetch.lock_path).record(MKL, LockEntry("a" * 64, 200_000))
    with HostileServer("endless") as server:
        started = time.monotonic()
        with pytest.raises(DependencyError) as caught:
            fetch(archives, mirror=server.url, download_settings=LIMITED)
        seconds = time.monotonic() - started
    error = caught.value
    assert error.exit_code == 4 and seconds < 3
    assert f"{server.url}{MKL} sent more than the 200000 bytes recorded for it in {fetch.lock_path}" in error.message
    assert stopped_after(error.message) <= 200_000  # never more on disk than the recorded size
    assert no_part(fetch, archives[0])
    assert server.requests == 1  # not retried
    assert installed_path(fetch.cache_dir, archives[0]) is None


def test_endless_body_of_unknown_size_stops_at_max_size(fetch: Fetcher) -> None:
    archives = mkl()
    with HostileServer("endless") as server, pytest.raises(DependencyError) as caught:
        fetch(archives, mirror=server.url, download_settings=SMALL_MAX)
    message = caught.value.message
    assert f"{server.url}{MKL} sent more than the limit of 300000 bytes for an archive of unknown size" in message
    assert "[download] max_size" in message and "deps.toml" in caught.value.fix
    assert stopped_after(message) <= 300_000
    assert no_part(fetch, archives[0])
    assert LockFile.load(fetch.lock_path).get(MKL) is None  # nothing recorded


def test_announced_length_over_max_size_is_refused_before_the_body(fetch: Fetcher) -> None:
    archives = mkl()
    with (
        HostileServer("huge-length", length=10 * 1024**3) as server,
        pytest.raises(
            DependencyError, match=r"announces 10737418240 bytes, more than the limit of 300000 bytes"
        ) as caught,
    ):
        fetch(archives, mirror=server.url, download_settings=SMALL_MAX)
    assert caught.value.exit_code == 4
    assert "downloading" not in fetch.log  # refused on the headers
    assert no_part(fetch, archives[0])


def test_default_max_size_comes_from_deps_toml() -> None:
    from pytorch_winbuild.deps.download import DownloadSettings
    from pytorch_winbuild.knowledge.catalog import load_catalog

    limits = load_catalog().download
    assert limits.max_size == 4 * 1024**3 == DownloadSettings().max_size
    assert (limits.speed_limit, limits.speed_time) == (1024, 30.0)
    assert limits.deadline == DownloadSettings().deadline


# --- slow servers -------------------------------------------------------------------------------


def test_dripping_body_is_stopped_by_the_speed_limit(fetch: Fetcher) -> None:
    archives = mkl()
    with HostileServer("drip", drip_interval=0.1) as server:
        started = time.monotonic()
        with pytest.raises(DependencyError) as caught:
            fetch(archives, mirror=server.url, download_settings=LIMITED)
        seconds = time.monotonic() - started
    message = caught.value.message
    assert caught.value.exit_code == 4 and 1.0 <= seconds < 3
    assert (
        f"{server.url}{MKL} sent" in message
        and "bytes/s over the last 1 s, under the 16384 bytes/s required" in message
    )
    assert "[download] speed_limit, speed_time" in message
    assert server.requests == 1  # a slow server is not asked again
    assert no_part(fetch, archives[0])


def test_a_steady_but_endless_transfer_is_stopped_by_the_deadline(
    server: FaultServer, fetch: Fetcher, made: Made
) -> None:
    archives = mkl()
    server.fault(MKL).seconds_per_chunk = 0.2  # 64 KiB every 0.2 s: above the speed limit, but it takes ~4 s
    settings = replace(LIMITED, max_size=LIMITED.max_size * 100, deadline=1.0)
    started = time.monotonic()
    with pytest.raises(DependencyError) as caught:
        fetch(archives, mirror=server.url, download_settings=settings)
    seconds = time.monotonic() - started
    assert caught.value.exit_code == 4 and seconds < 2.5
    assert (
        f"downloading {server.url}{MKL} took longer than the 1 s allowed for one archive ([download] deadline)"
        in caught.value.message
    )
    assert no_part(fetch, archives[0])


def test_a_fast_correct_body_passes_the_limits(server: FaultServer, fetch: Fetcher, made: Made) -> None:
    archives = mkl()
    settings = replace(LIMITED, max_size=made.files[MKL].stat().st_size)  # exactly the size: allowed
    result = fetch(archives, mirror=server.url, download_settings=settings)
    assert [item.action for item in result.archives] == ["downloaded"]
    assert installed_path(fetch.cache_dir, archives[0]) is not None


# --- name resolution and retries ----------------------------------------------------------------


def test_unresolvable_host_fails_at_once_without_retries(fetch: Fetcher) -> None:
    archives = mkl()
    started = time.monotonic()
    with pytest.raises(DependencyError) as caught:
        fetch(
            archives, mirror="http://nonexistent.invalid/", download_settings=replace(LIMITED, attempts=6, backoff=1.0)
        )
    seconds = time.monotonic() - started
    error = caught.value
    assert seconds < 3, f"a DNS failure took {seconds:.1f} s"
    assert error.exit_code == 4
    assert f"could not download http://nonexistent.invalid/{MKL}: the host name does not resolve" in error.message
    assert "nonexistent.invalid" in error.message and "Not retried" in error.message
    assert "retrying" not in fetch.log
    assert "--mirror" in error.fix and "DNS" in error.fix
    assert no_part(fetch, archives[0])


def test_connection_drops_are_retried_a_bounded_number_of_times_and_leave_no_part(fetch: Fetcher) -> None:
    archives = mkl()
    with (
        HostileServer("drop-then-503") as server,
        pytest.raises(DependencyError, match="3 attempts in a row without progress") as caught,
    ):
        fetch(archives, mirror=server.url, download_settings=LIMITED)
    assert "Connection broken" in fetch.log and "HTTP 503 Service Unavailable; retrying" in fetch.log
    assert server.requests == 4  # the first (200 KB, then a reset) and 3 attempts without progress
    assert caught.value.exit_code == 4 and "next run starts it afresh" in caught.value.fix
    assert no_part(fetch, archives[0])  # the 200 KB received were not kept


def test_a_part_kept_by_ctrl_c_is_still_resumed(server: FaultServer, fetch: Fetcher, made: Made) -> None:
    """Only failures delete the .part: one left by an interrupted run (Ctrl-C, a killed process) is resumed."""
    archives = mkl()
    part = partial_path(fetch.cache_dir, archives[0])
    part.parent.mkdir(parents=True)
    part.write_bytes(made.files[MKL].read_bytes()[:100_000])
    fetch(archives, mirror=server.url, download_settings=LIMITED)
    assert server.gets(MKL)[0].range == "bytes=100000-"
    assert download_path(fetch.cache_dir, archives[0]).is_file() and not part.exists()


# --- lock files: the tracked one is never written -------------------------------------------------


def test_first_download_goes_to_the_cache_lock_and_is_reported_unverified(
    server: FaultServer, made: Made, tmp_path: Path, tracked_lock: bytes
) -> None:
    archives = mkl()
    fetch = Fetcher(tmp_path)
    lines: list[str] = []
    from pytorch_winbuild.deps.fetch import fetch_archives

    result = fetch_archives(
        archives, cache_dir=fetch.cache_dir, mirror=server.url, download_settings=LIMITED, log=lines.append
    )
    expected = LockEntry(hashlib.sha256(made.files[MKL].read_bytes()).hexdigest(), made.files[MKL].stat().st_size)
    cache_lock = fetch.cache_dir / "deps.lock"
    assert LockFile.load(cache_lock).get(MKL) == expected
    assert TRACKED_LOCK.read_bytes() == tracked_lock
    (item,) = result.archives
    assert (item.trust, item.checked_against, item.sha256) == (FIRST_USE, str(cache_lock), expected.sha256)
    summary = format_summary(result)
    assert f"UNVERIFIED: trusted on first use, recorded in {cache_lock}" in summary
    assert "Unverified archives (trust on first use" in summary and f"{MKL}  SHA-256 {expected.sha256}" in summary
    assert any("trust on first use" in line and str(cache_lock) in line for line in lines)

    again = fetch_archives(
        archives, cache_dir=fetch.cache_dir, mirror=server.url, download_settings=LIMITED, log=lines.append
    )
    assert (again.archives[0].action, again.archives[0].trust) == ("cached", PINNED)
    assert "UNVERIFIED: matches its first-use record" in format_summary(again)


def test_a_checksum_in_the_shipped_lock_verifies_and_is_not_overridden(
    server: FaultServer, made: Made, fetch: Fetcher, tmp_path: Path
) -> None:
    archives = mkl()
    shipped = tmp_path / "shipped.lock"
    good = LockEntry(hashlib.sha256(made.files[MKL].read_bytes()).hexdigest(), made.files[MKL].stat().st_size)
    shipped.write_text(f'["{MKL}"]\nsha256 = "{good.sha256}"\nsize = {good.size}\n', encoding="utf-8")
    before = shipped.read_bytes()
    result = fetch(archives, mirror=server.url, download_settings=LIMITED, shipped_lock_path=shipped)
    assert (result.archives[0].trust, result.archives[0].checked_against) == (VERIFIED, str(shipped))
    assert f"verified against {shipped}" in format_summary(result) and "Unverified" not in format_summary(result)
    assert LockFile.load(fetch.lock_path).get(MKL) is None  # a verified archive needs no first-use record
    assert shipped.read_bytes() == before

    other = Fetcher(tmp_path / "other")
    wrong = tmp_path / "wrong.lock"
    wrong.write_text(f'["{MKL}"]\nsha256 = "{"0" * 64}"\nsize = {good.size}\n', encoding="utf-8")
    for update_lock in (False, True):  # --update-lock accepts changes of first-use records, not of published checksums
        with pytest.raises(DependencyError) as caught:
            other(
                archives, mirror=server.url, download_settings=LIMITED, shipped_lock_path=wrong, update_lock=update_lock
            )
        assert f"expected SHA-256 {'0' * 64} ({good.size} bytes) published in {wrong}" in caught.value.message
        assert "--update-lock does not override a published checksum" in caught.value.fix
        assert no_part(other, archives[0]) and not download_path(other.cache_dir, archives[0]).exists()


def test_cli_without_lock_file_never_writes_the_tracked_lock(
    server: FaultServer, tmp_path: Path, tracked_lock: bytes
) -> None:
    cache = tmp_path / "cache"
    result = run_cli(
        "fetch-deps", "--cuda", "cpu", "--mkl-version", "2020.2.254", "--mirror", server.url, "--cache-dir", str(cache)
    )
    assert result.returncode == 0, result.stderr
    assert TRACKED_LOCK.read_bytes() == tracked_lock
    assert LockFile.load(cache / "deps.lock").get(MKL) is not None
    assert (
        "UNVERIFIED: trusted on first use" in result.stdout
        and "Unverified archives (trust on first use" in result.stdout
    )
    assert MKL in result.stdout.split("Unverified archives", 1)[1]
