"""What an archive holds (Entry) and the checks that keep all of it inside its folder (else BadArchive).

Entries are checked before anything is written (absolute paths, drive letters, `..`, entries
under a link, the marker's reserved name), each by the path it writes (entry_path: `./`, `.` and
empty segments dropped, `\\` a separator; compared case-insensitively, as Windows matches names),
and links are checked after (none may point outside). Kept apart from extract.py so that the
zipfile and py7zr paths there and the native 7-Zip's (seven_zip.py) share one set of rules.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.deps.cache import MARKER_NAME
from pytorch_winbuild.errors import DependencyError

_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class Entry:
    """One archive member as the archive's header describes it."""

    name: str
    is_dir: bool
    is_link: bool
    size: int


class BadArchive(DependencyError):
    """The file itself is not trustworthy (damaged, unsafe, wrong layout): the caller deletes it."""


def damaged(archive_file: Path, detail: str) -> BadArchive:
    return BadArchive(
        f"{archive_file.name} is damaged or incomplete ({detail}); it has been removed.",
        fix="run the command again to download it afresh; if it fails the same way, the file on the server or mirror "
        "is broken: with --from-dir, download it again by hand.",
    )


def entry_path(name: str) -> str:
    """The path an entry name writes, relative to the folder: `\\` a separator as on Windows, empty and `.`
    segments dropped (`./a//b/` is `a/b`), as 7-Zip, py7zr and NuGet/zipfile make them. `..` stays, for
    unsafe_reason to refuse."""
    return "/".join(part for part in name.replace("\\", "/").split("/") if part not in ("", "."))


def _same_on_windows(path: str) -> str:
    """A key under which two entry paths are equal when Windows writes them to the same file: case-insensitive,
    trailing dots and spaces of a segment dropped (Win32 path normalisation; `...` stays a name). Used only
    to refuse, so matching more paths than a file system would is safe."""
    return "/".join(part.rstrip(". ").casefold() or part for part in path.split("/"))


_MARKER_KEY = _same_on_windows(MARKER_NAME)


def unsafe_reason(name: str) -> str | None:
    """Why an entry name could write outside the target folder, or None when it is safe."""
    if not name or "\x00" in name:
        return "an empty name or a NUL character"
    normalized = name.replace("\\", "/")
    if normalized.startswith("/"):
        return "an absolute path"
    if _DRIVE.match(normalized):
        return "a drive letter"
    if ":" in normalized:
        return "a ':' (a drive or an alternate data stream)"
    if ".." in normalized.split("/"):
        return "a '..' component"
    return None


def check_entries(archive_file: Path, entries: list[Entry], kind: str = "MKL/MAGMA archive") -> None:
    """Refuse the archive when any entry could land outside the target folder, or where pytorch-winbuild writes
    its marker (`kind` names what it claims to be). Names are compared as entry_path normalises them and as
    Windows matches them, so `./a/x` is under the link `a`, and `A/x` too."""
    links = {_same_on_windows(entry_path(entry.name)) for entry in entries if entry.is_link}
    for entry in entries:
        reason = unsafe_reason(entry.name)
        path = entry_path(entry.name)
        parts = _same_on_windows(path).split("/")
        if reason is None and not path and (entry.is_link or not entry.is_dir):  # py7zr may list the folder as '.'
            reason = "a name that is the folder itself"
        if reason is None and any("/".join(parts[:i]) in links for i in range(1, len(parts))):
            reason = "a parent folder that is a link"
        if reason is None and parts == [_MARKER_KEY]:
            reason = (
                f"the name {MARKER_NAME}, which pytorch-winbuild reserves for the marker it writes into every "
                "complete extraction"
            )
        if reason is not None:
            raise BadArchive(
                f"{archive_file.name} holds the entry {entry.name!r} with {reason}; nothing was extracted "
                "and the file has been removed.",
                fix=f"the file is not a genuine {kind}: check where it came from (the mirror, or the "
                "folder given with --from-dir) and replace it with the original.",
            )


def _is_link(path: str) -> bool:
    isjunction = getattr(os.path, "isjunction", None)  # Python 3.12+: Windows directory junctions
    return os.path.islink(path) or bool(isjunction and isjunction(path))


def check_links(archive_file: Path, root: Path) -> None:
    """Refuse an extracted tree holding a link with an absolute target or one that resolves outside it.

    Absolute targets are refused even when 7-Zip has rewritten them to point under the work
    folder: after the rename into place they would dangle.
    """
    real_root = os.path.realpath(root)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if not _is_link(path):
                continue
            stored = os.readlink(path)
            resolved = os.path.realpath(path)
            if os.path.isabs(stored) or os.path.commonpath([real_root, resolved]) != real_root:
                raise BadArchive(
                    f"{archive_file.name} holds a link {os.path.relpath(path, root)!r} to {stored!r}, "
                    "outside its own folder; it was not installed and has been removed.",
                    fix="the file is not a genuine MKL/MAGMA archive: replace it with the original from the "
                    "public bucket.",
                )


def stays_inside(name: str, target: str) -> bool:
    """Whether link `name` (relative to the folder) pointing at `target` resolves inside the folder, by its text."""
    text = target.replace("\\", "/")
    if not text or text.startswith("/") or _DRIVE.match(text) or ":" in text:
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), text))
    return joined != ".." and not joined.startswith(("../", "/"))
