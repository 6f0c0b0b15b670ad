"""The kept wheels as a pip index: PEP 503 HTML and PEP 691 JSON, static files only.

Pages are `<project>/index.html` with relative links, so pip reads the tree from file:// or any static server, moved
anywhere. Every file is written whole, pages before the root that links them and stale pages removed last, so a
reader never sees half a file or a dangling link. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import html
import json
import posixpath
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import HeaderParser
from pathlib import Path
from urllib.parse import quote

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from pytorch_winbuild import atomic_file
from pytorch_winbuild.json_file import JsonObject, JsonValue, read_json
from pytorch_winbuild.nightly.retention import date_folders

INDEX_FOLDER = "simple"
ENTRY_INDEXES = "entries"  # <output_dir>/entries/<entry>/simple/
HASH_CACHE = ".wheel-hashes.json"
PAGE_FILES = ("index.html", "index.json")  # the only files the writer ever replaces or removes
REPOSITORY_VERSION = "1.1"  # PEP 629 (HTML) and PEP 700 (JSON: size, upload-time, versions)
SHA256 = re.compile(r"[0-9a-f]{64}")
ENTRY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # the matrix's entry names
METADATA_LIMIT = 1 << 20  # bytes of a wheel's METADATA read for Requires-Python
CHUNK = 1 << 20


@dataclass(frozen=True)
class IndexedWheel:
    """One kept wheel, as the index lists it."""

    link: str  # posix path relative to the output folder: <date>/<entry>/<file>
    filename: str
    project: str  # PEP 503-normalised
    version: Version
    entry: str
    day: str
    sha256: str
    size: int
    mtime: float
    requires_python: str | None

    def upload_time(self) -> str:
        return datetime.fromtimestamp(self.mtime, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class IndexResult:
    """What was indexed: for the console and the dashboard."""

    root: Path  # <output_dir>/simple
    wheels: list[IndexedWheel] = field(default_factory=list)
    projects: dict[str, list[IndexedWheel]] = field(default_factory=dict)  # the combined index's, per project
    entries: dict[str, Path] = field(default_factory=dict)  # entry → its own index folder
    problems: list[str] = field(default_factory=list)  # files left out, and why

    def describe(self) -> str:
        projects = ", ".join(f"{name} ({len(files)})" for name, files in sorted(self.projects.items())) or "no wheels"
        return f"{len(self.wheels)} wheel(s): {projects}"


# --------------------------------------------------------------------------------------------
# Reading the wheels
# --------------------------------------------------------------------------------------------


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _requires_python(path: Path) -> str | None:
    """The wheel's Requires-Python, when it has a readable, valid one."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [
                name
                for name in archive.namelist()
                if name.count("/") == 1 and name.endswith(".dist-info/METADATA") and not name.startswith("/")
            ]
            if not names:
                return None
            with archive.open(names[0]) as handle:
                text = handle.read(METADATA_LIMIT).decode("utf-8", errors="replace")
    except (OSError, zipfile.BadZipFile, KeyError, ValueError, RuntimeError):
        return None
    value = HeaderParser().parsestr(text).get("Requires-Python")
    if not value:
        return None
    value = " ".join(str(value).split())
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return None
    return value


def _load_hash_cache(path: Path) -> dict[str, JsonObject]:
    data: JsonValue
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return {}
    wheels = data.get("wheels") if isinstance(data, dict) else None
    return {key: value for key, value in wheels.items() if isinstance(value, dict)} if isinstance(wheels, dict) else {}


def collect_wheels(output_dir: Path) -> tuple[list[IndexedWheel], list[str]]:
    """Every wheel in the date folders (`<date>/<entry>/*.whl`), hashed; and the files left out, with why."""
    cache_path = output_dir / HASH_CACHE
    cache = _load_hash_cache(cache_path)
    fresh: dict[str, JsonObject] = {}
    wheels: list[IndexedWheel] = []
    problems: list[str] = []
    for day, folder in date_folders(output_dir):
        for path in sorted(folder.glob("*/*.whl")):
            link = path.relative_to(output_dir).as_posix()
            if not path.is_file():
                continue
            try:
                name, version, _build, _tags = parse_wheel_filename(path.name)
            except InvalidWheelFilename as error:
                problems.append(f"{link}: not a valid wheel file name ({error})")
                continue
            try:
                stat = path.stat()
                known = cache.get(link)
                if (
                    known
                    and known.get("size") == stat.st_size
                    and known.get("mtime_ns") == stat.st_mtime_ns
                    and SHA256.fullmatch(str(known.get("sha256")))
                ):
                    digest, requires = str(known["sha256"]), known.get("requires_python")
                else:
                    digest, requires = file_sha256(path), _requires_python(path)
            except OSError as error:
                problems.append(f"{link}: unreadable ({error.strerror or error})")
                continue
            fresh[link] = {
                "size": stat.st_size,
                "mtime_ns": stat.st_mtime_ns,
                "sha256": digest,
                "requires_python": requires,
            }
            wheels.append(
                IndexedWheel(
                    link=link,
                    filename=path.name,
                    project=canonicalize_name(name),
                    version=version,
                    entry=path.parent.name,
                    day=day.isoformat(),
                    sha256=digest,
                    size=stat.st_size,
                    mtime=stat.st_mtime,
                    requires_python=requires if isinstance(requires, str) else None,
                )
            )
    if fresh != cache:
        _write_file(cache_path, (json.dumps({"format": 1, "wheels": fresh}, indent=1) + "\n").encode())
    return wheels, problems


def _newest_per_file(wheels: Iterable[IndexedWheel]) -> list[IndexedWheel]:
    """One wheel per file name (pip cannot choose between two of the same name): the newest night's."""
    chosen: dict[str, IndexedWheel] = {}
    for wheel in wheels:
        known = chosen.get(wheel.filename)
        if known is None or (wheel.day, wheel.mtime, wheel.link) > (known.day, known.mtime, known.link):
            chosen[wheel.filename] = wheel
    return sorted(chosen.values(), key=lambda wheel: (wheel.version, wheel.filename))


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------


def _href(target: str, page_folder: str) -> str:
    """`target` (relative to the output folder) as a URL relative to `page_folder`, each segment quoted."""
    relative = posixpath.relpath(target, page_folder)
    return "/".join(quote(part, safe="") for part in relative.split("/"))


def _html_page(title: str, links: list[tuple[str, str, str | None]]) -> bytes:
    """A PEP 503 page: each link is (href, text, data-requires-python)."""
    escaped = html.escape(title)
    lines = [
        "<!DOCTYPE html>",
        "<html>",
        "  <head>",
        '    <meta charset="utf-8">',
        f'    <meta name="pypi:repository-version" content="{REPOSITORY_VERSION}">',
        '    <link rel="icon" href="data:,">',  # a browser asks for none (no 404 for /favicon.ico)
        f"    <title>{escaped}</title>",
        "  </head>",
        "  <body>",
        f"    <h1>{escaped}</h1>",
    ]
    for href, text, requires in links:
        attribute = f' data-requires-python="{html.escape(requires)}"' if requires else ""
        lines.append(f'    <a href="{html.escape(href)}"{attribute}>{html.escape(text)}</a><br>')
    lines += ["  </body>", "</html>", ""]
    return "\n".join(lines).encode("utf-8")


def _json(data: JsonObject) -> bytes:
    return (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def render_index(wheels: list[IndexedWheel], folder: str) -> dict[str, bytes]:
    """The files of one index whose root is `folder` (relative to the output folder), by path relative to it."""
    projects: dict[str, list[IndexedWheel]] = {}
    for wheel in wheels:
        projects.setdefault(wheel.project, []).append(wheel)
    files: dict[str, bytes] = {}
    meta: JsonObject = {"api-version": REPOSITORY_VERSION}
    for project, found in sorted(projects.items()):
        page_folder = f"{folder}/{project}"
        chosen = _newest_per_file(found)
        links = [
            (f"{_href(wheel.link, page_folder)}#sha256={wheel.sha256}", wheel.filename, wheel.requires_python)
            for wheel in chosen
        ]
        files[f"{project}/index.html"] = _html_page(f"Links for {project}", links)
        entries: list[JsonValue] = []
        for wheel in chosen:
            item: JsonObject = {
                "filename": wheel.filename,
                "url": _href(wheel.link, page_folder),
                "hashes": {"sha256": wheel.sha256},
                "size": wheel.size,
                "upload-time": wheel.upload_time(),
            }
            if wheel.requires_python:
                item["requires-python"] = wheel.requires_python
            entries.append(item)
        versions = sorted({wheel.version for wheel in chosen})
        files[f"{project}/index.json"] = _json(
            {"meta": meta, "name": project, "files": entries, "versions": [str(version) for version in versions]}
        )
    files["index.html"] = _html_page("Simple index", [(f"{quote(name)}/", name, None) for name in sorted(projects)])
    files["index.json"] = _json({"meta": meta, "projects": [{"name": name} for name in sorted(projects)]})
    return files


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _write_file(path: Path, data: bytes) -> bool:
    """Replace `path` with `data` (atomic_file); False when it already held exactly that."""
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    # SHARED: the umask's permissions (a private file's are 0600), so a web server running as another user reads it.
    atomic_file.write_bytes(path, data, mode=atomic_file.SHARED)
    return True


def write_text_file(path: Path, text: str) -> bool:
    """`path` replaced atomically with `text` (UTF-8); False when unchanged."""
    return _write_file(path, text.encode("utf-8"))


def _is_ours(path: Path) -> bool:
    """A page this writer made, or a temporary file it left behind when stopped."""
    name = path.name
    return name in PAGE_FILES or (name.endswith(".tmp") and any(name.startswith(f".{page}.") for page in PAGE_FILES))


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    """Make `root` hold `files` (relative posix paths): deepest first, then remove our stale pages and empty folders.

    Files other than index.html/index.json are never touched, so a user's notes in the folder stay.
    """
    for relative in sorted(files, key=lambda name: (-name.count("/"), name)):
        _write_file(root / relative, files[relative])
    wanted = {root / relative for relative in files}
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_file() and not path.is_symlink() and _is_ours(path) and path not in wanted:
            path.unlink()
        elif path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()


def write_index(output_dir: Path) -> IndexResult:
    """Regenerate `<output_dir>/simple/` and `<output_dir>/entries/<entry>/simple/` from the wheels on disk."""
    wheels, problems = collect_wheels(output_dir)
    result = IndexResult(root=output_dir / INDEX_FOLDER, wheels=wheels, problems=problems)
    by_entry: dict[str, list[IndexedWheel]] = {}
    for wheel in wheels:
        result.projects.setdefault(wheel.project, []).append(wheel)
        if ENTRY_NAME.fullmatch(wheel.entry):
            by_entry.setdefault(wheel.entry, []).append(wheel)
        else:
            problems.append(f"{wheel.link}: the folder name {wheel.entry!r} is not an entry name; no entry index")
    result.projects = {name: _newest_per_file(found) for name, found in result.projects.items()}
    # Each entry's index first, then the combined one: the combined index names the entries' indexes
    # only through the dashboard, which is written after both.
    entry_files: dict[str, bytes] = {}
    for entry, found in sorted(by_entry.items()):
        folder = f"{ENTRY_INDEXES}/{entry}/{INDEX_FOLDER}"
        for relative, data in render_index(found, folder).items():
            entry_files[f"{entry}/{INDEX_FOLDER}/{relative}"] = data
        result.entries[entry] = output_dir / folder
    write_tree(output_dir / ENTRY_INDEXES, entry_files)
    write_tree(result.root, render_index(wheels, INDEX_FOLDER))
    return result
