"""Safe extraction of a verified archive into the cache, all or nothing.

Entries are checked before anything is written (absolute paths, drive letters, `..`, entries
under a link, the marker's reserved name), each by the path it writes (entry_path: `./`, `.` and
empty segments dropped, `\\` a separator; compared case-insensitively, as Windows matches names),
and links are checked after (none may point outside). A link that 7-Zip refuses as "dangerous"
(its target has a `..`) is recreated when it stays inside the folder, or skipped with a note where
links cannot be made; one leading outside refuses the archive. Extraction goes into a
work folder next to the target; only a complete extraction with the expected layout gets its
marker and is renamed into place, with ordinary permissions (folders 0777 and files 0666, plus
x where the archive has it, less the umask). A native 7-Zip is the fast path where the catalog
says so (measured by scripts/bench_fetch.py) and the only way for BCJ2 archives, which py7zr
cannot decode. A NuGet package (.nupkg, a zip) is read and written by Python's zipfile, member by
member under the names the checks saw.
"""

from __future__ import annotations

import contextlib
import errno
import lzma
import os
import posixpath
import re
import secrets
import shutil
import stat
import subprocess
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pytorch_winbuild import child_processes
from pytorch_winbuild.deps.cache import MARKER_NAME, Marker, missing_layout, remove_tree, write_error, write_marker
from pytorch_winbuild.deps.catalog import Archive, ExtractSettings
from pytorch_winbuild.errors import DependencyError

_DRIVE = re.compile(r"^[A-Za-z]:")
_SPACE_MARGIN = 64 * 1024 * 1024  # headroom for file-system overhead
_NO_SPACE = ("no space left on device", "not enough space on the disk", "disk full")
_DANGEROUS_LINK = "ERROR: Dangerous link path was ignored : "  # 7-Zip 21+ (7zz), for any link target holding '..'
_SUB_ITEM_ERRORS = re.compile(r"^Sub items Errors: (\d+)$", re.MULTILINE)
_LISTING_SEPARATOR = "----------"
_LISTING_LINE = re.compile(r"([A-Z][A-Za-z ]*?) =(?: (.*))?")  # 7-Zip writes "CRC = " for an empty value
# The properties `7z l -slt` may print for an entry of a 7z archive: 7-Zip 26.02 prints Path, Size, Packed
# Size, Modified, Attributes, CRC, Encrypted, Method and Block; the others are item properties of 7-Zip's
# CPP/7zip/PropID.h (kpidIsDir, kpidCTime, kpidATime, kpidIsAnti, kpidPosition, kpidComment) that other
# versions or archives may add. Any other property makes the listing fall back to py7zr.
_LISTED_PROPERTIES = frozenset(
    {
        "Path", "Folder", "Size", "Packed Size", "Modified", "Created", "Accessed", "Attributes", "CRC",
        "Encrypted", "Method", "Block", "Anti", "Position", "Comment",
    }
)  # fmt: skip
_SIZE = re.compile(r"[0-9]*")
_WINDOWS_ATTRIBUTES = re.compile(r"[A-Za-z0-9_.]*")
_UNIX_MODE = re.compile(r"[-0pc3d5b79lBsDEF][-rwxsStT]{9}")
_HEX_BITS = re.compile(r"[0-9A-F]{8}")
_NUPKG = ".nupkg"
_SEVEN_ZIP_FIX = (
    "install 7-Zip (https://www.7-zip.org) so that `7z`, `7zz` or `7za` is on PATH or 7z.exe is in C:\\Program "
    "Files\\7-Zip, then run the command again."
)


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


def native_entries(program: str, archive_file: Path) -> list[Entry] | None:
    """The entries `7z l -slt` lists, or None when it fails or prints anything parse_listing refuses."""
    try:
        listed = _run_7zip(program, ["l", "-slt", "-sccUTF-8"], archive_file, capture_output=True)
    except OSError:
        return None
    # bytes, decoded here: text mode would turn a carriage return inside a name into a line break
    return parse_listing(listed.stdout.decode("utf-8", "replace")) if listed.returncode == 0 else None


def _run_7zip(program: str, options: list[str], archive_file: Path, **run: Any) -> subprocess.CompletedProcess[Any]:
    """7-Zip run in the archive's folder, naming the archive by its file name and folders relative to it.

    7-Zip reads `*` and `?` in an archive's path as wildcards and a `*` in -o as the archive's name
    (7-Zip's -o switch help), and a POSIX cache folder may hold both: from its own folder, the archive
    is named by the catalog's file name and the work folder by the cache's own sub-folders.
    """
    if os.sep in program or (os.altsep and os.altsep in program):
        program = os.path.abspath(program)  # a relative program path would be looked up from the new cwd
    command = [program, *options, "--", archive_file.name]
    return child_processes.run(command, cwd=archive_file.parent, stdin=subprocess.DEVNULL, **run)  # stops with the tool


def parse_listing(text: str) -> list[Entry] | None:
    """Entries from `7z l -slt` of a 7z archive: after the `----------` line, one block of `Property = value`
    lines per entry, Path first (the format of 7-Zip's CPP/7zip/UI/Console/List.cpp; tested on 7-Zip 26.02).

    None (read the header with py7zr instead) for anything else: a line of another form, an unknown or
    repeated property, a block without Path, Size and Attributes. A name may hold line breaks that an
    old 7-Zip prints as they are (7-Zip 21+ prints them as '_'), so no property but Path may hold '/',
    '\\' or '..': what follows a line break in a name cannot hide a path component from check_entries."""
    head, separator, body = text.replace("\r\n", "\n").partition(f"\n{_LISTING_SEPARATOR}\n")
    if not separator or "Type = 7z" not in head.split("\n"):
        return None
    blocks: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    for line in body.split("\n"):
        if not line:
            if fields:
                blocks.append(fields)
                fields = {}
            continue
        match = _LISTING_LINE.fullmatch(line)
        if match is None:
            return None
        key, value = match.group(1), match.group(2) or ""
        if key not in _LISTED_PROPERTIES or key in fields or (key == "Path") == bool(fields):
            return None
        if key != "Path" and ("/" in value or "\\" in value or ".." in value):
            return None
        fields[key] = value
    if fields:
        blocks.append(fields)
    entries = []
    for block in blocks:
        kinds = _attribute_kinds(block.get("Attributes"))
        if "Path" not in block or kinds is None or not _SIZE.fullmatch(block.get("Size", "x")):
            return None
        is_dir, is_link = kinds
        entries.append(
            Entry(
                name=block["Path"],
                is_dir=is_dir or block.get("Folder") == "+",
                is_link=is_link,
                size=int(block["Size"] or 0),
            )
        )
    return entries


def _attribute_kinds(attributes: str | None) -> tuple[bool, bool] | None:
    """(is a folder, is a link) from 7-Zip's Attributes text: Windows attribute letters (D folder, L reparse
    point), then when the archive holds Unix modes, `ls`-style ones (l: symbolic link), each maybe
    followed by leftover bits in hex (CPP/7zip/UI/Common/PropIDUtils.cpp, ConvertWinAttribToString).
    Like py7zr: a Unix mode decides whether an entry is a link, else the reparse-point attribute."""
    if attributes is None:
        return None
    windows, _, rest = attributes.partition(" ")
    tokens = rest.split()
    if not _WINDOWS_ATTRIBUTES.fullmatch(windows) or not all(
        _UNIX_MODE.fullmatch(token) or _HEX_BITS.fullmatch(token) for token in tokens
    ):
        return None
    modes = [token for token in tokens if _UNIX_MODE.fullmatch(token)]
    is_link = modes[0].startswith("l") if modes else "L" in windows
    return "D" in windows, is_link


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


def _refused_links(output: str, links: frozenset[str]) -> list[tuple[str, str]] | None:
    """The (link, target) pairs 7-Zip skipped as dangerous, when they are its only errors; else None."""
    errors = [line.strip() for line in output.splitlines() if line.strip().startswith("ERROR:")]
    if not errors or not all(line.startswith(_DANGEROUS_LINK) for line in errors):
        return None
    counted = _SUB_ITEM_ERRORS.search(output)
    if counted is not None and int(counted.group(1)) != len(errors):
        return None
    refused = []
    for line in errors:
        rest = line[len(_DANGEROUS_LINK) :].replace("\\", "/")
        names = [name for name in links if rest.startswith(name + " : ")]
        if not names:
            return None  # not a link the header lists: do not guess
        name = max(names, key=len)
        refused.append((name, line[len(_DANGEROUS_LINK) + len(name) + 3 :]))
    return refused


def _stays_inside(name: str, target: str) -> bool:
    """Whether link `name` (relative to the folder) pointing at `target` resolves inside the folder, by its text."""
    text = target.replace("\\", "/")
    if not text or text.startswith("/") or _DRIVE.match(text) or ":" in text:
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), text))
    return joined != ".." and not joined.startswith(("../", "/"))


def _keep_inside_links(
    archive_file: Path, work: Path, refused: list[tuple[str, str]], program: str, log: Callable[[str], None]
) -> None:
    """Recreate the links 7-Zip refused that stay inside the folder; refuse the archive for one that leads outside."""
    for name, target in refused:
        if not _stays_inside(name, target):
            raise BadArchive(
                f"{archive_file.name} holds a link {name!r} to {target!r}, outside its own folder; it was "
                "not installed and has been removed.",
                fix="the file is not a genuine MKL/MAGMA archive: replace it with the original from the public bucket.",
            )
    for name, target in refused:
        path = work / name
        if path.is_symlink() or path.is_file():
            path.unlink()  # 7-Zip leaves an empty file in the link's place
        elif path.exists():
            log(
                f"{archive_file.name}: skipped the link {name!r} -> {target!r}: {Path(program).name} left a "
                "folder in its place"
            )
            continue
        native_target = target.replace("/", os.sep) if os.name == "nt" else target
        try:
            os.symlink(native_target, path, target_is_directory=(path.parent / native_target).is_dir())
        except OSError as exc:  # Windows without the right to create links
            log(
                f"{archive_file.name}: skipped the link {name!r} -> {target!r}: links cannot be created here "
                f"({exc.strerror or exc})"
            )
            continue
        log(
            f"{archive_file.name}: {Path(program).name} refused the link {name!r} -> {target!r} as "
            "dangerous; it stays inside the folder, so it was recreated"
        )


def _extract_native(
    program: str,
    archive_file: Path,
    work: Path,
    links: frozenset[str] = frozenset(),
    log: Callable[[str], None] | None = None,
) -> None:
    output = os.path.relpath(work, archive_file.parent)
    result = _run_7zip(
        program,
        ["x", "-y", "-bso0", "-bsp0", f"-o{output}"],
        archive_file,
        capture_output=True,
        text=True,
        errors="replace",
    )
    if result.returncode == 0:
        return
    if (
        result.returncode < 0 or result.returncode == 255
    ):  # killed, or 7-Zip's "stopped by the user" (Ctrl-C reaches it too)
        raise DependencyError(
            f"{Path(program).name} was stopped while extracting {archive_file.name}.",
            fix="run the command again; the downloaded archive was kept.",
        )
    refused = _refused_links(result.stderr + "\n" + result.stdout, links) if result.returncode == 2 else None
    if refused is not None:
        _keep_inside_links(archive_file, work, refused, program, log or (lambda _line: None))
        return
    output = " ".join(line.strip() for line in (result.stderr + result.stdout).splitlines() if line.strip())
    if any(marker in output.lower() for marker in _NO_SPACE):
        raise write_error(OSError(errno.ENOSPC, "No space left on device"), work / archive_file.name)
    raise damaged(archive_file, f"{Path(program).name} exit code {result.returncode}: {output[-400:]}")


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
        _extract_native(native, archive_file, work, links, log)
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
    _extract_native(native, archive_file, work, links, log)
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
