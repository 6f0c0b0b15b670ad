"""The native 7-Zip: finding it, reading an archive's listing with it, extracting with it.

Kept apart from extract.py because it is the one place that reads 7-Zip's output: the `7z l -slt`
listing (parse_listing) and the error lines of an extraction. A link that 7-Zip refuses as
"dangerous" (its target has a `..`) is recreated when it stays inside the folder, or skipped with
a note where links cannot be made; one leading outside refuses the archive.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Literal, overload

from pytorch_winbuild import child_processes
from pytorch_winbuild.deps.archive_checks import BadArchive, Entry, damaged, stays_inside
from pytorch_winbuild.deps.cache import write_error
from pytorch_winbuild.errors import DependencyError
from pytorch_winbuild.knowledge.catalog import ExtractSettings

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


def native_entries(program: str, archive_file: Path) -> list[Entry] | None:
    """The entries `7z l -slt` lists, or None when it fails or prints anything parse_listing refuses."""
    try:
        listed = _run_7zip(program, ["l", "-slt", "-sccUTF-8"], archive_file)
    except OSError:
        return None
    # bytes, decoded here: text mode would turn a carriage return inside a name into a line break
    return parse_listing(listed.stdout.decode("utf-8", "replace")) if listed.returncode == 0 else None


@overload
def _run_7zip(program: str, options: list[str], archive_file: Path) -> subprocess.CompletedProcess[bytes]: ...
@overload
def _run_7zip(
    program: str, options: list[str], archive_file: Path, *, text: Literal[True]
) -> subprocess.CompletedProcess[str]: ...
def _run_7zip(
    program: str, options: list[str], archive_file: Path, *, text: bool = False
) -> subprocess.CompletedProcess[bytes] | subprocess.CompletedProcess[str]:
    """7-Zip run in the archive's folder, naming the archive by its file name and folders relative to it; its
    output captured as bytes, or with `text` as text (what cannot be decoded replaced).

    7-Zip reads `*` and `?` in an archive's path as wildcards and a `*` in -o as the archive's name
    (7-Zip's -o switch help), and a POSIX cache folder may hold both: from its own folder, the archive
    is named by the catalog's file name and the work folder by the cache's own sub-folders.
    """
    if os.sep in program or (os.altsep and os.altsep in program):
        program = os.path.abspath(program)  # a relative program path would be looked up from the new cwd
    command = [program, *options, "--", archive_file.name]
    if text:  # in the tool's tree: 7-Zip stops with the tool
        return child_processes.run(
            command, cwd=archive_file.parent, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace"
        )
    return child_processes.run(command, cwd=archive_file.parent, stdin=subprocess.DEVNULL, capture_output=True)


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


def _keep_inside_links(
    archive_file: Path, work: Path, refused: list[tuple[str, str]], program: str, log: Callable[[str], None]
) -> None:
    """Recreate the links 7-Zip refused that stay inside the folder; refuse the archive for one that leads outside."""
    for name, target in refused:
        if not stays_inside(name, target):
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


def extract_native(
    program: str,
    archive_file: Path,
    work: Path,
    links: frozenset[str] = frozenset(),
    log: Callable[[str], None] | None = None,
) -> None:
    """Extract with the native 7-Zip into the empty folder `work`. `links`: the names of the archive's link
    entries, to tell the links 7-Zip refused as dangerous from other errors."""
    output = os.path.relpath(work, archive_file.parent)
    result = _run_7zip(
        program,
        ["x", "-y", "-bso0", "-bsp0", f"-o{output}"],
        archive_file,
        text=True,
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
