"""Getting one archive's bytes into a `.part` file, hashing them on the way.

HTTP(S) through requests: connect/read timeouts, retries with exponential backoff on connection
errors, timeouts and 5xx/429, resume with a Range request (a clean restart when the server
ignores it), proxies and CA bundles from the environment, TLS always verified. `file://` mirrors
and `--from-dir` copy from disk. The caller verifies the result and renames it into place.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests
from requests.adapters import HTTPAdapter

from .. import __version__
from ..errors import DependencyError
from ..redact import redact_text
from .cache import write_error
from .progress import Progress

_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


@dataclass(frozen=True)
class DownloadSettings:
    """Network behaviour; the defaults suit a large file on a slow or flaky link."""

    connect_timeout: float = 15.0
    read_timeout: float = 60.0  # longest silence tolerated in the middle of a body
    attempts: int = 6  # consecutive attempts that receive nothing before giving up
    backoff: float = 1.0  # first wait between attempts; doubles each time
    max_backoff: float = 30.0
    chunk_size: int = 128 * 1024  # urllib3 waits for a whole chunk: small enough for steady progress on slow links


@dataclass(frozen=True)
class Received:
    """The complete `.part` file: its checksum, its size, and how many bytes this run moved."""

    sha256: str
    size: int
    transferred: int


class Cancelled(Exception):
    """The run is stopping (Ctrl-C in the main thread); the `.part` file stays for a resume."""


class _Retryable(Exception):
    """A failure worth another attempt: 5xx, 429, a body shorter than announced."""


class _Restart(_Retryable):
    """The partial file cannot be continued (the server resumed elsewhere or sent too much): start over."""


def new_session(pool_size: int) -> requests.Session:
    """A session that takes proxies and CA bundles from the environment (trust_env) and verifies TLS."""
    session = requests.Session()
    session.headers["User-Agent"] = f"pytorch-winbuild/{__version__}"
    adapter = HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


def _hash_file(path: Path, chunk_size: int) -> tuple[hashlib._Hash, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
            size += len(chunk)
    return digest, size


def sha256_of(path: Path, chunk_size: int = 1 << 20) -> tuple[str, int]:
    digest, size = _hash_file(path, chunk_size)
    return digest.hexdigest(), size


def _network_fix() -> str:
    return (
        "check the network connection and the proxy settings (HTTPS_PROXY, NO_PROXY); where the bucket is blocked or slow, "
        "use --mirror URL or download the files by hand into a folder and pass --from-dir DIR. "
        "Run the command again to resume: the partial download is kept."
    )


def download(
    url: str,
    part: Path,
    *,
    session: requests.Session,
    settings: DownloadSettings,
    expected_size: int | None,
    progress: Progress,
    cancel: threading.Event,
    log: Callable[[str], None],
    missing_fix: str,
) -> Received:
    """Download `url` into `part`, resuming what is already there; return its checksum."""
    shown = redact_text(url)
    name = part.name.removesuffix(".part")
    digest, have = _hash_file(part, settings.chunk_size) if part.exists() else (hashlib.sha256(), 0)
    if expected_size is not None and have > expected_size:
        log(f"{name}: the partial download is larger than the expected {expected_size} bytes; starting over")
        digest, have = hashlib.sha256(), 0
    if expected_size is not None and have == expected_size:
        return Received(sha256=digest.hexdigest(), size=have, transferred=0)

    transferred = 0
    failures = 0
    while True:
        if cancel.is_set():
            raise Cancelled()
        received_now = 0
        headers = {"Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        try:
            with session.get(url, headers=headers, stream=True, timeout=(settings.connect_timeout, settings.read_timeout)) as response:
                status = response.status_code
                if status == 416 and have:
                    if response.headers.get("Content-Range") == f"bytes */{have}":
                        return Received(sha256=digest.hexdigest(), size=have, transferred=transferred)  # the .part was already complete
                    raise _Restart("the server refused to resume (HTTP 416)")
                if status >= 500 or status == 429:
                    raise _Retryable(f"HTTP {status} {response.reason}")
                if status >= 400:
                    raise DependencyError(f"{shown} answered HTTP {status} {response.reason}: the file is not there or not readable.", fix=missing_fix)
                if status not in (200, 206):
                    raise DependencyError(f"{shown} answered HTTP {status} {response.reason} instead of the file.", fix=missing_fix)
                total: int | None = None
                if status == 206:
                    match = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
                    if match is None or int(match.group(1)) != have:
                        raise _Restart(f"the server resumed at the wrong place ({response.headers.get('Content-Range')!r})")
                    total = None if match.group(3) == "*" else int(match.group(3))
                else:
                    if have:
                        log(f"{name}: the server ignored the resume request; downloading from the start")
                        digest, have = hashlib.sha256(), 0
                    length = response.headers.get("Content-Length")
                    total = int(length) if length and length.isdigit() else None
                if expected_size is not None and total is not None and total != expected_size:
                    part.unlink(missing_ok=True)
                    raise DependencyError(
                        f"{shown} is {total} bytes, but {expected_size} bytes are expected: the file on the server is not the one recorded.",
                        fix="check the mirror holds the same files as the public bucket; if the file was really replaced, accept it with --update-lock.",
                    )
                progress.start(total, have)
                try:
                    with part.open("ab" if have else "wb") as out:
                        for chunk in response.iter_content(chunk_size=settings.chunk_size):
                            if cancel.is_set():
                                raise Cancelled()
                            out.write(chunk)
                            digest.update(chunk)
                            have += len(chunk)
                            received_now += len(chunk)
                            progress.advance(len(chunk))
                finally:
                    progress.close(complete=total is None or have == total)
                if total is not None and have > total:
                    raise _Restart(f"the server sent {have} bytes of a {total}-byte file")
                if total is not None and have < total:
                    raise _Retryable(f"the connection ended after {have} of {total} bytes")
                return Received(sha256=digest.hexdigest(), size=have, transferred=transferred + received_now)
        except requests.exceptions.SSLError as exc:
            raise DependencyError(
                f"the TLS certificate of {shown} could not be verified ({redact_text(str(exc))}).",
                fix="if a company proxy inspects HTTPS, point REQUESTS_CA_BUNDLE at its CA certificate file; TLS checks are never switched off.",
            ) from None
        except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema, requests.exceptions.InvalidSchema) as exc:
            raise DependencyError(f"{shown} is not a usable URL ({redact_text(str(exc))}).", fix="pass --mirror as http(s)://host/folder/ or file:///folder/.") from None
        except (requests.RequestException, _Retryable) as exc:
            reason = redact_text(str(exc)) or type(exc).__name__
            transferred += received_now
            if isinstance(exc, _Restart):
                digest, have = hashlib.sha256(), 0
                part.unlink(missing_ok=True)
            failures = 0 if received_now else failures + 1
            if failures >= settings.attempts:
                raise DependencyError(f"could not download {shown}: {reason} ({failures} attempts in a row without progress).", fix=_network_fix()) from None
            wait = min(settings.backoff * 2 ** max(failures - 1, 0), settings.max_backoff)
            log(f"{name}: {reason}; retrying in {wait:.1f} s")
            if cancel.wait(wait):
                raise Cancelled() from None
        except OSError as exc:
            raise write_error(exc, part) from None


def copy_local(
    source: Path,
    part: Path,
    *,
    settings: DownloadSettings,
    progress: Progress,
    cancel: threading.Event,
    missing_fix: str,
) -> Received:
    """Copy an archive from a folder (`--from-dir`, `file://` mirror) into `part`, hashing it."""
    try:
        total = source.stat().st_size
    except OSError:
        raise DependencyError(f"{source} does not exist or cannot be read.", fix=missing_fix) from None
    if not source.is_file():
        raise DependencyError(f"{source} is not a file.", fix=missing_fix)
    digest = hashlib.sha256()
    size = 0
    progress.start(total, 0)
    try:
        with source.open("rb") as src, part.open("wb") as out:
            while chunk := src.read(settings.chunk_size):
                if cancel.is_set():
                    raise Cancelled()
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
                progress.advance(len(chunk))
    except OSError as exc:
        if exc.filename is not None and Path(exc.filename) == source:
            raise DependencyError(f"cannot read {source} ({exc.strerror or exc}).", fix=missing_fix) from None
        raise write_error(exc, part) from None
    finally:
        progress.close(complete=size == total)
    return Received(sha256=digest.hexdigest(), size=size, transferred=size)
