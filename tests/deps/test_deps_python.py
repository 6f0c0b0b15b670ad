"""`invoke fetch-deps --python X.Y`: CPython for Windows from NuGet's `python` package, with the guarantees
of the MKL/MAGMA archives (checksum in the lock, mirror, resume, size bound, safe extraction, --dry-run,
--from-dir).

NuGet is not reachable here: a real HTTP server on 127.0.0.1 stands in for a mirror, serving .nupkg files
made at test time as NuGet lays them out (a zip holding the package under tools/ next to NuGet's own
members: [Content_Types].xml, _rels/.rels, python.nuspec, package/services/..., .signature.p7s).
"""

from __future__ import annotations

import hashlib
import random
import re
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from deps_support import FaultServer, Fetcher, copy_files, run_cli

from pytorch_winbuild.deps.cache import deps_dir, download_path, installed_path, read_marker
from pytorch_winbuild.deps.lockfile import LockEntry, LockFile
from pytorch_winbuild.errors import DependencyError
from pytorch_winbuild.knowledge.catalog import Archive, load_catalog, python_archive, python_interpreter

pytestmark = pytest.mark.network

PY36 = "python.3.6.8.nupkg"
PY38 = "python.3.8.10.nupkg"
# NuGet's package members outside tools/ (a package made by `nuget pack`, repository-signed by nuget.org).
NUGET_MEMBERS = {
    "[Content_Types].xml": '<?xml version="1.0" encoding="utf-8"?><Types xmlns="http://schemas.openxmlformats.org/'
    'package/2006/content-types"><Default Extension="exe" ContentType="application/octet" /></Types>',
    "_rels/.rels": '<?xml version="1.0" encoding="utf-8"?><Relationships />',
    "python.nuspec": '<?xml version="1.0"?><package><metadata><id>python</id><version>{version}</version>'
    "<description>Installs 64-bit Python for use in build scenarios.</description></metadata></package>",
    "package/services/metadata/core-properties/5c9b3e2a.psmdcp": "<coreProperties />",
    ".signature.p7s": "signature bytes",
}


def tools_members(version: str, *, venv: bool) -> dict[str, bytes]:
    """What tools/ holds: the interpreter and its DLL (incompressible, so a body can be cut mid-way), the
    standard library, the headers and import library, pip, and a name `nuget pack` escaped ('+' as %2B)."""
    minor = "".join(version.split(".")[:2])
    rng = random.Random(version)
    members = {
        "tools/python.exe": b"MZ" + rng.randbytes(40_000),
        f"tools/python{minor}.dll": b"MZ" + rng.randbytes(400_000),
        "tools/Lib/os.py": b"# os\n" * 200,
        "tools/include/Python.h": b"/* Python.h */\n",
        f"tools/libs/python{minor}.lib": rng.randbytes(20_000),
        "tools/Lib/site-packages/pip/__init__.py": b"__version__ = '18.1'\n",
        "tools/Lib/site-packages/pip/_vendor/a%2Bb.txt": b"escaped by nuget pack\n",
    }
    if venv:
        members["tools/Lib/venv/__init__.py"] = b"# venv\n"
        members["tools/Lib/ensurepip/__init__.py"] = b"# ensurepip\n"
    return members


def make_nupkg(path: Path, version: str, members: dict[str, bytes]) -> Path:
    """A .nupkg as nuget.org serves it: a deflated zip of NuGet's members and the package's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as package:
        for name, text in NUGET_MEMBERS.items():
            package.writestr(name, text.format(version=version))
        for name, data in members.items():
            package.writestr(zipfile.ZipInfo(name), data, zipfile.ZIP_DEFLATED)
    return path


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("nuget")
    return {
        PY36: make_nupkg(folder / PY36, "3.6.8", tools_members("3.6.8", venv=False)),
        PY38: make_nupkg(folder / PY38, "3.8.10", tools_members("3.8.10", venv=True)),
    }


@pytest.fixture
def mirror(packages: dict[str, Path]) -> Iterator[FaultServer]:
    running = FaultServer(packages).start()
    yield running
    running.stop()


@pytest.fixture
def py36() -> Archive:
    archive = python_archive("3.6")
    assert archive is not None
    return archive


def fetch_deps(tmp_path: Path, *args: str, cache: str = "cache") -> subprocess.CompletedProcess[str]:
    return run_cli(
        "fetch-deps", "--cache-dir", str(tmp_path / cache), "--lock-file", str(tmp_path / "deps.lock"), *args
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_catalog_has_one_nuget_package_per_minor_and_none_for_others() -> None:
    archive = python_archive("3.6")
    assert archive is not None and archive.version == "3.6.8" and archive.file_name == PY36
    # NuGet's flat container: {@id}/{LOWER_ID}/{LOWER_VERSION}/{LOWER_ID}.{LOWER_VERSION}.nupkg
    assert archive.url == "https://api.nuget.org/v3-flatcontainer/python/3.6.8/python.3.6.8.nupkg"
    assert archive.folder_name == "python.3.6.8" and "tools/python.exe" in archive.layout
    assert "tools/Lib/venv/__init__.py" not in archive.layout  # 3.6's package is not held to what 3.7.4 added
    py38 = python_archive("3.8")
    assert py38 is not None and "tools/Lib/ensurepip/__init__.py" in py38.layout
    assert [python_archive(minor) for minor in ("2.7", "3.4", "3.16", "3")] == [None] * 4
    assert list(load_catalog().python) == [f"3.{minor}" for minor in range(5, 16)]  # 3.15.2: cibuildwheel 4.3.5's
    assert python_interpreter(Path("C:/cache/deps/python.3.6.8")) == Path("C:/cache/deps/python.3.6.8/tools/python.exe")


def test_cold_fetch_extracts_checks_and_records_then_a_warm_run_does_nothing(
    mirror: FaultServer, packages: dict[str, Path], tmp_path: Path
) -> None:
    cold = fetch_deps(tmp_path, "--python", "3.6", "--mirror", mirror.url)
    assert cold.returncode == 0, cold.stderr
    folder = tmp_path / "cache" / "deps" / "python.3.6.8"
    assert f"Python 3.6.8: {folder} (downloaded" in cold.stdout and "UNVERIFIED: trusted on first use" in cold.stdout
    assert f"Python 3.6.8 interpreter: {folder / 'tools' / 'python.exe'}" in cold.stdout
    assert "MKL" not in cold.stdout and "MAGMA" not in cold.stdout  # --python alone fetches only the Python
    assert [request.name for request in mirror.requests] == [PY36]
    for name, data in tools_members("3.6.8", venv=False).items():
        written = folder / name.replace("%2B", "+")  # NuGet decodes the escapes of `nuget pack` when it extracts
        assert written.read_bytes() == data, name
    assert (folder / "python.nuspec").is_file() and (folder / "[Content_Types].xml").is_file()
    marker = read_marker(folder)
    assert marker is not None and marker.extractor == "zipfile" and marker.sha256 == sha256(packages[PY36])
    assert LockFile.load(tmp_path / "deps.lock").get(PY36) == LockEntry(
        sha256(packages[PY36]), packages[PY36].stat().st_size
    )

    warm = fetch_deps(tmp_path, "--python", "3.6", "--mirror", mirror.url)
    assert warm.returncode == 0, warm.stderr
    assert f"Python 3.6.8: {folder} (already in the cache" in warm.stdout
    assert len(mirror.requests) == 1  # nothing asked of the server


def test_a_package_other_than_the_recorded_one_is_refused(
    mirror: FaultServer, packages: dict[str, Path], tmp_path: Path
) -> None:
    assert fetch_deps(tmp_path, "--python", "3.6", "--mirror", mirror.url).returncode == 0
    mirror.files[PY36] = make_nupkg(tmp_path / "tampered" / PY36, "3.6.8", tools_members("3.6.9", venv=False))
    other_cache = fetch_deps(tmp_path, "--python", "3.6", "--mirror", mirror.url, cache="second cache")
    assert other_cache.returncode == 4, other_cache.stderr
    assert f"checksum mismatch for {PY36}" in other_cache.stderr and sha256(packages[PY36]) in other_cache.stderr
    assert not (tmp_path / "second cache" / "deps" / "python.3.6.8").exists()
    assert not (tmp_path / "second cache" / "downloads" / PY36).exists()


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ("../../escaped.txt", "a '..' component"),
        ("tools/%2e%2e/%2E%2E/%2e%2e/escaped.txt", "a '..' component"),  # escaped as `nuget pack` escapes names
        ("{absolute}", "an absolute path"),
        ("C:/escaped.txt", "a drive letter"),
    ],
)
def test_a_member_leading_outside_refuses_the_package_and_writes_nothing(
    mirror: FaultServer, py36: Archive, tmp_path: Path, member: str, reason: str
) -> None:
    outside = tmp_path / "abs-escaped.txt"
    name = member.format(absolute=outside.as_posix())
    members = {**tools_members("3.6.8", venv=False), name: b"escaped"}
    mirror.files[PY36] = make_nupkg(tmp_path / "evil" / PY36, "3.6.8", members)
    fetch = Fetcher(tmp_path / "run")
    with pytest.raises(DependencyError) as caught:
        fetch([py36], mirror=mirror.url)
    assert reason in caught.value.message and "not a genuine NuGet package of Python" in (caught.value.fix or "")
    assert not outside.exists() and not list(tmp_path.rglob("escaped.txt"))
    assert not deps_dir(fetch.cache_dir, py36).exists() and fetch.work_folders() == []
    assert not download_path(fetch.cache_dir, py36).exists()  # the file is deleted, and not recorded
    assert LockFile.load(fetch.lock_path).get(PY36) is None


def test_a_package_without_the_layout_is_refused(mirror: FaultServer, tmp_path: Path) -> None:
    py38 = python_archive("3.8")
    assert py38 is not None
    without_venv = tools_members("3.8.10", venv=False)  # 3.7.4 on must hold venv and ensurepip
    mirror.files[PY38] = make_nupkg(tmp_path / "no venv" / PY38, "3.8.10", without_venv)
    fetch = Fetcher(tmp_path)
    with pytest.raises(DependencyError, match=r"layout of a Python archive: tools/Lib/venv/__init__\.py"):
        fetch([py38], mirror=mirror.url)
    assert installed_path(fetch.cache_dir, py38) is None and LockFile.load(fetch.lock_path).get(PY38) is None
    mirror.files[PY38] = make_nupkg(tmp_path / "full" / PY38, "3.8.10", tools_members("3.8.10", venv=True))
    (result,) = fetch([py38], mirror=mirror.url).archives
    assert python_interpreter(result.path).is_file() and (result.path / "tools/Lib/ensurepip/__init__.py").is_file()


def test_a_dropped_connection_resumes_and_a_size_past_the_lock_stops(
    mirror: FaultServer, packages: dict[str, Path], py36: Archive, tmp_path: Path
) -> None:
    mirror.fault(PY36).drop_after.append(200_000)
    fetch = Fetcher(tmp_path / "resume")
    (result,) = fetch([py36], mirror=mirror.url).archives
    first, second = mirror.gets(PY36)
    assert first.sent == 200_000 and second.status == 206 and re.fullmatch(r"bytes=\d+-", second.range or "")
    assert result.downloaded_bytes == packages[PY36].stat().st_size  # resumed, not downloaded twice
    assert installed_path(fetch.cache_dir, py36) is not None

    bounded = Fetcher(tmp_path / "bounded")
    LockFile.load(bounded.lock_path).record(PY36, LockEntry("0" * 64, 12345))
    with pytest.raises(DependencyError, match="12345 bytes are expected"):
        bounded([py36], mirror=mirror.url)
    assert not (bounded.cache_dir / "downloads" / f"{PY36}.part").exists()


def test_from_dir_and_a_file_mirror_take_the_package_offline(
    packages: dict[str, Path], py36: Archive, tmp_path: Path
) -> None:
    folder = copy_files({PY36: packages[PY36]}, tmp_path / "downloaded by hand")
    by_hand = fetch_deps(tmp_path, "--python", "3.6", "--from-dir", str(folder))
    assert by_hand.returncode == 0, by_hand.stderr
    assert "Python 3.6.8: " in by_hand.stdout and "(copied" in by_hand.stdout
    fetch = Fetcher(tmp_path / "file mirror")
    (result,) = fetch([py36], mirror=folder.as_uri()).archives
    assert result.action == "copied" and python_interpreter(result.path).is_file()


def test_dry_run_names_the_url_and_fetches_nothing(mirror: FaultServer, tmp_path: Path) -> None:
    nuget = fetch_deps(tmp_path, "--python", "3.6", "--dry-run")
    assert nuget.returncode == 0, nuget.stderr
    folder = tmp_path / "cache" / "deps" / "python.3.6.8"
    assert nuget.stdout.splitlines() == [
        "Python 3.6.8: https://api.nuget.org/v3-flatcontainer/python/3.6.8/python.3.6.8.nupkg",
        f"  download  {tmp_path / 'cache' / 'downloads' / PY36}",
        f"  extract   {folder} (to fetch)",
        f"Python 3.6.8 interpreter (once fetched): {folder / 'tools' / 'python.exe'}",
        "note: Python 3.6.8 from NuGet has no venv module (NuGet's packages hold venv and ensurepip from 3.7.4 on), so "
        "a build cannot run in a venv made from it and plans do not use it; for a release that needs Python 3.6, "
        "install the 64-bit Python from python.org.",
    ]
    mirrored = fetch_deps(tmp_path, "--python", "3.6", "--mirror", mirror.url, "--dry-run")
    assert f"Python 3.6.8: {mirror.url}{PY36}" in mirrored.stdout
    with_mkl = fetch_deps(tmp_path, "--python", "3.8", "--mkl-version", "2020.2.254", "--dry-run")
    assert "MKL 2020.2.254: " in with_mkl.stdout and "Python 3.8.10: " in with_mkl.stdout
    assert mirror.requests == [] and not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    ("value", "says"),
    [("3", "'3' is not a Python version of the form X.Y"), ("abc", "'abc' is not a Python version"), ("2.7", "2.7")],
)
def test_a_bad_python_exits_2_naming_the_minors_there_are(tmp_path: Path, value: str, says: str) -> None:
    result = fetch_deps(tmp_path, "--python", value, "--dry-run")
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and "3.5, 3.6, 3.7" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1  # one paragraph
