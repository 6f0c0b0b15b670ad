"""The archive's header read by the native 7-Zip that extracts it (`7z l -slt`) gives the same entries
as py7zr's independent reader, and a listing it does not fully understand falls back to py7zr.

The archives are real: written by 7-Zip (Linux modes, links stored with -snl, BCJ2), by py7zr (names
7-Zip itself would not write), and one whose attributes are rewritten to what 7-Zip on Windows
stores (no Unix modes; a directory junction), the shape of the published MKL and MAGMA archives.
Only an old 7-Zip's raw line breaks are written by hand: 7-Zip 21 and later print a line break
inside a name as '_', and no older 7-Zip is installed here.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import py7zr
import pytest
from deps_support import MAGMA_BCJ2, MKL, Made, make_tree, pack_py7zr

from pytorch_winbuild.deps.archive_checks import BadArchive
from pytorch_winbuild.deps.extract import install_archive, list_entries
from pytorch_winbuild.deps.seven_zip import native_entries, parse_listing
from pytorch_winbuild.knowledge.catalog import select_archives

SEVEN_ZIP = shutil.which("7zz") or shutil.which("7z")


def seven_zip() -> str:
    assert SEVEN_ZIP is not None, "7-Zip is part of the test tier: apt-get install 7zip"
    return SEVEN_ZIP


def py7zr_reading(archive_file: Path) -> list[tuple[str, bool, bool, int]]:
    """py7zr's own reading of the header, with 7-Zip 21+'s one rewrite applied: a line feed shows as '_'."""
    return [(e.name.replace("\n", "_"), e.is_dir, e.is_link, e.size) for e in list_entries(archive_file)]


def native_reading(archive_file: Path) -> list[tuple[str, bool, bool, int]] | None:
    entries = native_entries(seven_zip(), archive_file)
    return None if entries is None else [(e.name, e.is_dir, e.is_link, e.size) for e in entries]


def links_archive(tmp_path: Path) -> Path:
    """7-Zip with -snl: a link inside the folder, one leading out, a folder, and modes of all kinds."""
    tree = make_tree(tmp_path / "links", "mkl", 30_000)
    os.symlink("mkl.lib", tree / "lib" / "alias.lib")
    os.symlink("../../outside", tree / "lib" / "escape.lib")
    (tree / "bin").mkdir(mode=0o700)
    (tree / "bin" / "tool.exe").write_bytes(b"MZ" + bytes(500))
    os.chmod(tree / "bin" / "tool.exe", 0o4755)
    archive = tmp_path / "links.7z"
    subprocess.run([seven_zip(), "a", "-snl", str(archive), "."], cwd=tree, check=True, capture_output=True)
    return archive


def windows_archive(tmp_path: Path) -> Path:
    """A 7-Zip archive rewritten to the attributes 7-Zip on Windows stores: FILE_ATTRIBUTE_* bits
    only (no 0x8000 Unix-extension marker and modes), and a folder that is a directory junction
    (DIRECTORY | REPARSE_POINT). The header is written uncompressed (-mhc=off) so that the
    attribute words can be replaced; its CRCs in the start header are then computed again."""
    tree = tmp_path / "windows"
    (tree / "include").mkdir(parents=True, mode=0o755)
    (tree / "junction").mkdir(mode=0o750)
    (tree / "include" / "mkl.h").write_text("#define MKL 1\n")
    os.chmod(tree / "include", 0o755)
    os.chmod(tree / "junction", 0o750)
    os.chmod(tree / "include" / "mkl.h", 0o640)
    archive = tmp_path / "windows.7z"
    subprocess.run(
        [seven_zip(), "a", "-mhc=off", str(archive), "include", "junction"], cwd=tree, check=True, capture_output=True
    )
    data = bytearray(archive.read_bytes())
    offset, size, _ = struct.unpack("<QQI", data[12:32])
    header = data[32 + offset : 32 + offset + size]
    unix = 0x8000  # FILE_ATTRIBUTE_UNIX_EXTENSION, the st_mode in the high 16 bits
    for st_mode, windows_bits, replacement in (
        (0o40755, 0x10, 0x10),  # include/: DIRECTORY
        (0o40750, 0x10, 0x410),  # junction/: DIRECTORY | REPARSE_POINT
        (0o100640, 0x20, 0x20),  # include/mkl.h: ARCHIVE
    ):
        word = struct.pack("<I", st_mode << 16 | unix | windows_bits)
        assert header.count(word) == 1, f"7-Zip stored {st_mode:o} differently; update this helper"
        header = header.replace(word, struct.pack("<I", replacement))
    data[32 + offset : 32 + offset + size] = header
    data[28:32] = struct.pack("<I", zlib.crc32(header))
    data[8:12] = struct.pack("<I", zlib.crc32(bytes(data[12:32])))
    archive.write_bytes(bytes(data))
    return archive


def odd_names_archive(tmp_path: Path) -> Path:
    """py7zr writes names 7-Zip would not: line breaks, a carriage return, a tab, '..' and non-ASCII."""
    archive = tmp_path / "odd.7z"
    payload = tmp_path / "payload"
    payload.write_bytes(b"data")
    with py7zr.SevenZipFile(archive, "w") as out:
        for name in ("a\nPath = ../evil", "b\rc", "tab\there", "héllo wörld.h", "../escape.txt", "lib/ä b/..x"):
            out.write(payload, arcname=name)  # write, unlike writestr, takes any name
    return archive


ARCHIVES = {
    "py7zr-written": lambda made, tmp: made.files[MKL],
    "7-Zip BCJ2": lambda made, tmp: made.files[MAGMA_BCJ2],
    "7-Zip links and modes": lambda made, tmp: links_archive(tmp),
    "Windows attributes and a junction": lambda made, tmp: windows_archive(tmp),
    "odd names": lambda made, tmp: odd_names_archive(tmp),
}


@pytest.mark.parametrize("kind", list(ARCHIVES))
def test_native_listing_reads_what_py7zr_reads(kind: str, made: Made, tmp_path: Path) -> None:
    archive = ARCHIVES[kind](made, tmp_path)
    assert native_reading(archive) == py7zr_reading(archive)


def test_the_windows_shapes_are_what_they_claim(tmp_path: Path) -> None:
    """The rewritten archive really reads as Windows attributes: py7zr sees the junction as one (and,
    as for any reparse point without Unix modes, as a link)."""
    with py7zr.SevenZipFile(windows_archive(tmp_path)) as archive:
        kinds = {item.filename: (item.is_directory, item.is_junction, item.is_symlink) for item in archive.files}
    assert kinds == {
        "include": (True, False, False),
        "junction": (True, True, True),
        "include/mkl.h": (False, False, False),
    }


def test_an_entry_read_natively_is_still_checked(tmp_path: Path) -> None:
    """A '..' behind a line break (listed by 7-Zip as 'a_/../../evil.txt') is refused before extraction."""
    tree = make_tree(tmp_path / "tree", "mkl", 20_000)
    archive_file = pack_py7zr(tree, tmp_path / "evil.7z")
    (tmp_path / "payload.txt").write_text("escaped")
    with py7zr.SevenZipFile(archive_file, "a") as archive:
        archive.write(tmp_path / "payload.txt", arcname="a\n/../../evil.txt")
    deps = tmp_path / "deps"
    mkl = select_archives(cuda=None, mkl_version="2020.2.254", magma_versions=[])[0]
    with pytest.raises(BadArchive, match=r"'a_/\.\./\.\./evil\.txt' with a '\.\.' component"):
        install_archive(
            archive_file,
            mkl,
            deps / "mkl",
            sha256="0" * 64,
            size=archive_file.stat().st_size,
            prefer="native",
            native=seven_zip(),
            log=lambda _line: None,
        )
    assert not deps.exists() or list(deps.iterdir()) == []
    assert not (tmp_path / "evil.txt").exists()


def _real_listing(tmp_path: Path) -> str:
    tree = tmp_path / "small"
    (tree / "include").mkdir(parents=True)
    (tree / "include" / "mkl.h").write_text("x")
    archive = tmp_path / "small.7z"
    subprocess.run([seven_zip(), "a", str(archive), "include"], cwd=tree, check=True, capture_output=True)
    return subprocess.run([seven_zip(), "l", "-slt", str(archive)], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("Path = include/mkl.h", "Path = include/mkl.h\nCreated = /../../evil"), "a '/' outside Path"),
        (("Path = include/mkl.h", "Path = include/mkl.h\nPath = evil"), "a repeated property"),
        (("Path = include/mkl.h", "Path = include/mkl.h\nOwner = me"), "an unknown property"),
        (("Path = include/mkl.h", "Path = include/mkl.h\nevil"), "a line of another form"),
        (("Path = include/mkl.h", "Path = include\n\nPath = mkl.h"), "a block without Size or Attributes"),
        (("Type = 7z", "Type = zip"), "another archive type"),
        (("----------", "---"), "no entry section"),
        (("Attributes = A -rw-r--r--", "Attributes = A -rw-r--r-- junk"), "attributes of another form"),
    ],
)
def test_a_listing_not_fully_understood_is_left_to_py7zr(change: tuple[str, str], why: str, tmp_path: Path) -> None:
    real = _real_listing(tmp_path)
    assert parse_listing(real) is not None
    old, new = change
    assert old in real, f"7-Zip's listing changed: {old!r} not found"
    assert parse_listing(real.replace(old, new, 1)) is None, why


def test_crlf_listings_as_on_windows_are_read(tmp_path: Path) -> None:
    real = _real_listing(tmp_path)
    assert parse_listing(real.replace("\n", "\r\n")) == parse_listing(real)


def test_a_7zip_that_cannot_list_leaves_the_header_to_py7zr(made: Made, tmp_path: Path) -> None:
    """A 7-Zip that fails to list (here /bin/false: 7-Zip 9.20 rejects -scc the same way) changes nothing."""
    archive = made.files[MKL]
    assert list_entries(archive, native="/bin/false") == list_entries(archive)
    truncated = tmp_path / "truncated.7z"
    truncated.write_bytes(archive.read_bytes()[:-100])
    with pytest.raises(BadArchive, match="damaged or incomplete"):
        list_entries(truncated, native=seven_zip())


def test_the_native_path_never_imports_py7zr(made: Made, tmp_path: Path) -> None:
    """Reading the header and extracting with 7-Zip does not pay py7zr's import (0.1 s of a cold fetch)."""
    script = """
import sys
from pathlib import Path
from pytorch_winbuild.knowledge.catalog import select_archives
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.deps.extract import install_archive
archive = select_archives(cuda=load_knowledge().cuda["10.1"], mkl_version="2020.2.254", magma_versions=["2.5.4"])[1]
file = Path(sys.argv[1])
tool = install_archive(file, archive, Path(sys.argv[2]), sha256="0" * 64, size=file.stat().st_size,
                       prefer="native", native=sys.argv[3], log=print)
print(tool, "py7zr" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(made.files[MAGMA_BCJ2]), str(tmp_path / "magma"), seven_zip()],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == [Path(seven_zip()).name, "False"]
    assert (tmp_path / "magma" / "include" / "magma.h").is_file()
