"""Real things for the fetch-deps tests: an HTTP server on 127.0.0.1 with injectable faults, .7z
archives with the MKL/MAGMA layouts made at test time (py7zr, and native 7-Zip -mx=9 so the BCJ2
filter is used on executable content), and a Fetcher bound to a test's own cache and lock file.
Kept out of conftest.py so test modules import it by a name no other test folder uses."""

from __future__ import annotations

import filecmp
import random
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import py7zr

from pytorch_winbuild.deps.cache import MARKER_NAME
from pytorch_winbuild.deps.download import DownloadSettings
from pytorch_winbuild.deps.fetch import FetchResult, fetch_archives
from pytorch_winbuild.knowledge.catalog import Archive

CHUNK = 64 * 1024

MKL = "mkl_2020.2.254.7z"
MAGMA_PY7ZR = "magma_2.4.0_cuda90_release.7z"  # CUDA 9.0: written by py7zr
MAGMA_BCJ2 = "magma_2.5.4_cuda101_release.7z"  # CUDA 10.1: written by 7-Zip -mx=9 (BCJ2)

# Small timeouts and waits so fault tests take seconds, not minutes.
FAST = DownloadSettings(
    connect_timeout=2.0, read_timeout=0.5, attempts=3, backoff=0.05, max_backoff=0.2, chunk_size=64 * 1024
)


@dataclass(frozen=True)
class Made:
    files: dict[str, Path]  # catalog file name → archive
    trees: dict[str, Path]  # catalog file name → the folder it was made from
    work: Path


def library_bytes(size: int, seed: int) -> bytes:
    """An ELF x86-64 header followed by code-like bytes (call rel32, common opcodes, random
    operands): compresses like real libraries, and 7-Zip treats it as executable code."""
    rng = random.Random(seed)
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0x1000, 64, 0, 0, 64, 56, 0, 64, 0, 0)
    opcodes = [
        b"\x48\x89\xc3",
        b"\x8b\x45\xfc",
        b"\x48\x83\xec\x28",
        b"\x90",
        b"\xc3",
        b"\x55\x48\x89\xe5",
        b"\x0f\x1f\x44\x00\x00",
    ]
    functions = []
    for _ in range(256):
        body = bytearray()
        for _ in range(rng.randint(8, 40)):
            body += (
                b"\xe8"
                + struct.pack("<i", rng.randint(-(1 << 20), 1 << 20))
                + rng.choice(opcodes)
                + rng.randbytes(rng.randint(0, 4))
            )
        functions.append(bytes(body))
    out = bytearray(header)
    while len(out) < size:
        out += rng.choice(functions)
        out += rng.randbytes(8)
    return bytes(out[:size])


def make_tree(root: Path, kind: str, size: int, seed: int = 1) -> Path:
    """A folder with the layout the catalog expects for `kind` ("mkl" or "magma")."""
    (root / "include").mkdir(parents=True, exist_ok=True)
    (root / "lib").mkdir(parents=True, exist_ok=True)
    header = "mkl.h" if kind == "mkl" else "magma.h"
    (root / "include" / header).write_text(f"/* {kind} test header */\n#define {kind.upper()}_VERSION 1\n" * 50)
    (root / "lib" / f"{kind}.lib").write_bytes(library_bytes(size // 2, seed))
    (root / "lib" / f"{kind}.dll").write_bytes(library_bytes(size - size // 2, seed + 1))
    return root


def pack_py7zr(tree: Path, archive: Path) -> Path:
    """A .7z written by py7zr (LZMA2, which py7zr and 7-Zip both read)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with py7zr.SevenZipFile(archive, "w") as out:
        for path in sorted(tree.rglob("*")):
            out.write(path, arcname=path.relative_to(tree).as_posix())
    return archive


def pack_ultra(tree: Path, archive: Path) -> Path:
    """A .7z written by native 7-Zip's Ultra preset (-mx=9): BCJ2 on the executable files."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["7z", "a", "-mx=9", str(archive.resolve()), "."], cwd=tree, check=True, capture_output=True)
    return archive


def methods(archive: Path) -> str:
    """The compression methods 7-Zip reports for the archive's entries."""
    listing = subprocess.run(["7z", "l", "-slt", str(archive)], check=True, capture_output=True, text=True).stdout
    return " ".join(re.findall(r"^Method = (.*)$", listing, re.MULTILINE))


@dataclass
class Fault:
    """What the server does to the next requests for one file."""

    statuses: list[int] = field(default_factory=list)  # answered first, one per request (e.g. [503, 503])
    drop_after: list[int] = field(default_factory=list)  # close the connection after N body bytes, one per request
    stall_after: list[int] = field(default_factory=list)  # go silent after N body bytes, one per request
    stall_seconds: float = 5.0
    ignore_range: bool = False  # always answer 200 with the whole file
    seconds_per_chunk: float = 0.0  # slow the body down (64 KB chunks)


@dataclass
class Request:
    name: str
    range: str | None
    target: str = ""  # the request line's target: "/file" from a client, "http://host/file" through a proxy
    status: int = 0
    sent: int = 0


class FaultServer:
    """A threaded http.server on 127.0.0.1 serving `files` (name → path) with per-file faults."""

    def __init__(self, files: dict[str, Path], tls: ssl.SSLContext | None = None) -> None:
        self.files = dict(files)
        self.faults: dict[str, Fault] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner._serve(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}/"

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def fault(self, name: str) -> Fault:
        return self.faults.setdefault(name, Fault())

    def gets(self, name: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.name == name]

    def bytes_sent(self) -> int:
        with self._lock:
            return sum(r.sent for r in self.requests)

    def _take(self, values: list[int]) -> int | None:
        with self._lock:
            return values.pop(0) if values else None

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        # A flat folder: the last path segment names the file (also when asked as a proxy, with a full URL).
        name = unquote(urlparse(handler.path).path).rsplit("/", 1)[-1]
        request = Request(name=name, range=handler.headers.get("Range"), target=handler.path)
        with self._lock:
            self.requests.append(request)
        fault = self.fault(name)
        status = self._take(fault.statuses)
        path = self.files.get(name)
        if status is None and (path is None or not path.is_file()):
            status = 404
        if status is not None:
            request.status = status
            handler.send_response(status)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        data = path.read_bytes()
        start = 0
        match = re.match(r"^bytes=(\d+)-$", request.range or "")
        if match and not fault.ignore_range:
            start = int(match.group(1))
            if start >= len(data):
                request.status = 416
                handler.send_response(416)
                handler.send_header("Content-Range", f"bytes */{len(data)}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
            request.status = 206
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            request.status = 200
            handler.send_response(200)
        body = data[start:]
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Content-Type", "application/x-7z-compressed")
        handler.end_headers()
        drop = self._take(fault.drop_after)
        stall = self._take(fault.stall_after)
        try:
            while request.sent < len(body):
                if drop is not None and request.sent >= drop:
                    handler.wfile.flush()
                    handler.connection.shutdown(socket.SHUT_RDWR)
                    return
                if stall is not None and request.sent >= stall:
                    handler.wfile.flush()
                    self._stop.wait(fault.stall_seconds)
                    stall = None
                limit = min(
                    x for x in (drop, stall, request.sent + CHUNK, len(body)) if x is not None and x > request.sent
                )
                handler.wfile.write(body[request.sent : limit])
                request.sent = limit
                if fault.seconds_per_chunk:
                    self._stop.wait(fault.seconds_per_chunk)
        except (BrokenPipeError, ConnectionResetError, OSError):
            handler.close_connection = True


def copy_files(files: dict[str, Path], folder: Path) -> Path:
    """A flat mirror folder holding `files` under their catalog names."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, path in files.items():
        shutil.copyfile(path, folder / name)
    return folder


REPO_ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m invoke ARGS` from the repo root in this process's environment, with its real exit code."""
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def self_signed_tls(folder: Path) -> tuple[ssl.SSLContext, Path]:
    """A server TLS context for 127.0.0.1 with a fresh self-signed certificate, and that certificate's file."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert


class Fetcher:
    """fetch_archives with this test's cache, lock file, fast timeouts and a captured log."""

    def __init__(self, tmp_path: Path) -> None:
        self.cache_dir = tmp_path / "cache"
        self.lock_path = tmp_path / "deps.lock"
        self.lines: list[str] = []

    def __call__(self, archives: list[Archive], **options: Any) -> FetchResult:
        options.setdefault("download_settings", FAST)
        return fetch_archives(
            archives, cache_dir=self.cache_dir, lock_path=self.lock_path, log=self.lines.append, **options
        )

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def work_folders(self) -> list[str]:
        deps = self.cache_dir / "deps"
        return (
            sorted(p.name for p in deps.iterdir() if p.name.startswith((".tmp-", ".trash-"))) if deps.is_dir() else []
        )


def same_tree(left: Path, right: Path) -> bool:
    comparison = filecmp.dircmp(left, right, ignore=[MARKER_NAME])
    if comparison.left_only or comparison.right_only or comparison.diff_files or comparison.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(left, right, comparison.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(left / d, right / d) for d in comparison.common_dirs)
