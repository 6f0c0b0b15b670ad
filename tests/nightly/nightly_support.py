"""Helpers for the nightly tests: a real git repository standing in for PyTorch, matrix files,
`invoke nightly` run as the scheduler runs it, and a real Redis.

The "PyTorch repo" is the build tier's mini torch (tests/build/fixtures/mini_torch) committed to
a local git repository, so fetch, checkout and revisions are git's own. Its branch `broken` adds
a file that does not compile.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = TESTS_DIR.parent
MINI_TORCH = TESTS_DIR / "build" / "fixtures" / "mini_torch"
# The build tier's helpers (slow_source: a C++ file that takes seconds to compile) are reused as they are.
sys.path.insert(0, str(TESTS_DIR / "build"))
from build_support import slow_source  # noqa: E402,F401  (re-exported for the nightly tests)

NIGHTLY_TIMEOUT = 600
GIT_IDENTITY = ["-c", "user.name=nightly test", "-c", "user.email=nightly@example.invalid"]
IGNORED = "build/\ndist/\n*.egg-info/\ntorch/version.py\ntorch/*.so\n"
REDIS_PASSWORD = "nightly-redis-pw-7f3a9c"  # the runners' secret: must never appear in any output, report or summary
BROKEN_SOURCE = "// Added on the branch `broken`: a compile error.\nint broken( { return 1; }\n"


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *GIT_IDENTITY, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def commit_all(folder: Path, message: str) -> str:
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", message)
    return git(folder, "rev-parse", "HEAD")


def make_repo(folder: Path, extra_sources: dict[str, str] | None = None) -> Path:
    """mini torch as a git repository: `main`, and `broken` one commit further with a compile error."""
    shutil.copytree(MINI_TORCH, folder)
    (folder / ".gitignore").write_text(IGNORED, encoding="utf-8")
    for name, text in (extra_sources or {}).items():
        (folder / "csrc" / name).write_text(text, encoding="utf-8")
    git(folder, "init", "-q", "-b", "main")
    commit_all(folder, "mini torch")
    git(folder, "checkout", "-q", "-b", "broken")
    (folder / "csrc" / "broken.cpp").write_text(BROKEN_SOURCE, encoding="utf-8")
    commit_all(folder, "a compile error")
    git(folder, "checkout", "-q", "main")
    return folder


def _toml(value: Any) -> str:
    """A TOML value: strings as JSON-quoted basic strings, numbers, and inline tables of strings."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def write_matrix(
    path: Path,
    entries: list[dict[str, Any]],
    *,
    output_dir: Path,
    keep_days: int = 14,
    min_free_gb: float = 0.5,
    shared_env: dict[str, str] | None = None,
) -> Path:
    lines = [
        "[settings]",
        f"output_dir = {_toml(str(output_dir))}",
        f"keep_days = {keep_days}",
        f"min_free_gb = {min_free_gb}",
        "",
    ]
    if shared_env:
        lines += ["[shared_cache]", f"env = {_toml(shared_env)}", ""]
    for entry in entries:
        lines.append("[[entry]]")
        lines += [f"{key} = {_toml(value)}" for key, value in entry.items()]
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def run_nightly(
    *args: str, env: dict[str, str] | None = None, timeout: float = NIGHTLY_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """`python -m invoke nightly ARGS` from the repo root, without a terminal, as the scheduler runs it."""
    full_env = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    for name in ("CI", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"):
        if name not in (env or {}):
            full_env.pop(name, None)
    command = [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), "nightly", *args]
    return subprocess.run(
        command, cwd=REPO_ROOT, env=full_env, capture_output=True, text=True, encoding="utf-8", timeout=timeout
    )


def summaries(output_dir: Path) -> list[dict[str, Any]]:
    """Every run summary under the output folder, oldest first."""
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(output_dir.glob("*/nightly-*.json"))]


def entries_by_name(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in summary["entries"]}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def redis_command(port: int, *words: str, password: str | None = None) -> str:
    """One Redis command over a raw socket (RESP), for checks without a client library; its first reply line."""

    def encode(parts: tuple[str, ...]) -> bytes:
        return f"*{len(parts)}\r\n".encode() + b"".join(f"${len(p.encode())}\r\n{p}\r\n".encode() for p in parts)

    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        stream = connection.makefile("rb")
        if password:
            connection.sendall(encode(("AUTH", password)))
            stream.readline()
        connection.sendall(encode(words))
        return stream.readline().decode().strip()


@dataclass(frozen=True)
class Redis:
    """A running redis-server on 127.0.0.1 that needs a password."""

    port: int
    password: str

    @property
    def endpoint(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def command(self, *words: str) -> str:
        return redis_command(self.port, *words, password=self.password)
