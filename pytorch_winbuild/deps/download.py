"""Getting one archive's bytes into a `.part` file, hashing them on the way.

HTTP(S) through requests (timeouts, retries with backoff, resume by Range, TLS always verified); `file://` mirrors and
`--from-dir` copy from disk. Size, speed and deadline limits keep a misbehaving server from holding a run or a disk.
The caller verifies the result and renames it into place. Design notes: docs/architecture.md.
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
from typing import IO

import requests
from requests.adapters import HTTPAdapter

from pytorch_winbuild import __version__
from pytorch_winbuild.deps.cache import write_error
from pytorch_winbuild.deps.progress import Progress
from pytorch_winbuild.deps.remedies import Remedies
from pytorch_winbuild.errors import DependencyError
from pytorch_winbuild.knowledge.catalog import DownloadLimits
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


class Download:
    """One archive's download into `part`, resuming what is already there: `Download(...).run()` returns its
    checksum. At most `expected_size` bytes are written (`settings.max_size` when it is None); `size_source`
    says where that size comes from, for the message. Every failure raises DependencyError; the caller deletes
    `part` then (a Cancelled one stays, to resume).

    Three parts: the retry loop (run), the reading of a response's status and size (_announced_total), and the
    streaming of its body into `part` (_stream). The state a retry carries over lives here: the bytes in `part`,
    their running checksum, what earlier attempts moved."""

    def __init__(
        self,
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
        size_source: str,
    ) -> None:
        self.url = url
        self.part = part
        self.session = session
        self.settings = settings
        self.expected_size = expected_size
        self.progress = progress
        self.cancel = cancel
        self.log = log
        self.remedies = remedies
        self.shown = redact_text(url)
        self.name = part.name.removesuffix(".part")
        self.limit, self.limit_text = size_bound(settings, expected_size, size_source)
        self.deadline_at = time.monotonic() + settings.deadline
        self.digest, self.have = hashlib.sha256(), 0  # the bytes in `part` so far
        self.transferred = 0  # bytes moved by the attempts before this one
        self.received_now = 0  # bytes moved by this attempt
        self.failures = 0  # attempts in a row that moved nothing

    # Retry: attempts with exponential backoff, within the deadline.

    def run(self) -> Received:
        """The attempts, until `part` holds the whole file or a failure is not worth another one."""
        self._take_up_part()
        if self.expected_size is not None and self.have == self.expected_size:
            return self._received(transferred=0)
        while True:
            if self.cancel.is_set():
                raise Cancelled()
            remaining = self.deadline_at - time.monotonic()
            if remaining <= 0:
                raise self._past_deadline()
            self.received_now = 0
            try:
                return self._attempt(remaining)
            except requests.exceptions.SSLError as exc:
                raise DependencyError(
                    f"the TLS certificate of {self.shown} could not be verified ({redact_text(str(exc))}).",
                    fix="if a company proxy inspects HTTPS, point REQUESTS_CA_BUNDLE at its CA certificate file; TLS "
                    "checks are never switched off.",
                ) from None
            except (
                requests.exceptions.InvalidURL,
                requests.exceptions.MissingSchema,
                requests.exceptions.InvalidSchema,
            ) as exc:
                raise DependencyError(
                    f"{self.shown} is not a usable URL ({redact_text(str(exc))}).",
                    fix=self.remedies.bad_url,
                ) from None
            except (requests.RequestException, _Retryable) as exc:
                self._wait_to_retry(exc)
            except OSError as exc:
                raise write_error(exc, self.part) from None

    def _take_up_part(self) -> None:
        """Resume after the bytes an earlier run left in `part`, unless there are more than the bound allows."""
        if not self.part.exists():
            return
        # By its size, before reading it: a huge .part is not hashed for nothing.
        if self.part.stat().st_size > self.limit:
            self.log(f"{self.name}: the partial download is larger than {self.limit_text}; starting over")
        else:
            self.digest, self.have = _hash_file(self.part, self.settings.chunk_size)

    def _wait_to_retry(self, exc: requests.RequestException | _Retryable) -> None:
        """Wait before the next attempt, or raise when none is worth making: a host name that does not resolve,
        too many attempts in a row without progress, no time left before the deadline."""
        unresolved = _name_resolution_error(exc) if isinstance(exc, requests.RequestException) else None
        if unresolved is not None:
            proxy = " (the proxy's name)" if isinstance(exc, requests.exceptions.ProxyError) else ""
            raise DependencyError(
                f"could not download {self.shown}: the host name does not resolve{proxy} "
                f"({redact_text(str(unresolved))}). Not retried: a name that does not resolve now will not "
                "resolve a few seconds later.",
                fix=self.remedies.unresolved,
            ) from None
        reason = redact_text(str(exc)) or type(exc).__name__
        self.transferred += self.received_now
        if isinstance(exc, _Restart):
            self.digest, self.have = hashlib.sha256(), 0
            self.part.unlink(missing_ok=True)
        self.failures = 0 if self.received_now else self.failures + 1
        if self.failures >= self.settings.attempts:
            raise DependencyError(
                f"could not download {self.shown}: {reason} ({self.failures} attempts in a row without progress).",
                fix=self.remedies.network,
            ) from None
        wait = min(self.settings.backoff * 2 ** max(self.failures - 1, 0), self.settings.max_backoff)
        if time.monotonic() + wait >= self.deadline_at:
            raise DependencyError(
                f"could not download {self.shown} within the {self.settings.deadline:.0f} s allowed for one "
                f"archive ([download] deadline): {reason}.",
                fix=self.remedies.network,
            ) from None
        self.log(f"{self.name}: {reason}; retrying in {wait:.1f} s")
        if self.cancel.wait(wait):
            raise Cancelled() from None

    def _past_deadline(self) -> DependencyError:
        return DependencyError(
            f"downloading {self.shown} took longer than the {self.settings.deadline:.0f} s allowed for one archive "
            "([download] deadline); stopped.",
            fix=self.remedies.limits,
        )

    def _received(self, transferred: int) -> Received:
        return Received(sha256=self.digest.hexdigest(), size=self.have, transferred=transferred)

    def _attempt(self, remaining: float) -> Received:
        """One request: the rest of the file (from `have` on) into `part`."""
        headers = {"Accept-Encoding": "identity"}
        if self.have:
            headers["Range"] = f"bytes={self.have}-"
        timeout = (min(self.settings.connect_timeout, remaining), min(self.settings.read_timeout, remaining))
        with self.session.get(self.url, headers=headers, stream=True, timeout=timeout) as response:
            if self._already_complete(response):
                return self._received(transferred=self.transferred)  # the .part was already complete
            total = self._announced_total(response)
            self._stream(response, total)
            if total is not None and self.have > total:
                raise _Restart(f"the server sent {self.have} bytes of a {total}-byte file")
            if total is not None and self.have < total:
                raise _Retryable(f"the connection ended after {self.have} of {total} bytes")
            return self._received(transferred=self.transferred + self.received_now)

    # Status: what the response's status and headers say about the body that follows.

    def _already_complete(self, response: requests.Response) -> bool:
        """Whether a 416 answer to the resume request says the `.part` file already holds the whole file."""
        if response.status_code != 416 or not self.have:
            return False
        if response.headers.get("Content-Range") == f"bytes */{self.have}":
            return True
        raise _Restart("the server refused to resume (HTTP 416)")

    def _announced_total(self, response: requests.Response) -> int | None:
        """The file's size as the response announces it (None when it does not), once its status says a body
        of the expected file follows; a 200 answer to a resume request starts the file over."""
        status = response.status_code
        if status >= 500 or status == 429:
            raise _Retryable(f"HTTP {status} {response.reason}")
        if status >= 400:
            raise DependencyError(
                f"{self.shown} answered HTTP {status} {response.reason}: the file is not there or not readable.",
                fix=self.remedies.missing,
            )
        if status not in (200, 206):
            raise DependencyError(
                f"{self.shown} answered HTTP {status} {response.reason} instead of the file.", fix=self.remedies.missing
            )
        total: int | None = None
        if status == 206:
            match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
            if match is None or int(match.group(1)) != self.have:
                raise _Restart(f"the server resumed at the wrong place ({response.headers.get('Content-Range')!r})")
            total = None if match.group(3) == "*" else int(match.group(3))
        else:
            if self.have:
                self.log(f"{self.name}: the server ignored the resume request; downloading from the start")
                self.digest, self.have = hashlib.sha256(), 0
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isascii() and length.isdigit() else None
        if self.expected_size is not None and total is not None and total != self.expected_size:
            raise DependencyError(
                f"{self.shown} is {total} bytes, but {self.expected_size} bytes are expected: the file on the "
                "server is not the one recorded.",
                fix=self.remedies.replaced,
            )
        if total is not None and total > self.limit:
            raise DependencyError(
                f"{self.shown} announces {total} bytes, more than {self.limit_text}; nothing was downloaded.",
                fix=self.remedies.limits,
            )
        return total

    # Streaming: the body into `part`, with progress, the size bound, the speed limit and the deadline.

    def _stream(self, response: requests.Response, total: int | None) -> None:
        self.progress.start(total, self.have)
        pace = _Pace(self.settings.speed_limit, self.settings.speed_time, time.monotonic())
        ended = False  # the body ended by itself, not by an error or a limit
        try:
            with self.part.open("ab" if self.have else "wb") as out:
                for chunk in _body(response, self.settings.chunk_size):
                    self._write(out, chunk, pace)
            ended = True
        finally:
            self.progress.close(complete=ended and (total is None or self.have == total))

    def _write(self, out: IO[bytes], chunk: bytes, pace: _Pace) -> None:
        """Append one chunk of the body, unless the run stops or the download passes a limit."""
        if self.cancel.is_set():
            raise Cancelled()
        if self.have + len(chunk) > self.limit:
            raise DependencyError(
                f"{self.shown} sent more than {self.limit_text}: stopped after {self.have} bytes, "
                "before writing any more; the partial file was deleted.",
                fix=self.remedies.limits,
            )
        out.write(chunk)
        self.digest.update(chunk)
        self.have += len(chunk)
        self.received_now += len(chunk)
        self.progress.advance(len(chunk))
        now = time.monotonic()
        speed = pace.too_slow(now, self.received_now)
        if speed is not None:
            raise DependencyError(
                f"{self.shown} sent {speed:.0f} bytes/s over the last {self.settings.speed_time:g} s, "
                f"under the {self.settings.speed_limit} bytes/s required ([download] speed_limit, "
                f"speed_time); stopped after {self.have} bytes.",
                fix=self.remedies.limits,
            )
        if now > self.deadline_at:
            raise self._past_deadline()


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
