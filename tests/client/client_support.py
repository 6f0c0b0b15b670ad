"""The client tier's sources: real PyTorch releases from Debian's archive, checked and unpacked.

Debian packages PyTorch's own source releases (`pytorch` source package). `apt-get source
--download-only pytorch=VERSION` fetches a release's .dsc and .orig tarball; apt checks both
against the Sources index, whose hashes the suite's signed InRelease vouches for (the
deb-src lines .ci/run writes name Debian's archive keyring). The tier keeps the files in a cache
folder and checks them again every session, before it unpacks anything:

- the .dsc: size and SHA-256 as `apt-cache showsrc` lists them (the signed index);
- the .orig tarball: size and SHA-256 as the .dsc's Checksums-Sha256 lists them.

Only the files the tier runs or reads are unpacked (tools/, setup.py, version.txt, the CMake
files, torch/utils/cpp_extension.py), as regular files under a fresh folder, through tarfile's
`data` filter (no absolute paths, no `..`, no links). None of PyTorch's code is committed here.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from filelock import FileLock

CLIENT_DIR = Path(__file__).resolve().parent
DRIVER = CLIENT_DIR / "setup_helpers_driver.py"
CLIENT_HOSTS = CLIENT_DIR / "hosts"
CACHE_ENV = "PYTORCH_WINBUILD_CLIENT_CACHE"  # where the downloads are kept (default below)


@dataclass(frozen=True)
class Release:
    version: str  # PyTorch's own version (version.txt)
    suite: str  # the Debian suite that ships it


# The releases Debian ships, oldest first. The Debian revision (-7, +dfsg-4) is read from the
# index each session, so a new upload of the same release does not break the tier.
RELEASES = (Release("1.7.1", "bullseye"), Release("1.13.1", "bookworm"), Release("2.6.0", "trixie"))

# What the tier needs of a release's tree: paths relative to its top folder.
_WANTED_PREFIXES = ("tools/", "cmake/", "torch/utils/cpp_extension.py", "setup.py", "version.txt")


class SourceError(RuntimeError):
    """A release cannot be had or does not verify: the tier fails with this message."""


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "pytorch-winbuild-tests"


@dataclass(frozen=True)
class SourceFile:
    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class SourceVersion:
    """One `pytorch` stanza of the signed Sources index."""

    version: str  # Debian's, e.g. 1.13.1+dfsg-4
    files: tuple[SourceFile, ...]  # Checksums-Sha256

    @property
    def upstream(self) -> str:
        version = self.version.split(":", 1)[-1].rsplit("-", 1)[0]
        return re.sub(r"[+~](dfsg|ds)\d*$", "", version)

    def file(self, suffix: str) -> SourceFile:
        matches = [entry for entry in self.files if entry.name.endswith(suffix)]
        if len(matches) != 1:
            raise SourceError(f"pytorch {self.version}: expected one *{suffix} in the index, found {matches}")
        return matches[0]

    @property
    def dsc(self) -> SourceFile:
        return self.file(".dsc")


def parse_checksums(lines: list[str]) -> tuple[SourceFile, ...]:
    files = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and re.fullmatch(r"[0-9a-f]{64}", parts[0]):
            files.append(SourceFile(name=parts[2], size=int(parts[1]), sha256=parts[0]))
    return tuple(files)


def _field_lines(stanza: str, field: str) -> list[str]:
    """The continuation lines of a multi-line deb822 field."""
    lines = stanza.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(f"{field}:"):
            found = []
            for follow in lines[index + 1 :]:
                if not follow.startswith(" "):
                    break
                found.append(follow.strip())
            return found
    return []


def indexed_versions() -> list[SourceVersion]:
    """Every `pytorch` source version apt's (signed) Sources indexes list."""
    if shutil.which("apt-cache") is None:
        raise SourceError("apt-cache is missing: the client tier fetches PyTorch's sources with apt (Debian)")
    result = subprocess.run(
        ["apt-cache", "showsrc", "--only-source", "pytorch"], capture_output=True, text=True, check=False
    )
    versions = []
    for stanza in result.stdout.split("\n\n"):
        match = re.search(r"^Version: (\S+)$", stanza, re.MULTILINE)
        if match:
            versions.append(SourceVersion(match.group(1), parse_checksums(_field_lines(stanza, "Checksums-Sha256"))))
    return versions


def indexed_version(release: Release, versions: list[SourceVersion]) -> SourceVersion:
    matches = [entry for entry in versions if entry.upstream == release.version]
    if not matches:
        listed = ", ".join(entry.version for entry in versions) or "none"
        raise SourceError(
            f"apt's Sources indexes list no pytorch {release.version} (listed: {listed}). The client tier needs "
            f"deb-src lines for {release.suite} (and apt-get update): .ci/run writes "
            "/etc/apt/sources.list.d/pytorch-winbuild-deb-src.sources"
        )
    return max(matches, key=lambda entry: entry.version)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def matches(path: Path, expected: SourceFile) -> bool:
    return path.is_file() and path.stat().st_size == expected.size and sha256_of(path) == expected.sha256


def dsc_files(dsc: Path) -> tuple[SourceFile, ...]:
    """The Checksums-Sha256 of a .dsc (a clearsigned deb822 stanza)."""
    return parse_checksums(_field_lines(dsc.read_text(encoding="utf-8"), "Checksums-Sha256"))


@dataclass(frozen=True)
class FetchedRelease:
    release: Release
    debian_version: str
    dsc: Path
    orig: Path


def fetch_release(release: Release, versions: list[SourceVersion], folder: Path) -> FetchedRelease:
    """The release's .dsc and .orig tarball in `folder`, fetched with apt when missing or wrong, and checked."""
    entry = indexed_version(release, versions)
    dsc_entry = entry.dsc
    dsc = folder / dsc_entry.name
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".lock")):
        orig = _verified_orig(dsc, dsc_entry) if matches(dsc, dsc_entry) else None
        if orig is None:
            # apt-get checks every file against the signed index as it downloads. Its exit status is not
            # the verdict: a mirror may lack the .debian.tar.xz, which the tier does not need; the
            # checks below are.
            result = subprocess.run(
                ["apt-get", "source", "--download-only", "-qq", f"pytorch={entry.version}"],
                cwd=folder,
                capture_output=True,
                text=True,
                check=False,
            )
            apt_said = (result.stdout + result.stderr).strip()
            if not matches(dsc, dsc_entry):
                raise SourceError(
                    f"apt-get source --download-only pytorch={entry.version} did not bring {dsc_entry.name} "
                    f"({dsc_entry.size} bytes, SHA-256 {dsc_entry.sha256}) into {folder}: {apt_said}"
                )
            orig = _verified_orig(dsc, dsc_entry)
            if orig is None:
                raise SourceError(
                    f"apt-get source --download-only pytorch={entry.version} did not bring the .orig tarball "
                    f"that {dsc_entry.name} lists (size and SHA-256 checked) into {folder}: {apt_said}"
                )
    return FetchedRelease(release, entry.version, dsc, orig)


def _verified_orig(dsc: Path, dsc_entry: SourceFile) -> Path | None:
    if not matches(dsc, dsc_entry):
        return None
    listed = [entry for entry in dsc_files(dsc) if ".orig." in entry.name]
    if len(listed) != 1:
        raise SourceError(f"{dsc.name} lists {len(listed)} .orig tarballs; the tier expects one")
    orig = dsc.parent / listed[0].name
    return orig if matches(orig, listed[0]) else None


def _wanted(relative: PurePosixPath) -> bool:
    text = relative.as_posix()
    return text.startswith(_WANTED_PREFIXES) or relative.name == "CMakeLists.txt"


def unpack_release(fetched: FetchedRelease, destination: Path) -> Path:
    """Unpack what the tier needs of the .orig tarball into destination/<version>; returns the tree."""
    tree = destination / fetched.release.version
    tree.mkdir(parents=True)
    with tarfile.open(fetched.orig, mode="r|*") as archive:
        for member in archive:
            parts = PurePosixPath(member.name).parts
            if len(parts) < 2 or not member.isfile():
                continue
            relative = PurePosixPath(*parts[1:])  # below the tarball's top folder (pytorch-1.13.1/, pytorch-v2.6.0/)
            if not _wanted(relative):
                continue
            member.name = relative.as_posix()
            archive.extract(member, tree, filter="data")
    # version.txt holds the branch's next version (1.13.0a0 in 1.13.1): its major.minor must match.
    version_file = tree / "version.txt"
    major_minor = ".".join(fetched.release.version.split(".")[:2]) + "."
    if not version_file.is_file() or not version_file.read_text().strip().startswith(major_minor):
        raise SourceError(f"{fetched.orig.name}: version.txt does not name PyTorch {major_minor}x")
    return tree


def unpack_wheel(wheel: Path, destination: Path) -> Path:
    """A pure-Python wheel unpacked as an import folder (what pip would put in site-packages)."""
    destination.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            target = (destination / info.filename).resolve()
            if not target.is_relative_to(destination.resolve()):
                raise SourceError(f"{wheel.name}: {info.filename} points outside the folder")
        archive.extractall(destination)
    return destination


def fetch_wheel(spec: str, folder: Path) -> Path:
    """The wheel for a `name==version` pin, downloaded once by pip (which checks PyPI's hashes) into folder."""
    name, version = spec.split("==")
    folder.mkdir(parents=True, exist_ok=True)
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    with FileLock(str(folder / ".lock")):
        found = sorted(folder.glob(pattern))
        if not found:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--only-binary=:all:",
                    "-d",
                    str(folder),
                    spec,
                ],
                check=True,
                capture_output=True,
            )
            found = sorted(folder.glob(pattern))
    if not found:
        raise SourceError(f"pip download {spec} brought no {pattern}")
    return found[0]


def walk_files(tree: Path, suffixes: tuple[str, ...]) -> Iterator[Path]:
    for path in sorted(tree.rglob("*")):
        if path.is_file() and (path.name.endswith(suffixes) or path.name == "CMakeLists.txt"):
            yield path
