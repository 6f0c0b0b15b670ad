"""fetch_archives against a real HTTP server on 127.0.0.1 with injected faults, and from folders.

For every fault: the error class and message, what the cache holds afterwards (nothing a later
run would trust), and that the next run recovers.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from deps_support import MAGMA_BCJ2, MKL, FaultServer, Fetcher, Made, copy_files, same_tree, self_signed_tls

from pytorch_winbuild.deps.cache import MARKER_NAME, deps_dir, download_path, installed_path, read_marker
from pytorch_winbuild.deps.cache_clean import clean
from pytorch_winbuild.deps.fetch import format_summary
from pytorch_winbuild.deps.lockfile import LockEntry, LockFile
from pytorch_winbuild.errors import BusyError, DependencyError
from pytorch_winbuild.knowledge.catalog import Archive

pytestmark = pytest.mark.network


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def by_name(archives: list[Archive], file_name: str) -> Archive:
    return next(a for a in archives if a.file_name == file_name)


def assert_not_trusted(fetch: Fetcher, archive: Archive) -> None:
    """Nothing of `archive` that a later run or a build would trust."""
    assert installed_path(fetch.cache_dir, archive) is None
    assert not deps_dir(fetch.cache_dir, archive).exists()
    assert not download_path(fetch.cache_dir, archive).exists()
    assert fetch.work_folders() == []
    assert LockFile.load(fetch.lock_path).get(archive.file_name) is None


def assert_installed(fetch: Fetcher, made: Made, archive: Archive) -> None:
    folder = installed_path(fetch.cache_dir, archive)
    assert folder is not None and same_tree(made.trees[archive.file_name], folder)
    expected = sha256(made.files[archive.file_name])
    marker = read_marker(folder)
    assert marker is not None and marker.sha256 == expected
    assert LockFile.load(fetch.lock_path).get(archive.file_name) == LockEntry(
        expected, made.files[archive.file_name].stat().st_size
    )
    assert fetch.work_folders() == []


def test_cold_fetch_records_the_lock_and_a_warm_run_does_nothing(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    cold = fetch(cuda101, mirror=server.url)
    assert [item.action for item in cold.archives] == ["downloaded", "downloaded"]
    assert cold.downloaded_bytes == sum(made.files[a.file_name].stat().st_size for a in cuda101)
    for archive in cuda101:
        assert_installed(fetch, made, archive)
    assert cold.folder("mkl") == deps_dir(fetch.cache_dir, cuda101[0])
    assert {v.name for v in cold.variables()} == {"CMAKE_INCLUDE_PATH", "LIB", "MAGMA_HOME"}
    served = len(server.requests)

    warm = fetch(cuda101, mirror=server.url)
    assert [item.action for item in warm.archives] == ["cached", "cached"]
    assert warm.downloaded_bytes == 0 and len(server.requests) == served
    assert warm.seconds < 0.5
    assert [item.path for item in warm.archives] == [item.path for item in cold.archives]


def test_connection_dropped_mid_body_resumes_with_range(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    server.fault(MKL).drop_after.append(300_000)
    result = fetch(cuda101, mirror=server.url)
    first, second = server.gets(MKL)
    assert first.status == 200 and first.sent == 300_000
    start = int(re.fullmatch(r"bytes=(\d+)-", second.range or "").group(1))
    assert 0 < start <= 300_000 and second.status == 206
    size = made.files[MKL].stat().st_size
    assert result.archives[0].downloaded_bytes == size  # resumed, not downloaded twice
    assert "retrying" in fetch.log
    assert_installed(fetch, made, by_name(cuda101, MKL))


def test_503_twice_then_200(server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]) -> None:
    server.fault(MAGMA_BCJ2).statuses.extend([503, 503])
    fetch(cuda101, mirror=server.url)
    assert [r.status for r in server.gets(MAGMA_BCJ2)] == [503, 503, 200]
    assert fetch.log.count("HTTP 503 Service Unavailable; retrying") == 2
    assert_installed(fetch, made, by_name(cuda101, MAGMA_BCJ2))


def test_503_until_the_retries_run_out_then_the_next_run_recovers(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    server.fault(MAGMA_BCJ2).statuses.extend([503] * 3)
    with pytest.raises(DependencyError) as caught:
        fetch(cuda101, mirror=server.url)
    assert caught.value.exit_code == 4
    assert "HTTP 503" in caught.value.message and "3 attempts in a row" in caught.value.message
    assert "--mirror" in caught.value.fix and "resume" in caught.value.fix
    magma = by_name(cuda101, MAGMA_BCJ2)
    assert_not_trusted(fetch, magma)
    assert_installed(fetch, made, by_name(cuda101, MKL))  # the other archive was not held back
    result = fetch(cuda101, mirror=server.url)
    assert [item.action for item in result.archives] == ["cached", "downloaded"]
    assert_installed(fetch, made, magma)


def test_server_ignoring_range_restarts_cleanly(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    fault = server.fault(MKL)
    fault.drop_after.append(300_000)
    fault.ignore_range = True
    result = fetch(cuda101, mirror=server.url)
    _first, second = server.gets(MKL)
    assert second.range is not None and second.status == 200
    assert "ignored the resume request; downloading from the start" in fetch.log
    size = made.files[MKL].stat().st_size
    assert size < result.archives[0].downloaded_bytes <= size + 300_000
    assert_installed(fetch, made, by_name(cuda101, MKL))


def test_stalled_response_times_out_and_resumes(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    fault = server.fault(MKL)
    fault.stall_after.append(200_000)
    fault.stall_seconds = 3.0
    fetch(cuda101, mirror=server.url)
    _first, second = server.gets(MKL)
    assert second.range is not None and second.range != "bytes=0-" and second.status == 206
    assert "timed out" in fetch.log.lower()
    assert_installed(fetch, made, by_name(cuda101, MKL))


def test_server_that_stays_silent_fails_cleanly_and_the_next_run_recovers(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    fault = server.fault(MKL)
    fault.stall_after.extend([0, 0, 0])
    fault.stall_seconds = 3.0
    with pytest.raises(DependencyError, match="timed out") as caught:
        fetch(cuda101[:1], mirror=server.url)
    assert caught.value.exit_code == 4
    assert_not_trusted(fetch, cuda101[0])
    fetch(cuda101[:1], mirror=server.url)
    assert_installed(fetch, made, cuda101[0])


def test_truncated_archive_is_deleted_and_not_recorded(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive], tmp_path: Path
) -> None:
    truncated = tmp_path / "truncated.7z"
    data = made.files[MKL].read_bytes()
    truncated.write_bytes(data[: len(data) * 2 // 3])
    server.files[MKL] = truncated
    with pytest.raises(DependencyError, match=r"mkl_2020\.2\.254\.7z is damaged or incomplete") as caught:
        fetch(cuda101[:1], mirror=server.url)
    assert caught.value.exit_code == 4 and "run the command again" in caught.value.fix
    assert_not_trusted(fetch, cuda101[0])
    server.files[MKL] = made.files[MKL]
    fetch(cuda101[:1], mirror=server.url)
    assert_installed(fetch, made, cuda101[0])


def test_wrong_checksum_against_the_lock_file_then_update_lock(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    size = made.files[MKL].stat().st_size
    LockFile.load(fetch.lock_path).record(MKL, LockEntry("0" * 64, size))
    with pytest.raises(DependencyError) as caught:
        fetch(cuda101[:1], mirror=server.url)
    paragraph = caught.value.paragraph()
    assert caught.value.exit_code == 4
    assert (
        f"checksum mismatch for {MKL}" in paragraph and "0" * 64 in paragraph and sha256(made.files[MKL]) in paragraph
    )
    assert "--update-lock" in paragraph
    assert installed_path(fetch.cache_dir, cuda101[0]) is None and not deps_dir(fetch.cache_dir, cuda101[0]).exists()
    assert not download_path(fetch.cache_dir, cuda101[0]).exists() and fetch.work_folders() == []
    assert LockFile.load(fetch.lock_path).get(MKL) == LockEntry("0" * 64, size)  # unchanged without --update-lock

    fetch(cuda101[:1], mirror=server.url, update_lock=True)
    assert "accepting the new file because of --update-lock" in fetch.log
    assert_installed(fetch, made, cuda101[0])


def test_size_differing_from_the_lock_file_stops_before_the_body(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    LockFile.load(fetch.lock_path).record(MKL, LockEntry("0" * 64, 12345))
    with pytest.raises(DependencyError, match="12345 bytes are expected"):
        fetch(cuda101[:1], mirror=server.url)
    assert "downloading" not in fetch.log  # refused on the headers, before reading the body
    assert not download_path(fetch.cache_dir, cuda101[0]).exists()
    assert not (fetch.cache_dir / "downloads" / f"{MKL}.part").exists()


def test_mirror_missing_a_file(server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]) -> None:
    del server.files[MAGMA_BCJ2]
    with pytest.raises(DependencyError) as caught:
        fetch(cuda101, mirror=server.url)
    paragraph = caught.value.paragraph()
    assert f"{server.url}{MAGMA_BCJ2} answered HTTP 404" in paragraph
    assert (
        "a mirror is a flat folder holding the same file names as https://s3.amazonaws.com/ossci-windows/" in paragraph
    )
    assert [r.status for r in server.gets(MAGMA_BCJ2)] == [404]  # not retried
    assert_not_trusted(fetch, by_name(cuda101, MAGMA_BCJ2))
    assert_installed(fetch, made, by_name(cuda101, MKL))
    server.files[MAGMA_BCJ2] = made.files[MAGMA_BCJ2]
    fetch(cuda101, mirror=server.url)
    assert_installed(fetch, made, by_name(cuda101, MAGMA_BCJ2))


def test_credentials_in_a_mirror_url_never_reach_messages(
    server: FaultServer, fetch: Fetcher, cuda101: list[Archive]
) -> None:
    del server.files[MKL]
    mirror = server.url.replace("http://", "http://builder:s3cr3t-pw@")
    with pytest.raises(DependencyError) as caught:
        fetch(cuda101[:1], mirror=mirror)
    assert "s3cr3t-pw" not in caught.value.paragraph() and "builder:***@" in caught.value.paragraph()
    assert "s3cr3t-pw" not in fetch.log


def test_file_mirror_and_from_dir_work_offline(
    fetch: Fetcher, made: Made, cuda101: list[Archive], tmp_path: Path
) -> None:
    folder = copy_files(made.files, tmp_path / "mirror folder")
    result = fetch(cuda101, mirror=folder.as_uri())
    assert [item.action for item in result.archives] == ["copied", "copied"]
    # Trusted on first use, taken from a folder: the summary names no server the user never used.
    assert "Unverified archives" in format_summary(result) and "server" not in format_summary(result)
    assert fetch.log.count(": copying (") == 2 and fetch.log.count(": copied ") == 2  # nothing was downloaded
    assert "downloading" not in fetch.log and "received" not in fetch.log
    for archive in cuda101:
        assert_installed(fetch, made, archive)

    other = Fetcher(tmp_path / "second")
    other.lock_path = fetch.lock_path  # the checksums recorded above must hold for hand-downloaded files too
    result = other(cuda101, from_dir=folder)
    assert [item.action for item in result.archives] == ["copied", "copied"]
    for archive in cuda101:
        assert installed_path(other.cache_dir, archive) is not None


def test_a_cache_folder_holding_7zip_wildcards_extracts_in_place(
    made: Made, cuda101: list[Archive], tmp_path: Path
) -> None:
    """Linux folder names may hold * and ?: 7-Zip reads them as wildcards in an archive's path, and a * in
    -o as the archive's name (it extracted into a sibling folder named after the archive, then the layout
    check failed). Both archives go through the real 7zz here, MKL too (prefer="native")."""
    folder = copy_files(made.files, tmp_path / "by hand")
    odd = Fetcher(tmp_path / "builds * 2026?")
    result = odd(cuda101, from_dir=folder, prefer="native")
    assert [item.action for item in result.archives] == ["copied", "copied"]
    for archive in cuda101:
        assert_installed(odd, made, archive)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["builds * 2026?", "by hand"]  # nothing beside the cache


def test_from_dir_missing_a_file_says_where_to_download_it(
    fetch: Fetcher, made: Made, cuda101: list[Archive], tmp_path: Path
) -> None:
    folder = copy_files({MKL: made.files[MKL]}, tmp_path / "by hand")
    with pytest.raises(DependencyError) as caught:
        fetch(cuda101, from_dir=folder)
    assert f"{folder / MAGMA_BCJ2} does not exist or cannot be read" in caught.value.message
    assert f"download https://s3.amazonaws.com/ossci-windows/{MAGMA_BCJ2} by hand into {folder}" in caught.value.fix
    assert_installed(fetch, made, by_name(cuda101, MKL))


def test_kept_downloads_reextract_without_network_after_deps_are_removed(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    fetch(cuda101, mirror=server.url)
    shutil.rmtree(fetch.cache_dir / "deps")
    served = len(server.requests)
    result = fetch(cuda101, mirror=server.url)
    assert [item.action for item in result.archives] == ["extracted from downloads/"] * 2
    assert result.downloaded_bytes == 0 and len(server.requests) == served


def test_leftovers_of_an_interrupted_run_are_not_trusted_and_are_swept(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    mkl = by_name(cuda101, MKL)
    half = deps_dir(fetch.cache_dir, mkl)
    (half / "include").mkdir(parents=True)
    (half / "include" / "mkl.h").write_text("half")
    (half / "lib").mkdir()
    work = fetch.cache_dir / "deps" / ".tmp-mkl_2020.2.254-crashed"
    work.mkdir()
    (fetch.cache_dir / "downloads").mkdir()
    (fetch.cache_dir / "downloads" / f"{MKL}.part").write_bytes(made.files[MKL].read_bytes()[:100_000])
    assert installed_path(fetch.cache_dir, mkl) is None
    fetch(cuda101, mirror=server.url)
    assert not work.exists() and fetch.work_folders() == []
    assert (half / MARKER_NAME).is_file()
    assert server.gets(MKL)[0].range == "bytes=100000-"
    assert_installed(fetch, made, mkl)


def test_two_fetches_at_once_do_the_work_once(
    server: FaultServer, made: Made, cuda101: list[Archive], tmp_path: Path
) -> None:
    for name in made.files:
        server.fault(name).seconds_per_chunk = 0.02
    fetchers = [Fetcher(tmp_path), Fetcher(tmp_path)]
    errors: list[BaseException] = []

    def run(fetcher: Fetcher) -> None:
        try:
            fetcher(cuda101, mirror=server.url)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f,)) for f in fetchers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    for archive in cuda101:
        assert len(server.gets(archive.file_name)) == 1
        assert_installed(fetchers[0], made, archive)
    assert any("waiting for another pytorch-winbuild run" in f.log for f in fetchers)


def test_tls_is_verified_and_a_ca_bundle_from_the_environment_is_used(
    made: Made, fetch: Fetcher, cuda101: list[Archive], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    context, certificate = self_signed_tls(tmp_path)
    tls_server = FaultServer(made.files, tls=context).start()
    try:
        with pytest.raises(DependencyError) as caught:
            fetch(cuda101[:1], mirror=tls_server.url)
        assert "TLS certificate" in caught.value.message and "REQUESTS_CA_BUNDLE" in caught.value.fix
        assert_not_trusted(fetch, cuda101[0])
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificate))
        fetch(cuda101[:1], mirror=tls_server.url)
        assert_installed(fetch, made, cuda101[0])
    finally:
        tls_server.stop()


def test_a_run_holding_the_cache_too_long_is_reported_busy(
    server: FaultServer, fetch: Fetcher, cuda101: list[Archive]
) -> None:
    fetch.cache_dir.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire(); print('held', "
            "flush=True); time.sleep(30)",
            str(fetch.cache_dir / ".lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(BusyError) as caught:
            fetch(cuda101, mirror=server.url, lock_timeout=0.3)
        assert caught.value.exit_code == 7 and "has held the cache" in caught.value.message
        with pytest.raises(BusyError):
            clean(fetch.cache_dir, ["deps"], older_than=None, timeout=0.3, log=fetch.lines.append, on_removed=print)
        assert server.requests == []
    finally:
        holder.kill()
        holder.wait()
    fetch(cuda101, mirror=server.url)  # the lock is released when its process ends


def test_sparse_log_lines_without_a_terminal(server: FaultServer, fetch: Fetcher, cuda101: list[Archive]) -> None:
    fetch(cuda101, mirror=server.url)
    for archive in cuda101:
        lines = [line for line in fetch.lines if line.startswith(archive.file_name)]
        assert [line.split(": ")[1].split(" ")[0] for line in lines] == [
            "downloading",
            "received",
            "extracted",
            "recorded",
        ]


def test_a_complete_partial_file_is_finished_without_a_body(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    """A run stopped between the last byte and the rename: the server answers 416 for the range past the end."""
    (fetch.cache_dir / "downloads").mkdir(parents=True)
    shutil.copyfile(made.files[MKL], fetch.cache_dir / "downloads" / f"{MKL}.part")
    result = fetch(cuda101[:1], mirror=server.url)
    (request,) = server.gets(MKL)
    assert request.status == 416 and request.range == f"bytes={made.files[MKL].stat().st_size}-"
    assert result.downloaded_bytes == 0
    assert_installed(fetch, made, cuda101[0])


def test_a_partial_file_longer_than_the_archive_starts_over(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive]
) -> None:
    (fetch.cache_dir / "downloads").mkdir(parents=True)
    size = made.files[MKL].stat().st_size
    (fetch.cache_dir / "downloads" / f"{MKL}.part").write_bytes(b"\0" * (size + 10))
    result = fetch(cuda101[:1], mirror=server.url)
    assert [(r.status, r.range) for r in server.gets(MKL)] == [(416, f"bytes={size + 10}-"), (200, None)]
    assert result.downloaded_bytes == size
    assert_installed(fetch, made, cuda101[0])


def test_proxy_from_the_environment_is_used(
    server: FaultServer, fetch: Fetcher, made: Made, cuda101: list[Archive], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test server doubles as an HTTP proxy; the mirror's host name does not even resolve."""
    monkeypatch.setenv("HTTP_PROXY", server.url)
    fetch(cuda101[:1], mirror="http://ossci-mirror.invalid/windows/")
    (request,) = server.gets(MKL)
    assert request.target == f"http://ossci-mirror.invalid/windows/{MKL}"
    assert_installed(fetch, made, cuda101[0])
