"""Getting one archive's bytes into a `.part` file, hashing them on the way.

HTTP(S) through requests: connect/read timeouts, retries with exponential backoff on connection
errors, timeouts and 5xx/429, resume with a Range request (a clean restart when the server
ignores it), proxies and CA bundles from the environment, TLS always verified. `file://` mirrors
and `--from-dir` copy from disk. The caller verifies the result and renames it into place.

Limits that keep a misbehaving server from holding a run or a disk: never more bytes than the
expected size (or `max_size` when no size is known), a transfer slower than `speed_limit` bytes/s
over `speed_time` seconds is stopped (curl's --speed-limit/--speed-time), so is one running past
`deadline`, and a host name that does not resolve fails at once instead of being retried.
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import requests
from requests.adapters import HTTPAdapter

from pytorch_winbuild import __version__
from pytorch_winbuild.deps.cache import write_error
from pytorch_winbuild.deps.catalog import DownloadLimits
from pytorch_winbuild.deps.progress import Progress
from pytorch_winbuild.deps.remedies import Remedies
from pytorch_winbuild.errors import DependencyError
from pytorch_winbuild.text.redact import redact_text

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")

# The defaults of build_config/deps.toml [download] (catalog.DownloadLimits holds them).
DEFAULT_MAX_SIZE = DownloadLimits.max_size  # 4 GiB; the largest MAGMA archives are well under 1 GiB
DEFAULT_SPEED_LIMIT = DownloadLimits.speed_limit  # 1024 bytes/s, like `curl --speed-limit 1024`
DEFAULT_SPEED_TIME = DownloadLimits.speed_time  # 30 s, like `curl --speed-time 30`
DEFAULT_DEADLINE = DownloadLimits.deadline  # 2 h for one archive, retries included: ~1 GiB at 150 KB/s


@dataclass(frozen=True)
class DownloadSettings:
    """Network behaviour; the defaults suit a large file on a slow or flaky link.

    build_config/deps.toml [download] sets max_size, speed_limit, speed_time and deadline.
    """

    connect_timeout: float = 15.0
    read_timeout: float = 60.0  # longest silence tolerated in the middle of a body
    attempts: int = 6  # consecutive attempts that receive nothing before giving up
    backoff: float = 1.0  # first wait between attempts; doubles each time
    max_backoff: float = 30.0
    chunk_size: int = 128 * 1024  # the most bytes taken from the socket at once
    max_size: int = DEFAULT_MAX_SIZE  # the most bytes written for an archive whose size nothing records
    speed_limit: int = DEFAULT_SPEED_LIMIT  # bytes/s; a body slower than this over speed_time seconds is stopped
    speed_time: float = DEFAULT_SPEED_TIME
    deadline: float = DEFAULT_DEADLINE  # seconds for one archive, retries and waits included


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


class _Pace:
    """curl's --speed-limit/--speed-time: the body's speed over the last `window` seconds."""

    def __init__(self, limit: int, window: float, now: float) -> None:
        self.limit = limit
        self.window = window
        self.samples: deque[tuple[float, int]] = deque([(now, 0)])

    def too_slow(self, now: float, received: int) -> float | None:
        """The speed in bytes/s when it stayed under the limit for a whole window, else None."""
        self.samples.append((now, received))
        while len(self.samples) > 2 and self.samples[1][0] <= now - self.window:
            self.samples.popleft()  # keep the newest sample at or before the window's start
        start, start_bytes = self.samples[0]
        if now - start < self.window:
            return None
        speed = (received - start_bytes) / (now - start)
        return speed if speed < self.limit else None


def _name_resolution_error(exc: BaseException) -> BaseException | None:
    """The failed DNS lookup behind a requests error (urllib3's NameResolutionError, a socket.gaierror), or None."""
    from urllib3 import exceptions

    resolution = getattr(exceptions, "NameResolutionError", None)  # urllib3 2.x
    stack: list[BaseException] = [exc]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, socket.gaierror) or (resolution is not None and isinstance(item, resolution)):
            return item
        if isinstance(item, exceptions.NewConnectionError) and "name or service not known" in str(item).lower():
            return item  # urllib3 1.x words it only in the message
        related = (item.__cause__, item.__context__, getattr(item, "reason", None), *item.args)
        stack.extend(x for x in related if isinstance(x, BaseException))
    return None


def _body(response: requests.Response, chunk_size: int) -> Iterator[bytes]:
    """The body as it arrives: whatever the socket holds, up to `chunk_size`, so that a server sending
    a byte a second is seen at once (iter_content waits for a whole chunk, up to the read timeout
    per byte). urllib3's errors become requests' ones, as iter_content does."""
    read1 = getattr(response.raw, "read1", None)
    if read1 is None:  # urllib3 1.x
        yield from response.iter_content(chunk_size=min(chunk_size, 16 * 1024))
        return
    from urllib3.exceptions import DecodeError, ProtocolError, ReadTimeoutError
    from urllib3.exceptions import SSLError as Urllib3SSLError

    while True:
        try:
            chunk = read1(chunk_size, decode_content=True)
        except ProtocolError as exc:
            raise requests.exceptions.ChunkedEncodingError(exc) from None
        except DecodeError as exc:
            raise requests.exceptions.ContentDecodingError(exc) from None
        except ReadTimeoutError as exc:
            raise requests.exceptions.ConnectionError(exc) from None
        except Urllib3SSLError as exc:
            raise requests.exceptions.SSLError(exc) from None
        if not chunk:
            return
        yield chunk


def size_bound(settings: DownloadSettings, expected_size: int | None, size_source: str = "expected") -> tuple[int, str]:
    """The most bytes a download or copy may write, and how a message names that bound: the size recorded for
    the archive (`size_source` says where), else [download] max_size."""
    if expected_size is not None:
        return expected_size, f"the {expected_size} bytes {size_source}"
    return settings.max_size, (
        f"the limit of {settings.max_size} bytes for an archive of unknown size ([download] max_size in "
        "build_config/deps.toml)"
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
    remedies: Remedies,
    size_source: str = "expected",
) -> Received:
    """Download `url` into `part`, resuming what is already there; return its checksum.

    At most `expected_size` bytes are written (`settings.max_size` when it is None); `size_source`
    says where that size comes from, for the message. Every failure raises DependencyError; the
    caller deletes `part` then (a Cancelled one stays, to resume).
    """
    shown = redact_text(url)
    name = part.name.removesuffix(".part")
    limit, limit_text = size_bound(settings, expected_size, size_source)
    started = time.monotonic()
    deadline_at = started + settings.deadline

    def past_deadline() -> DependencyError:
        return DependencyError(
            f"downloading {shown} took longer than the {settings.deadline:.0f} s allowed for one archive "
            "([download] deadline); stopped.",
            fix=remedies.limits,
        )

    digest, have = hashlib.sha256(), 0
    if part.exists():
        if part.stat().st_size > limit:  # by its size, before reading it: a huge .part is not hashed for nothing
            log(f"{name}: the partial download is larger than {limit_text}; starting over")
        else:
            digest, have = _hash_file(part, settings.chunk_size)
    if expected_size is not None and have == expected_size:
        return Received(sha256=digest.hexdigest(), size=have, transferred=0)

    transferred = 0
    failures = 0
    while True:
        if cancel.is_set():
            raise Cancelled()
        remaining = deadline_at - time.monotonic()
        if remaining <= 0:
            raise past_deadline()
        received_now = 0
        headers = {"Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        try:
            timeout = (min(settings.connect_timeout, remaining), min(settings.read_timeout, remaining))
            with session.get(url, headers=headers, stream=True, timeout=timeout) as response:
                status = response.status_code
                if status == 416 and have:
                    if response.headers.get("Content-Range") == f"bytes */{have}":
                        return Received(
                            sha256=digest.hexdigest(), size=have, transferred=transferred
                        )  # the .part was already complete
                    raise _Restart("the server refused to resume (HTTP 416)")
                if status >= 500 or status == 429:
                    raise _Retryable(f"HTTP {status} {response.reason}")
                if status >= 400:
                    raise DependencyError(
                        f"{shown} answered HTTP {status} {response.reason}: the file is not there or not readable.",
                        fix=remedies.missing,
                    )
                if status not in (200, 206):
                    raise DependencyError(
                        f"{shown} answered HTTP {status} {response.reason} instead of the file.", fix=remedies.missing
                    )
                total: int | None = None
                if status == 206:
                    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
                    if match is None or int(match.group(1)) != have:
                        raise _Restart(
                            f"the server resumed at the wrong place ({response.headers.get('Content-Range')!r})"
                        )
                    total = None if match.group(3) == "*" else int(match.group(3))
                else:
                    if have:
                        log(f"{name}: the server ignored the resume request; downloading from the start")
                        digest, have = hashlib.sha256(), 0
                    length = response.headers.get("Content-Length")
                    total = int(length) if length and length.isascii() and length.isdigit() else None
                if expected_size is not None and total is not None and total != expected_size:
                    raise DependencyError(
                        f"{shown} is {total} bytes, but {expected_size} bytes are expected: the file on the "
                        "server is not the one recorded.",
                        fix=remedies.replaced,
                    )
                if total is not None and total > limit:
                    raise DependencyError(
                        f"{shown} announces {total} bytes, more than {limit_text}; nothing was downloaded.",
                        fix=remedies.limits,
                    )
                progress.start(total, have)
                pace = _Pace(settings.speed_limit, settings.speed_time, time.monotonic())
                ended = False  # the body ended by itself, not by an error or a limit
                try:
                    with part.open("ab" if have else "wb") as out:
                        for chunk in _body(response, settings.chunk_size):
                            if cancel.is_set():
                                raise Cancelled()
                            if have + len(chunk) > limit:
                                raise DependencyError(
                                    f"{shown} sent more than {limit_text}: stopped after {have} bytes, "
                                    "before writing any more; the partial file was deleted.",
                                    fix=remedies.limits,
                                )
                            out.write(chunk)
                            digest.update(chunk)
                            have += len(chunk)
                            received_now += len(chunk)
                            progress.advance(len(chunk))
                            now = time.monotonic()
                            speed = pace.too_slow(now, received_now)
                            if speed is not None:
                                raise DependencyError(
                                    f"{shown} sent {speed:.0f} bytes/s over the last {settings.speed_time:g} s, "
                                    f"under the {settings.speed_limit} bytes/s required ([download] speed_limit, "
                                    f"speed_time); stopped after {have} bytes.",
                                    fix=remedies.limits,
                                )
                            if now > deadline_at:
                                raise past_deadline()
                    ended = True
                finally:
                    progress.close(complete=ended and (total is None or have == total))
                if total is not None and have > total:
                    raise _Restart(f"the server sent {have} bytes of a {total}-byte file")
                if total is not None and have < total:
                    raise _Retryable(f"the connection ended after {have} of {total} bytes")
                return Received(sha256=digest.hexdigest(), size=have, transferred=transferred + received_now)
        except requests.exceptions.SSLError as exc:
            raise DependencyError(
                f"the TLS certificate of {shown} could not be verified ({redact_text(str(exc))}).",
                fix="if a company proxy inspects HTTPS, point REQUESTS_CA_BUNDLE at its CA certificate file; TLS "
                "checks are never switched off.",
            ) from None
        except (
            requests.exceptions.InvalidURL,
            requests.exceptions.MissingSchema,
            requests.exceptions.InvalidSchema,
        ) as exc:
            raise DependencyError(
                f"{shown} is not a usable URL ({redact_text(str(exc))}).",
                fix=remedies.bad_url,
            ) from None
        except (requests.RequestException, _Retryable) as exc:
            unresolved = _name_resolution_error(exc) if isinstance(exc, requests.RequestException) else None
            if unresolved is not None:
                proxy = " (the proxy's name)" if isinstance(exc, requests.exceptions.ProxyError) else ""
                raise DependencyError(
                    f"could not download {shown}: the host name does not resolve{proxy} "
                    f"({redact_text(str(unresolved))}). Not retried: a name that does not resolve now will not "
                    "resolve a few seconds later.",
                    fix=remedies.unresolved,
                ) from None
            reason = redact_text(str(exc)) or type(exc).__name__
            transferred += received_now
            if isinstance(exc, _Restart):
                digest, have = hashlib.sha256(), 0
                part.unlink(missing_ok=True)
            failures = 0 if received_now else failures + 1
            if failures >= settings.attempts:
                raise DependencyError(
                    f"could not download {shown}: {reason} ({failures} attempts in a row without progress).",
                    fix=remedies.network,
                ) from None
            wait = min(settings.backoff * 2 ** max(failures - 1, 0), settings.max_backoff)
            if time.monotonic() + wait >= deadline_at:
                raise DependencyError(
                    f"could not download {shown} within the {settings.deadline:.0f} s allowed for one "
                    f"archive ([download] deadline): {reason}.",
                    fix=remedies.network,
                ) from None
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
    expected_size: int | None = None,
    size_source: str = "expected",
    limit_fix: str | None = None,
) -> Received:
    """Copy an archive from a folder (`--from-dir`, `file://` mirror) into `part`, hashing it.

    The same bound as a download: at most `expected_size` bytes (`settings.max_size` when it is None). A file
    whose size is past it is refused before anything is copied; one that turns out longer while it is read (it
    grows, or its size said less: /proc, a FUSE folder) is stopped before the chunk that would pass it. The
    caller deletes `part` after any failure. `limit_fix` is the fix for a file past the bound (default
    `missing_fix`).
    """
    limit_fix = limit_fix or missing_fix
    limit, limit_text = size_bound(settings, expected_size, size_source)
    try:
        total = source.stat().st_size
    except OSError:
        raise DependencyError(f"{source} does not exist or cannot be read.", fix=missing_fix) from None
    if not source.is_file():
        raise DependencyError(f"{source} is not a file.", fix=missing_fix)
    if total > limit:
        raise DependencyError(
            f"{source} is {total} bytes, more than {limit_text}; nothing was copied.",
            fix=limit_fix,
        )
    digest = hashlib.sha256()
    size = 0
    progress.start(total, 0)
    try:
        with source.open("rb") as src, part.open("wb") as out:
            while chunk := src.read(settings.chunk_size):
                if cancel.is_set():
                    raise Cancelled()
                if size + len(chunk) > limit:
                    raise DependencyError(
                        f"{source} holds more than {limit_text}: stopped after {size} bytes, before copying any "
                        "more; the partial copy was deleted.",
                        fix=limit_fix,
                    )
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
