"""Safe extraction of a verified archive into the cache, all or nothing.

Entries are checked before anything is written (absolute paths, drive letters, `..`, entries
under a link) and links are checked after (none may point outside). Extraction goes into a work
folder next to the target; only a complete extraction with the expected layout gets its marker
and is renamed into place. A native 7-Zip is the fast path where the catalog says so (measured by
scripts/bench_fetch.py) and the only way for BCJ2 archives, which py7zr cannot decode.
"""

from __future__ import annotations

import errno
import lzma
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import DependencyError
from .cache import Marker, missing_layout, remove_tree, write_error, write_marker
from .catalog import Archive, ExtractSettings

_DRIVE = re.compile(r"^[A-Za-z]:")
_SPACE_MARGIN = 64 * 1024 * 1024  # headroom for file-system overhead
_NO_SPACE = ("no space left on device", "not enough space on the disk", "disk full")
_SEVEN_ZIP_FIX = "install 7-Zip (https://www.7-zip.org) so that `7z`, `7zz` or `7za` is on PATH or 7z.exe is in C:\\Program Files\\7-Zip, then run the command again."


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
        fix="run the command again to download it afresh; if it fails the same way, the file on the server or mirror is broken: "
        "with --from-dir, download it again by hand.",
    )


def find_native_7zip(settings: ExtractSettings) -> str | None:
    """The first native 7-Zip on PATH (7zz, 7z, 7za as the catalog orders them) or in its usual Windows folders."""
    for program in settings.native_programs:
        found = shutil.which(program)
        if found:
            return found
    if os.name == "nt":
        for location in settings.windows_locations:
            candidate = Path(os.path.expandvars(location))
            if candidate.is_file():
                return str(candidate)
    return None


def list_entries(archive_file: Path) -> list[Entry]:
    """Read the archive's header (py7zr reads every 7z header, BCJ2 archives included)."""
    import py7zr

    try:
        with py7zr.SevenZipFile(archive_file, mode="r") as archive:
            return [
                Entry(name=item.filename, is_dir=item.is_directory, is_link=bool(item.is_symlink or item.is_junction), size=item.uncompressed or 0)
                for item in archive.files
            ]
    except (py7zr.exceptions.ArchiveError, lzma.LZMAError, EOFError, ValueError) as exc:
        raise damaged(archive_file, f"{type(exc).__name__}: {exc}") from None


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


def check_entries(archive_file: Path, entries: list[Entry]) -> None:
    """Refuse the archive when any entry could land outside the target folder."""
    links = {entry.name.replace("\\", "/").rstrip("/") for entry in entries if entry.is_link}
    for entry in entries:
        reason = unsafe_reason(entry.name)
        parts = entry.name.replace("\\", "/").split("/")
        if reason is None and any("/".join(parts[:i]) in links for i in range(1, len(parts))):
            reason = "a parent folder that is a link"
        if reason is not None:
            raise BadArchive(
                f"{archive_file.name} holds the entry {entry.name!r} with {reason}; nothing was extracted and the file has been removed.",
                fix="the file is not a genuine MKL/MAGMA archive: check where it came from (the mirror, or the folder given with --from-dir) and replace it with the original.",
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
                    f"{archive_file.name} holds a link {os.path.relpath(path, root)!r} to {stored!r}, outside its own folder; it was not installed and has been removed.",
                    fix="the file is not a genuine MKL/MAGMA archive: replace it with the original from the public bucket.",
                )


def _check_space(archive_file: Path, entries: list[Entry], folder: Path) -> None:
    needed = sum(entry.size for entry in entries) + _SPACE_MARGIN
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise DependencyError(
            f"extracting {archive_file.name} needs {needed // (1024 * 1024)} MB, but the disk holding {folder} has {free // (1024 * 1024)} MB free.",
            fix="free some space (`invoke clean --downloads` removes downloaded archives) or pass --cache-dir on a larger disk, then run the command again.",
        )


def _extract_py7zr(archive_file: Path, work: Path) -> None:
    import py7zr

    try:
        with py7zr.SevenZipFile(archive_file, mode="r") as archive:
            archive.extractall(path=work)
    except py7zr.exceptions.UnsupportedCompressionMethodError:
        raise
    except (py7zr.exceptions.ArchiveError, lzma.LZMAError, EOFError, ValueError) as exc:
        raise damaged(archive_file, f"{type(exc).__name__}: {exc}") from None
    except OSError as exc:
        raise write_error(exc, work) from None


def _extract_native(program: str, archive_file: Path, work: Path) -> None:
    command = [program, "x", "-y", "-bso0", "-bsp0", f"-o{work}", "--", str(archive_file)]
    result = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    if result.returncode == 0:
        return
    if result.returncode < 0 or result.returncode == 255:  # killed, or 7-Zip's "stopped by the user" (Ctrl-C reaches it too)
        raise DependencyError(f"{Path(program).name} was stopped while extracting {archive_file.name}.", fix="run the command again; the downloaded archive was kept.")
    output = " ".join(line.strip() for line in (result.stderr + result.stdout).splitlines() if line.strip())
    if any(marker in output.lower() for marker in _NO_SPACE):
        raise write_error(OSError(errno.ENOSPC, "No space left on device"), work / archive_file.name)
    raise damaged(archive_file, f"{Path(program).name} exit code {result.returncode}: {output[-400:]}")


def extract_into(archive_file: Path, work: Path, *, prefer: str, native: str | None, log: Callable[[str], None]) -> str:
    """Extract with the preferred tool into the empty folder `work`; return the tool's name."""
    import py7zr

    if prefer == "native" and native is not None:
        _extract_native(native, archive_file, work)
        return Path(native).name
    try:
        _extract_py7zr(archive_file, work)
        return "py7zr"
    except py7zr.exceptions.UnsupportedCompressionMethodError as exc:
        detail = exc.args[1] if len(exc.args) > 1 else str(exc)
        if native is None:
            raise DependencyError(f"{archive_file.name} uses a compression method py7zr cannot decode ({detail}).", fix=_SEVEN_ZIP_FIX) from None
        log(f"{archive_file.name}: py7zr cannot decode it ({str(detail).split('.')[0]}); extracting with {native}")
    remove_tree(work)
    work.mkdir()
    _extract_native(native, archive_file, work)
    return Path(native).name


def _swap_into_place(work: Path, target: Path) -> None:
    """Rename `work` to `target`; an untrusted old `target` goes to a trash folder first."""
    if target.exists() or target.is_symlink():
        trash = Path(tempfile.mkdtemp(prefix=f".trash-{target.name}-", dir=target.parent))
        os.replace(target, trash / target.name)
        os.replace(work, target)
        remove_tree(trash)
    else:
        os.replace(work, target)


def install_archive(
    archive_file: Path,
    archive: Archive,
    target: Path,
    *,
    sha256: str,
    size: int,
    prefer: str,
    native: str | None,
    log: Callable[[str], None],
) -> str:
    """Extract `archive_file` to `target` all or nothing; return the tool that extracted it."""
    entries = list_entries(archive_file)
    check_entries(archive_file, entries)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, target) from None
    _check_space(archive_file, entries, target.parent)
    work = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=target.parent))
    try:
        tool = extract_into(archive_file, work, prefer=prefer, native=native, log=log)
        check_links(archive_file, work)
        missing = missing_layout(work, archive.layout)
        if missing:
            raise BadArchive(
                f"{archive_file.name} does not have the layout of a {archive.label} archive: {', '.join(missing)} missing after extraction; it has been removed.",
                fix="check that the mirror or --from-dir folder holds the original file from the public bucket under this name.",
            )
        write_marker(work, Marker(file_name=archive.file_name, sha256=sha256, size=size, extractor=tool))
        _swap_into_place(work, target)
    except OSError as exc:
        _discard(work)
        raise write_error(exc, target) from None
    except BaseException:
        _discard(work)
        raise
    return tool


def _discard(work: Path) -> None:
    """Best-effort removal of a failed work folder; what stays is swept by the next run."""
    try:
        remove_tree(work)
    except OSError:
        pass
