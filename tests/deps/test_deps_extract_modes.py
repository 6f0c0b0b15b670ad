"""Issue 11 (item 8, extraction): permissions of extracted folders, and links 7-Zip calls dangerous.

Archives are made at test time by the real 7zz (`-snl` stores symbolic links as links) and
extracted by install_archive with 7zz and with py7zr.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytorch_winbuild.deps.archive_checks import BadArchive
from pytorch_winbuild.deps.extract import install_archive
from pytorch_winbuild.knowledge.catalog import Archive, select_archives

# The network tier is 7-Zip's tier: tests/conftest.py fails every test here when 7zz (Debian's 7zip, which
# .ci/run installs) is missing. The links and modes below are POSIX ones: the suite runs on Linux.
pytestmark = pytest.mark.network
SEVEN_ZZ = shutil.which("7zz") or "7zz"


def mkl() -> Archive:
    return select_archives(cuda=None, mkl_version="2020.2.254", magma_versions=[])[0]


def tree(root: Path, *, private: bool = False) -> Path:
    """An MKL-like folder with an executable; `private`: every folder 0700 and file 0600, as a umask 077 makes them."""
    (root / "include").mkdir(parents=True)
    (root / "lib" / "intel64").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "include" / "mkl.h").write_text("/* mkl */\n")
    (root / "lib" / "mkl_core.lib").write_bytes(b"\x7fELF" + bytes(2000))
    (root / "bin" / "tool").write_text("#!/bin/sh\necho tool\n")
    (root / "bin" / "tool").chmod(0o700 if private else 0o755)
    if private:
        for path in [root, *root.rglob("*")]:
            if path.is_dir():
                path.chmod(0o700)
            elif path.name != "tool":
                path.chmod(0o600)
    return root


def pack(root: Path, archive: Path) -> Path:
    """`7zz a -snl`: links are stored as links, as they are in the archive the issue met."""
    subprocess.run(
        [SEVEN_ZZ, "a", "-snl", str(archive), *sorted(p.name for p in root.iterdir())],
        cwd=root,
        check=True,
        capture_output=True,
    )
    return archive


def install(archive_file: Path, target: Path, *, prefer: str = "native", lines: list[str] | None = None) -> str:
    log = (lines if lines is not None else []).append
    return install_archive(
        archive_file,
        mkl(),
        target,
        sha256="0" * 64,
        size=archive_file.stat().st_size,
        prefer=prefer,
        native=SEVEN_ZZ,
        log=log,
    )


def modes(folder: Path) -> dict[str, int]:
    return {
        (path.relative_to(folder).as_posix() if path != folder else "."): stat.S_IMODE(os.lstat(path).st_mode)
        for path in [folder, *folder.rglob("*")]
        if not path.is_symlink()
    }


@pytest.fixture
def umask() -> Iterator[None]:
    """Run with umask 022 (the usual one) and put the caller's back."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("prefer", ["native", "py7zr"])
@pytest.mark.parametrize("private", [False, True], ids=["archive-0755", "archive-0700"])
def test_extracted_folders_get_ordinary_permissions(tmp_path: Path, umask: None, prefer: str, private: bool) -> None:
    archive_file = pack(tree(tmp_path / "tree", private=private), tmp_path / "mkl.7z")
    target = tmp_path / "deps" / "mkl"
    install(archive_file, target, prefer=prefer)
    found = modes(target)
    assert found.pop(".") == 0o755  # was 0700: the work folder came from mkdtemp
    assert found.pop("bin/tool") == 0o755  # an executable stays executable
    for name, mode in found.items():
        assert mode == (0o755 if (target / name).is_dir() else 0o644), f"{name}: {oct(mode)}"


def test_permissions_follow_the_umask(tmp_path: Path) -> None:
    archive_file = pack(tree(tmp_path / "tree"), tmp_path / "mkl.7z")
    target = tmp_path / "deps" / "mkl"
    old = os.umask(0o027)
    try:
        install(archive_file, target)
    finally:
        os.umask(old)
    found = modes(target)
    assert (found["."], found["lib/intel64"], found["bin/tool"], found["include/mkl.h"]) == (0o750, 0o750, 0o750, 0o640)


def test_7zz_really_refuses_a_link_with_dotdot_inside_the_folder(tmp_path: Path) -> None:
    """The fact the fix rests on: 7zz skips such a link with an error and exit code 2."""
    root = tree(tmp_path / "tree")
    os.symlink("../mkl_core.lib", root / "lib" / "intel64" / "mkl_core.lib")
    archive_file = pack(root, tmp_path / "mkl.7z")
    result = subprocess.run(
        [SEVEN_ZZ, "x", "-y", f"-o{tmp_path / 'raw'}", str(archive_file)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert (
        "Dangerous link path was ignored : lib/intel64/mkl_core.lib : ../mkl_core.lib" in result.stderr + result.stdout
    )


@pytest.mark.parametrize("prefer", ["native", "py7zr"])
def test_links_inside_the_folder_are_kept(tmp_path: Path, umask: None, prefer: str) -> None:
    root = tree(tmp_path / "tree")
    os.symlink("../mkl_core.lib", root / "lib" / "intel64" / "mkl_core.lib")  # '..', but inside: 7zz calls it dangerous
    os.symlink("../include", root / "lib" / "include")  # a folder link, also with '..'
    os.symlink("mkl_core.lib", root / "lib" / "mkl_alias.lib")  # no '..': 7zz extracts it itself
    archive_file = pack(root, tmp_path / "mkl.7z")
    target = tmp_path / "deps" / "mkl"
    lines: list[str] = []
    tool = install(archive_file, target, prefer=prefer, lines=lines)
    assert os.readlink(target / "lib" / "intel64" / "mkl_core.lib") == "../mkl_core.lib"
    assert os.readlink(target / "lib" / "include") == "../include"
    assert os.readlink(target / "lib" / "mkl_alias.lib") == "mkl_core.lib"
    assert (target / "lib" / "intel64" / "mkl_core.lib").read_bytes() == (root / "lib" / "mkl_core.lib").read_bytes()
    assert (target / "lib" / "include" / "mkl.h").is_file()
    if prefer == "native":
        assert tool == "7zz"
        assert any(
            "7zz refused the link 'lib/intel64/mkl_core.lib' -> '../mkl_core.lib' as dangerous" in line
            and "recreated" in line
            for line in lines
        )
    assert sorted(p.name for p in target.parent.iterdir()) == ["mkl"]  # no work folder left


def test_an_inside_link_that_cannot_be_created_is_skipped_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows without the right to create links: the link is left out, the rest is installed."""
    root = tree(tmp_path / "tree")
    os.symlink("../mkl_core.lib", root / "lib" / "intel64" / "mkl_core.lib")
    archive_file = pack(root, tmp_path / "mkl.7z")

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError(1314, "A required privilege is not held by the client")

    # Kept double: Windows refuses links without SeCreateSymbolicLinkPrivilege; Linux always lets this user make them.
    monkeypatch.setattr(os, "symlink", refuse)
    target = tmp_path / "deps" / "mkl"
    lines: list[str] = []
    install(archive_file, target, lines=lines)
    assert not os.path.lexists(target / "lib" / "intel64" / "mkl_core.lib")  # not even 7zz's empty placeholder
    assert (target / "include" / "mkl.h").is_file()
    assert any(
        "skipped the link 'lib/intel64/mkl_core.lib' -> '../mkl_core.lib'" in line and "privilege" in line
        for line in lines
    )


@pytest.mark.parametrize("prefer", ["native", "py7zr"])
@pytest.mark.parametrize("link_target", ["../../outside.txt", "ABSOLUTE"])
def test_links_leading_outside_stay_refused(tmp_path: Path, prefer: str, link_target: str) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    root = tree(tmp_path / "tree")
    stored = str(tmp_path / "outside.txt") if link_target == "ABSOLUTE" else link_target
    os.symlink(stored, root / "lib" / "escape.lib")
    archive_file = pack(root, tmp_path / "mkl.7z")
    target = tmp_path / "deps" / "mkl"
    expected = "link 'lib/escape.lib'" if prefer == "native" else "Symlink point out of target"
    with pytest.raises(BadArchive, match=expected):
        install(archive_file, target, prefer=prefer)
    assert not target.parent.exists() or list(target.parent.iterdir()) == []
