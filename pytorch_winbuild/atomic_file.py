"""Files written whole or not at all: a temporary file beside the target, renamed over it.

A reader (another run, a crash halfway, Ctrl-C) finds the old content or the new, never half. Every file the tool
writes whole, and every rename over a name (`replace`), goes through here. The temporary file is
`.NAME.<12 hex digits>.tmp` (the nightly's index sweeps that name), created O_EXCL with PRIVATE or SHARED mode.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

PRIVATE = 0o600
SHARED = 0o666
# Seconds between the tries of a rename Windows refuses while another process has the target open.
REPLACE_RETRIES = (0.05, 0.1, 0.2, 0.4, 0.8, None)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """os.replace (a file or a folder), tried again for a moment (1.55 s in all) when refused: on Windows a
    process reading `target` (a web server, a virus scanner) holds it open, and the rename fails until it lets go."""
    for delay in REPLACE_RETRIES:
        try:
            os.replace(source, target)
            return
        except PermissionError:
            if delay is None:
                raise
            time.sleep(delay)


@contextlib.contextmanager
def _beside(target: Path) -> Iterator[Path]:
    """A new name beside `target` for the block to make a file at; that file then replaces `target`, or is removed
    when the block (or the rename) fails."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        yield temporary
        replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_bytes(path: Path, data: bytes, *, mode: int = PRIVATE, keep_mode: bool = False) -> None:
    """Replace `path` with `data`. `keep_mode`: an existing `path` keeps its permissions (exactly, umask aside)."""
    with _beside(path) as temporary:
        with os.fdopen(os.open(temporary, _NEW_FILE, mode), "wb") as stream:
            stream.write(data)
        if keep_mode:
            with contextlib.suppress(FileNotFoundError):
                shutil.copymode(path, temporary)


def write_text(
    path: Path, text: str, *, newline: str | None = None, mode: int = PRIVATE, keep_mode: bool = False
) -> None:
    """Replace `path` with `text` as UTF-8 (a text that cannot be encoded raises before anything is written).

    `newline` is open()'s: None writes os.linesep for each "\\n", "" and "\\n" the same bytes on every system."""
    if newline not in ("", "\n"):
        text = text.replace("\n", newline or os.linesep)
    write_bytes(path, text.encode("utf-8"), mode=mode, keep_mode=keep_mode)


def write_json(
    path: Path, data: object, *, ensure_ascii: bool = False, newline: str | None = None, mode: int = PRIVATE
) -> None:
    """Replace `path` with `data` (what json.dumps takes: TypeError for anything else) as JSON indented by 2, and a
    last newline (`newline` as for write_text)."""
    write_text(path, json.dumps(data, indent=2, ensure_ascii=ensure_ascii) + "\n", newline=newline, mode=mode)


def copy(source: Path, target: Path) -> None:
    """Replace `target` with a hard link to `source` where the file system allows, else with a copy of it (its times
    and permissions kept)."""
    with _beside(target) as temporary:
        try:
            os.link(source, temporary)
        except OSError:
            shutil.copy2(source, temporary)
