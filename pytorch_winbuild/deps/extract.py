"""Safe extraction of a verified archive into the cache, all or nothing.

Entries are checked before anything is written, and links after (archive_checks.py); only a complete extraction with
the expected layout gets its marker and is renamed into place. A native 7-Zip (seven_zip.py) where the catalog says so
and for BCJ2; a NuGet .nupkg by zipfile. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import errno
import lzma
import os
import secrets
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

from pytorch_winbuild import atomic_file
from pytorch_winbuild.deps.archive_checks import BadArchive, Entry, check_entries, check_links, damaged
from pytorch_winbuild.deps.cache import MARKER_NAME, Marker, missing_layout, remove_tree, write_error, write_marker
from pytorch_winbuild.deps.seven_zip import extract_native, native_entries
from pytorch_winbuild.errors import DependencyError
from pytorch_winbuild.knowledge.catalog import Archive

_SPACE_MARGIN = 64 * 1024 * 1024  # headroom for file-system overhead
_NUPKG = ".nupkg"
_SEVEN_ZIP_FIX = (
    "install 7-Zip (https://www.7-zip.org) so that `7z`, `7zz` or `7za` is on PATH or 7z.exe is in C:\\Program "
    "Files\\7-Zip, then run the command again."
)


def list_entries(archive_file: Path, native: str | None = None) -> list[Entry]:
    """Read the archive's header: with the native 7-Zip that will extract it when there is one (its
    own reading of the names, and no py7zr to import), else or when its listing is not understood,
    with py7zr (which reads every 7z header, BCJ2 archives included)."""
    if native is not None:
        listed = native_entries(native, archive_file)
        if listed is not None:
            return listed
    import py7zr

    try:
        with py7zr.SevenZipFile(archive_file, mode="r") as archive:
            return [
                Entry(
                    name=item.filename,
                    is_dir=item.is_directory,
                    is_link=bool(item.is_symlink or item.is_junction),
                    size=item.uncompressed or 0,
                )
                for item in archive.files
            ]
    except (py7zr.exceptions.ArchiveError, lzma.LZMAError, EOFError, ValueError) as exc:
        raise damaged(archive_file, f"{type(exc).__name__}: {exc}") from None


def nupkg_member_name(name: str) -> str:
    """A NuGet package member's path as NuGet extracts it: with '/' between folders, percent-escapes
    decoded when it holds a '%' (NuGet.Packaging's ZipArchiveExtensions.UnescapePath: nuget pack escapes
    names like URIs), so the checks see the name that would be written."""
    return (unquote(name) if "%" in name else name).replace("\\", "/")


def nupkg_entries(archive_file: Path) -> list[Entry]:
    """The members of a NuGet package (a zip) from its central directory."""
    try:
        with zipfile.ZipFile(archive_file) as archive:
            members = [(nupkg_member_name(info.filename), info) for info in archive.infolist()]
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise damaged(archive_file, f"{type(exc).__name__}: {exc}") from None
    return [
        Entry(name=name, is_dir=name.endswith("/"), is_link=stat.S_ISLNK(info.external_attr >> 16), size=info.file_size)
        for name, info in members
    ]


def _extract_nupkg(archive_file: Path, work: Path) -> str:
    """Write each member under `work` by the name check_entries saw. zipfile stops a member at the size
    its header declares and checks its CRC; a link member is written as the plain file zipfile makes of
    it (a NuGet package holds none)."""
    try:
        with zipfile.ZipFile(archive_file) as archive:
            for info in archive.infolist():
                name = nupkg_member_name(info.filename)
                target = work.joinpath(*(part for part in name.split("/") if part not in ("", ".")))
                if name.endswith("/"):
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if target == work:
                    raise damaged(archive_file, f"the member {name!r} names no file")
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out, 1024 * 1024)
    # How zipfile reports a package that is not what it claims: BadZipFile (a bad CRC or header), zlib.error and
    # EOFError (a truncated or corrupt deflate stream), ValueError (a bad member), NotImplementedError (a
    # compression method it has no decoder for), RuntimeError (an encrypted member).
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        raise damaged(archive_file, f"{type(exc).__name__}: {exc}") from None
    return "zipfile"


def _check_space(archive_file: Path, entries: list[Entry], folder: Path) -> None:
    needed = sum(entry.size for entry in entries) + _SPACE_MARGIN
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise DependencyError(
            f"extracting {archive_file.name} needs {needed // (1024 * 1024)} MB, but the disk holding "
            f"{folder} has {free // (1024 * 1024)} MB free.",
            fix="free some space (`invoke clean --downloads` removes downloaded archives) or pass --cache-dir on "
            "a larger disk, then run the command again.",
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


def extract_into(
    archive_file: Path,
    work: Path,
    *,
    prefer: str,
    native: str | None,
    log: Callable[[str], None],
    links: frozenset[str] = frozenset(),
) -> str:
    """Extract with the preferred tool into the empty folder `work`; return the tool's name.

    `links`: the names of the archive's link entries (as list_entries gives them)."""
    if prefer == "native" and native is not None:
        extract_native(native, archive_file, work, links, log)
        return Path(native).name
    import py7zr

    try:
        _extract_py7zr(archive_file, work)
        return "py7zr"
    except py7zr.exceptions.UnsupportedCompressionMethodError as exc:
        detail = exc.args[1] if len(exc.args) > 1 else str(exc)
        if native is None:
            raise DependencyError(
                f"{archive_file.name} uses a compression method py7zr cannot decode ({detail}).", fix=_SEVEN_ZIP_FIX
            ) from None
        log(f"{archive_file.name}: py7zr cannot decode it ({str(detail).split('.')[0]}); extracting with {native}")
    remove_tree(work)
    work.mkdir(mode=0o777)
    extract_native(native, archive_file, work, links, log)
    return Path(native).name


def _make_work_folder(parent: Path, name: str) -> Path:
    """An empty work folder created as any folder is (0777 less the umask; mkdtemp would make it 0700,
    and the rename would carry that to the extracted folder)."""
    for _ in range(100):
        work = parent / f".tmp-{name}-{secrets.token_hex(4)}"
        try:
            work.mkdir(mode=0o777)
        except FileExistsError:
            continue
        return work
    raise FileExistsError(errno.EEXIST, "no unused work folder name", str(parent))


def _ordinary_permissions(work: Path) -> None:
    """Folders get the mode their work folder got (0777 less the umask), files the same without x
    unless the archive made them executable. Links are left alone. Windows has no such modes."""
    if os.name == "nt":
        return
    folders = stat.S_IMODE(os.stat(work).st_mode) | stat.S_IRWXU
    files = folders & 0o666
    for root, dirs, names in os.walk(work):
        for name in dirs:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, folders)
        for name in names:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if not stat.S_ISLNK(mode):
                os.chmod(path, folders if mode & 0o111 else files)


def _swap_into_place(work: Path, target: Path) -> None:
    """Rename `work` to `target`; an untrusted old `target` goes to a trash folder first."""
    if target.exists() or target.is_symlink():
        trash = Path(tempfile.mkdtemp(prefix=f".trash-{target.name}-", dir=target.parent))
        atomic_file.replace(target, trash / target.name)
        atomic_file.replace(work, target)
        remove_tree(trash)
    else:
        atomic_file.replace(work, target)


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
    nupkg = archive_file.name.endswith(_NUPKG)
    if nupkg:
        entries = nupkg_entries(archive_file)
        check_entries(archive_file, entries, f"NuGet package of {archive.label}")
    else:
        entries = list_entries(archive_file, native if prefer == "native" else None)
        check_entries(archive_file, entries)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, target) from None
    _check_space(archive_file, entries, target.parent)
    links = frozenset(entry.name.replace("\\", "/").rstrip("/") for entry in entries if entry.is_link)
    try:
        work = _make_work_folder(target.parent, target.name)
    except OSError as exc:
        raise write_error(exc, target) from None
    try:
        tool = (
            _extract_nupkg(archive_file, work)
            if nupkg
            else extract_into(archive_file, work, prefer=prefer, native=native, log=log, links=links)
        )
        check_links(archive_file, work)
        _ordinary_permissions(work)
        missing = missing_layout(work, archive.layout)
        if missing:
            raise BadArchive(
                f"{archive_file.name} does not have the layout of a {archive.label} archive: "
                f"{', '.join(missing)} missing after extraction; it has been removed.",
                fix=f"check that the mirror or --from-dir folder holds the original file from {archive.url} under "
                "this name.",
            )
        if os.path.lexists(work / MARKER_NAME):  # the extractor wrote a name the listing did not show as such
            raise BadArchive(
                f"{archive_file.name} extracted something named {MARKER_NAME}, the name pytorch-winbuild reserves "
                "for its marker; it was not installed and has been removed.",
                fix="the file is not a genuine archive: check where it came from (the mirror, or the folder given "
                "with --from-dir) and replace it with the original.",
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
    with contextlib.suppress(OSError):
        remove_tree(work)
