"""Issue 29 points 7, 8, 9, 10a, 10c: what fetch-deps takes from a folder, an archive's names, a mirror URL, and a
read-only cache, on real things.

- Every copy has the size bound a download has (the lock's recorded size, else [download] max_size): a sparse
  file of 4.6 GB in --from-dir or a file:// mirror is refused on its size, before a byte is copied; a file whose
  size says less than it holds (/proc) is stopped at the bound; a huge file in downloads/ is not read.
- An archive may not hold the marker's name (a folder, a link, another case): it is refused (exit 4) and deleted,
  and the marker is never written through a link.
- Entry names are checked as the extractor writes them: `./a/pwned` is under the link `a` as `a/pwned` is.
- A mirror URL with a query or a fragment is refused (exit 2) without showing it.
- A read-only cache that holds everything works: fetch-deps, build --dry-run, and clean with nothing to remove.

The archives are made by the real 7zz at test time (`-snl` keeps links, `rn` renames entries to hostile names).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from deps_support import FAST, MAGMA_PY7ZR, MKL, REPO_ROOT, FaultServer, Fetcher, Made, make_tree, run_cli

from pytorch_winbuild.deps.archive_checks import BadArchive, entry_path
from pytorch_winbuild.deps.cache import MARKER_NAME, Marker, download_path, installed_path, tag_cache, write_marker
from pytorch_winbuild.deps.extract import install_archive
from pytorch_winbuild.deps.lockfile import LockEntry, LockFile
from pytorch_winbuild.errors import ConfigurationError, DependencyError
from pytorch_winbuild.knowledge.catalog import Archive, select_archives

pytestmark = pytest.mark.network
SEVEN_ZZ = shutil.which("7zz") or "7zz"
SPARSE_SIZE = 4600 * 1024 * 1024  # past the 4 GiB of [download] max_size; sparse, so it costs no disk
SECRET = "t0kenS3cret"


def mkl() -> Archive:
    return select_archives(cuda=None, mkl_version="2020.2.254", magma_versions=[])[0]


def sparse(path: Path, size: int = SPARSE_SIZE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["truncate", "-s", str(size), str(path)], check=True)
    assert path.stat().st_size == size and path.stat().st_blocks == 0  # really sparse: nothing on disk
    return path


def pack(root: Path, archive: Path, *renames: tuple[str, str]) -> Path:
    """`7zz a -snl` of everything in `root` (links stored as links), then `7zz rn` for each (old, new) name."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in root.iterdir())
    subprocess.run([SEVEN_ZZ, "a", "-snl", str(archive), *names], cwd=root, check=True, capture_output=True)
    for old, new in renames:
        subprocess.run([SEVEN_ZZ, "rn", str(archive), old, new], check=True, capture_output=True)
    return archive


def listed(archive: Path) -> list[str]:
    text = subprocess.run([SEVEN_ZZ, "l", "-slt", str(archive)], check=True, capture_output=True, text=True).stdout
    return [line[len("Path = ") :] for line in text.split("----------", 1)[1].splitlines() if line.startswith("Path")]


def error_paragraph(stderr: str, kind: str) -> str:
    """The error the CLI printed: one line starting with `kind`, the last one, after the progress lines."""
    assert "Traceback" not in stderr, stderr
    paragraph = stderr[stderr.index(f"{kind} error: ") :]
    assert "\n" not in paragraph.rstrip("\n"), stderr
    return paragraph


def fetch_cli(from_dir: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "fetch-deps", "--cuda", "cpu", "--mkl-version", "2020.2.254", "--from-dir", str(from_dir),
        "--cache-dir", str(cache), "--lock-file", str(cache.parent / "deps.lock"), *extra,
    )  # fmt: skip


def nothing_installed(cache: Path) -> bool:
    deps, downloads = cache / "deps", cache / "downloads"
    return (not deps.exists() or list(deps.iterdir()) == []) and (
        not downloads.exists() or list(downloads.iterdir()) == []
    )


# --- 7: every copy has a size bound ---------------------------------------------------------------------------


def test_a_sparse_file_past_max_size_in_from_dir_is_refused_before_copying(tmp_path: Path) -> None:
    sparse(tmp_path / "from" / MKL)
    cache = tmp_path / "cache"
    result = fetch_cli(tmp_path / "from", cache)
    assert result.returncode == 4, result.stderr
    error = error_paragraph(result.stderr, "dependency")
    assert f"{tmp_path / 'from' / MKL} is {SPARSE_SIZE} bytes, more than the limit of 4294967296 bytes" in error
    assert "[download] max_size" in error and "nothing was copied" in error
    assert "copying" not in result.stderr  # refused on its size
    assert nothing_installed(cache)


def test_a_sparse_file_past_max_size_on_a_file_mirror_is_refused(fetch: Fetcher, tmp_path: Path) -> None:
    source = sparse(tmp_path / "mirror" / MKL)
    with pytest.raises(DependencyError) as caught:
        fetch([mkl()], mirror=(tmp_path / "mirror").as_uri() + "/")
    assert caught.value.exit_code == 4
    assert f"{source} is {SPARSE_SIZE} bytes, more than the limit of" in caught.value.message
    assert "[download] max_size" in (caught.value.fix or "")  # the limits remedy of a mirror
    assert nothing_installed(fetch.cache_dir)


def test_a_copy_is_bound_by_the_size_the_lock_records(fetch: Fetcher, made: Made, tmp_path: Path) -> None:
    folder = tmp_path / "from"
    folder.mkdir()
    shutil.copyfile(made.files[MKL], folder / MKL)
    LockFile.load(fetch.lock_path).record(MKL, LockEntry("a" * 64, 200_000))
    with pytest.raises(DependencyError) as caught:
        fetch([mkl()], from_dir=folder)
    size = made.files[MKL].stat().st_size
    assert f"is {size} bytes, more than the 200000 bytes recorded for it in {fetch.lock_path}" in caught.value.message
    assert nothing_installed(fetch.cache_dir)


def test_a_file_holding_more_than_its_size_says_is_stopped_at_the_bound(fetch: Fetcher, tmp_path: Path) -> None:
    """/proc files say 0 bytes and hold more: the copy stops before the chunk that would pass the bound."""
    folder = tmp_path / "from"
    folder.mkdir()
    os.symlink("/proc/self/smaps", folder / MKL)  # tens of KB for any Python process, st_size 0
    assert (folder / MKL).stat().st_size == 0 and len((folder / MKL).read_bytes()) > 8192
    settings = replace(FAST, max_size=4096, chunk_size=1024)
    with pytest.raises(DependencyError) as caught:
        fetch([mkl()], from_dir=folder, download_settings=settings)
    message = caught.value.message
    assert "holds more than the limit of 4096 bytes" in message and "the partial copy was deleted" in message
    assert int(message.split("stopped after ")[1].split(" bytes")[0]) <= 4096
    assert nothing_installed(fetch.cache_dir)  # no .part left


def test_a_huge_file_in_downloads_is_not_read_but_replaced(fetch: Fetcher, made: Made, tmp_path: Path) -> None:
    folder = tmp_path / "from"
    folder.mkdir()
    shutil.copyfile(made.files[MKL], folder / MKL)
    sparse(download_path(fetch.cache_dir, mkl()))
    result = fetch([mkl()], from_dir=folder)
    assert "is larger than the limit of 4294967296 bytes" in fetch.log and "fetching it again" in fetch.log
    assert result.archives[0].action == "copied"
    assert download_path(fetch.cache_dir, mkl()).stat().st_size == made.files[MKL].stat().st_size


# --- 8: the marker's name in an archive --------------------------------------------------------------------------


def _tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "tree", "mkl", 20_000)


@pytest.mark.parametrize("shape", ["folder", "link", "upper-case", "dot-slash"])
def test_an_archive_holding_the_markers_name_is_refused_and_deleted(tmp_path: Path, shape: str) -> None:
    tree = _tree(tmp_path)
    header = (tree / "include" / "mkl.h").read_bytes()
    renames: list[tuple[str, str]] = []
    if shape == "link":
        os.symlink("include/mkl.h", tree / MARKER_NAME)  # inside the folder: check_links lets it through
    else:
        (tree / MARKER_NAME).mkdir()
        (tree / MARKER_NAME / "x").write_text("x")
        if shape != "folder":
            new = MARKER_NAME.upper() if shape == "upper-case" else f"./{MARKER_NAME}"
            renames = [(MARKER_NAME, new), (f"{MARKER_NAME}/x", f"{new}/x")]
    archive_file = pack(tree, tmp_path / "from" / MKL, *renames)
    cache = tmp_path / "cache"
    for run in range(2):  # the second run copies it afresh: nothing of the first is reused
        result = fetch_cli(tmp_path / "from", cache)
        assert result.returncode == 4, result.stderr
        error = error_paragraph(result.stderr, "dependency")
        assert f"{MKL} holds the entry" in error and "which pytorch-winbuild reserves for the marker" in error
        assert "nothing was extracted and the file has been removed" in error
        assert "copying" in result.stderr, f"run {run + 1} reused a refused archive"
        assert nothing_installed(cache)
    assert archive_file.is_file()  # --from-dir's own file is the user's: only the cache's copy is deleted
    assert (tree / "include" / "mkl.h").read_bytes() == header


@pytest.mark.parametrize("prefer", ["native", "py7zr"])
def test_a_marker_link_is_refused_by_either_extractor(tmp_path: Path, prefer: str) -> None:
    tree = _tree(tmp_path)
    os.symlink("include/mkl.h", tree / MARKER_NAME)
    archive_file = pack(tree, tmp_path / MKL)
    target = tmp_path / "deps" / "mkl"
    with pytest.raises(BadArchive, match="reserves for the marker"):
        install_archive(archive_file, mkl(), target, sha256="0" * 64, size=1, prefer=prefer, native=SEVEN_ZZ, log=print)
    assert not (tmp_path / "deps").exists()


@pytest.mark.parametrize("kind", ["link to a file", "dangling link", "folder"])
def test_the_marker_is_never_written_through_a_link_or_into_a_folder(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "extracted"
    folder.mkdir()
    victim = tmp_path / "mkl.h"
    victim.write_text("the header\n")
    if kind == "link to a file":
        os.symlink(victim, folder / MARKER_NAME)
    elif kind == "dangling link":
        os.symlink(tmp_path / "elsewhere.json", folder / MARKER_NAME)
    else:
        (folder / MARKER_NAME).mkdir()
    with pytest.raises(OSError):
        write_marker(folder, Marker(file_name=MKL, sha256="0" * 64, size=1, extractor="7zz"))
    assert victim.read_text() == "the header\n" and not (tmp_path / "elsewhere.json").exists()
    assert sorted(p.name for p in folder.iterdir()) == [MARKER_NAME]  # no temporary file left


def test_the_marker_replaces_a_regular_file_whole(tmp_path: Path) -> None:
    (tmp_path / MARKER_NAME).write_text("old")
    write_marker(tmp_path, Marker(file_name=MKL, sha256="1" * 64, size=2, extractor="7zz"))
    assert '"sha256": "' + "1" * 64 in (tmp_path / MARKER_NAME).read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER_NAME]


# --- 9: names are checked as the extractor writes them ------------------------------------------------------------


@pytest.mark.parametrize("name", ["./a/pwned", "a//pwned", "./a/./pwned", "A/pwned"])
@pytest.mark.parametrize("prefer", ["native", "py7zr"])
def test_an_entry_under_a_link_is_refused_however_its_name_is_spelled(tmp_path: Path, name: str, prefer: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tree = _tree(tmp_path)
    os.symlink(outside, tree / "a")  # a -> /…/outside
    (tree / "pwned").write_text("pwned\n")
    archive_file = pack(tree, tmp_path / MKL, ("pwned", name))
    assert name in listed(archive_file)  # 7-Zip keeps the name as it was given
    with pytest.raises(BadArchive) as caught:
        install_archive(
            archive_file, mkl(), tmp_path / "deps" / "mkl", sha256="0" * 64, size=1, prefer=prefer,
            native=SEVEN_ZZ, log=print,
        )  # fmt: skip
    assert f"holds the entry {name!r} with a parent folder that is a link" in caught.value.message
    assert list(outside.iterdir()) == [] and not (tmp_path / "deps").exists()


def test_an_archive_listing_its_folder_as_dot_is_still_installed(tmp_path: Path) -> None:
    """py7zr's writeall(arcname='.') lists the folder itself as '.': a genuine archive, not a hostile name (7-Zip
    extracts it; py7zr's own extraction refuses it, "Specified path is bad", as it did before)."""
    import py7zr

    archive_file = tmp_path / MKL
    with py7zr.SevenZipFile(archive_file, "w") as out:
        out.writeall(_tree(tmp_path), arcname=".")
    assert "." in py7zr.SevenZipFile(archive_file).getnames()
    target = tmp_path / "deps" / "mkl"
    install_archive(archive_file, mkl(), target, sha256="0" * 64, size=1, prefer="native", native=SEVEN_ZZ, log=print)
    assert (target / "include" / "mkl.h").is_file() and (target / MARKER_NAME).is_file()


@pytest.mark.parametrize(
    ("name", "path"),
    [("./a/b", "a/b"), ("a//b/", "a/b"), ("a/./b", "a/b"), ("a\\b", "a/b"), (".\\a\\.\\b", "a/b"), ("lib/", "lib")],
)
def test_entry_path_is_the_path_written(name: str, path: str) -> None:
    assert entry_path(name) == path


# --- 10a: a mirror URL with a query or a fragment -------------------------------------------------------------------


@pytest.mark.parametrize("tail", [f"?token={SECRET}", f"#{SECRET}", "?", f"sub/?sig={SECRET}#x"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_mirror_with_a_query_or_fragment_is_refused_unshown(server: FaultServer, tail: str, dry_run: bool) -> None:
    mirror = server.url + tail
    result = run_cli("fetch-deps", "--cuda", "cpu", "--mirror", mirror, *(["--dry-run"] if dry_run else []))
    assert result.returncode == 2, result.stdout + result.stderr
    error = error_paragraph(result.stderr, "configuration")
    assert error.startswith(f"configuration error: --mirror {server.url}") and "has a query or a fragment" in error
    assert SECRET not in result.stdout + result.stderr
    assert "USER:TOKEN@ before the host name" in error and "netrc" in error
    assert server.requests == []  # nothing was asked of the mirror


def test_a_configured_mirror_with_a_query_is_refused_by_its_name(tmp_path: Path) -> None:
    config = tmp_path / "winbuild.yaml"
    config.write_text(f'winbuild:\n  mirror: "https://mirror.example/ossci/?token={SECRET}"\n', encoding="utf-8")
    result = run_cli("-f", str(config), "fetch-deps", "--cuda", "cpu", "--dry-run")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(
        "configuration error: winbuild.mirror https://mirror.example/ossci/ has a query or a fragment"
    )
    assert SECRET not in result.stdout + result.stderr


def test_a_file_mirror_with_a_fragment_is_refused(tmp_path: Path) -> None:
    from pytorch_winbuild.deps.records import resolve_source

    (tmp_path / "a#b").mkdir()
    with pytest.raises(ConfigurationError, match="has a query or a fragment"):
        resolve_source(tmp_path.as_uri() + "/a#b/", None)
    assert resolve_source(tmp_path.as_uri() + "/a%23b/", None).folder == tmp_path / "a#b"  # the fix it gives


# --- 10c: a read-only cache that holds everything ------------------------------------------------------------------


def _tree_state(root: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (str(p.relative_to(root)), p.lstat().st_mode, p.lstat().st_mtime_ns) for p in [root, *root.rglob("*")]
    )


def test_a_read_only_cache_holding_everything_is_used_and_only_writes_are_refused(made: Made, tmp_path: Path) -> None:
    full, empty = tmp_path / "full", tmp_path / "empty"
    folder = tmp_path / "from"
    folder.mkdir()
    for name in (MKL, MAGMA_PY7ZR):
        shutil.copyfile(made.files[name], folder / name)
    filled = run_cli("fetch-deps", "--cuda", "cpu", "--mkl-version", "2020.2.254", "--from-dir", str(folder),
                     "--cache-dir", str(full))  # fmt: skip
    assert filled.returncode == 0, filled.stderr
    tag_cache(empty)  # a cache with nothing in it
    before = _tree_state(full), _tree_state(empty)
    python = [sys.executable, "-m", "invoke"]
    commands = {
        "fetch": [*python, "fetch-deps", "--cuda", "cpu", "--mkl-version", "2020.2.254", "--cache-dir", str(full)],
        "dry-run": [*python, "build", "--dry-run", "--cuda", "cpu", "--cache-dir", str(full)],
        "clean-nothing": [*python, "clean", "--deps", "--downloads", "--cache-dir", str(empty)],
        "clean-something": [*python, "clean", "--deps", "--cache-dir", str(full)],
        "fetch-missing": [*python, "fetch-deps", "--cuda", "9.0", "--mkl-version", "2020.2.254", "--from-dir",
                          str(folder), "--cache-dir", str(full)],
    }  # fmt: skip
    lines = [f"mount --bind {shlex.quote(str(f))} {shlex.quote(str(f))} || exit 90" for f in (full, empty)]
    lines += [f"mount -o remount,bind,ro {shlex.quote(str(f))} || exit 91" for f in (full, empty)]
    lines.append(f"touch {shlex.quote(str(full / 'probe'))} 2>/dev/null && exit 92")  # really read-only
    for name, command in commands.items():
        out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        lines.append(f"{shlex.join(command)} >{shlex.quote(str(out))} 2>{shlex.quote(str(err))}; echo {name}=$?")
    result = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", "\n".join(lines)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    codes = dict(line.split("=") for line in result.stdout.split())

    def text(name: str, stream: str) -> str:
        return (tmp_path / f"{name}.{stream}").read_text()

    assert codes["fetch"] == "0", text("fetch", "err")
    assert "(already in the cache;" in text("fetch", "out")
    assert codes["dry-run"] == "0", text("dry-run", "err")
    assert codes["clean-nothing"] == "0", text("clean-nothing", "err")
    assert f"nothing to remove in {empty}" in text("clean-nothing", "out")
    for name in ("clean-something", "fetch-missing"):
        assert codes[name] == "2", text(name, "err")
        error = error_paragraph(text(name, "err"), "configuration")
        assert f"--cache-dir {full} cannot be written (Read-only file system)" in error
    assert (_tree_state(full), _tree_state(empty)) == before  # nothing changed, nothing half-written
    assert installed_path(full, mkl()) is not None
