"""The archive catalog (build_config/deps.toml: MKL, MAGMA, CPython from NuGet) and the choice of archives.

The catalog is data: file names, versions, the MAGMA versions per CUDA prefix, the NuGet package of
CPython per minor version, the layout an extracted archive must have and the variables a build sets
from it. This module validates it on load, with errors that name the file and key, and answers
"which archives does this build need" and "which package brings Python X.Y".
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TypeVar

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.config_files import config_dir, load_toml, optional, require, string_list
from pytorch_winbuild.knowledge.model import CudaRelease

CATALOG_FILE = "deps.toml"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_PYTHON_RELEASE = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)")
_PYTHON_MINOR = re.compile(r"[0-9]+\.[0-9]+")
# A folder of this machine (Path) or of another machine's plan (PureWindowsPath).
AnyPath = TypeVar("AnyPath", bound=PurePath)
# Where the interpreter is in an extracted NuGet package of CPython (its nuspec packs everything under
# tools/; cibuildwheel runs <package>/tools/python.exe).
PYTHON_EXE = ("tools", "python.exe")
# The archive formats the cache extracts; the folder name is the file name without them.
ARCHIVE_SUFFIXES = (".7z", ".nupkg")


@dataclass(frozen=True)
class Archive:
    """One downloadable archive and what its extracted folder must contain."""

    name: str  # "mkl", "magma" or "python"
    label: str  # "MKL" / "MAGMA" / "Python", for messages
    version: str
    file_name: str  # "mkl_2020.2.254.7z", "python.3.6.8.nupkg"; also its name on a mirror and in --from-dir
    base_url: str  # the public bucket (NuGet's folder of that version for Python), ending in "/"
    sha256: str | None = None  # published checksum; None → the lock file records it
    size: int | None = None  # published size in bytes
    layout: tuple[str, ...] = ()  # paths that must exist after extraction
    set_vars: tuple[tuple[str, str], ...] = ()  # (variable, sub-path) set to <folder>/<sub-path>
    prepend_vars: tuple[tuple[str, str], ...] = ()  # (variable, sub-path) prepended with ';'
    cuda_prefix: str | None = None  # MAGMA only: "cuda90"
    variant: str | None = None  # MAGMA only: "release" or "debug"

    @property
    def url(self) -> str:
        return self.base_url + self.file_name

    @property
    def folder_name(self) -> str:
        """Name of the extracted folder in the cache: the file name without ".7z" or ".nupkg"."""
        for suffix in ARCHIVE_SUFFIXES:
            if self.file_name.endswith(suffix):
                return self.file_name[: -len(suffix)]
        return self.file_name

    @property
    def description(self) -> str:
        """'MKL 2020.2.254' or 'MAGMA 2.5.4 cuda101 release'."""
        parts = [self.label, self.version]
        if self.cuda_prefix:
            parts.append(self.cuda_prefix)
        if self.variant:
            parts.append(self.variant)
        return " ".join(parts)


@dataclass(frozen=True)
class ExtractSettings:
    """Which native 7-Zip programs to look for and whether they are the fast path."""

    native_programs: tuple[str, ...]
    windows_locations: tuple[str, ...]
    prefer: str  # "native" or "py7zr"


@dataclass(frozen=True)
class DownloadLimits:
    """What a misbehaving server may cost (deps.toml [download]); download.DownloadSettings takes these fields."""

    max_size: int = 4 * 1024**3  # bytes written at most for an archive whose size nothing records
    speed_limit: int = 1024  # bytes/s ...
    speed_time: float = 30.0  # ... over this many seconds, or the transfer is stopped
    deadline: float = 7200.0  # seconds for one archive, retries included


@dataclass(frozen=True)
class Catalog:
    source: Path
    base_url: str
    mkl: dict[str, Archive]  # version → archive
    mkl_default: str
    magma: dict[tuple[str, str, str], Archive]  # (version, cuda prefix, variant) → archive
    magma_versions: tuple[str, ...]  # every MAGMA version the catalog knows
    magma_preference: tuple[str, ...]
    python: dict[str, Archive]  # minor version ("3.6") → NuGet's package of its newest release
    extract: ExtractSettings
    download: DownloadLimits = DownloadLimits()


def _variables(table: Mapping[str, object], key: str, where: str) -> tuple[tuple[str, str], ...]:
    variables = []
    for name, sub_path in optional(table, key, dict, where, {}).items():
        if not isinstance(sub_path, str):
            raise ConfigurationError(f"{where}.{key}.{name}: expected a sub-path string, got {sub_path!r}.")
        variables.append((name, sub_path))
    return tuple(variables)


def _known(table: Mapping[str, object], file_name: str, where: str) -> tuple[str | None, int | None]:
    entry = table.get(file_name)
    if entry is None:
        return None, None
    entry_where = f"{where}.known.{file_name}"
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{entry_where}: expected a table with sha256 and size.")
    sha256 = optional(entry, "sha256", str, entry_where, None)
    if sha256 is not None and not _SHA256.fullmatch(sha256):
        raise ConfigurationError(f"{entry_where}.sha256: expected 64 lowercase hex digits, got {sha256!r}.")
    size = optional(entry, "size", int, entry_where, None)
    if size is not None and size <= 0:
        raise ConfigurationError(f"{entry_where}.size: expected a positive number of bytes, got {size}.")
    return sha256, size


# The placeholders each kind's `file` may use (the values parse_catalog fills in).
FILE_PLACEHOLDERS = {"mkl": {"version"}, "magma": {"version", "cuda_prefix", "variant"}, "python": {"version"}}


def _file_pattern(table: Mapping[str, object], kind: str, where: str, key: str = "file") -> str:
    """`key` (`file`, or Python's `base_url`) with only the placeholders parse_catalog fills; a typo is an
    error naming the key, not a crash."""
    pattern = require(table, key, str, where)
    try:
        fields = [
            (name, spec, conversion)
            for _, name, spec, conversion in string.Formatter().parse(pattern)
            if name is not None
        ]
        if any(spec or conversion for _, spec, conversion in fields):
            raise ValueError("placeholders take no format spec or conversion (':' or '!')")
        names = {name for name, _, _ in fields}
    except ValueError as error:
        raise ConfigurationError(
            f"{where}.{key}: {pattern!r} is not a valid file name pattern ({error}).",
            fix="write placeholders as {name}, and a literal brace as {{ or }}.",
        ) from None
    unknown = sorted(names - FILE_PLACEHOLDERS[kind])
    if unknown:
        allowed = ", ".join("{" + name + "}" for name in sorted(FILE_PLACEHOLDERS[kind]))
        raise ConfigurationError(
            f"{where}.{key}: {pattern!r} uses {', '.join('{' + n + '}' for n in unknown)}, which deps.toml "
            "does not fill.",
            fix=f"use only {allowed}.",
        )
    return pattern


@dataclass(frozen=True)
class _Kind:
    """What every archive of a kind ([mkl], [magma], [python]) shares, and its table for the rest."""

    label: str
    file: str
    layout: tuple[str, ...]
    set_vars: tuple[tuple[str, str], ...]
    prepend_vars: tuple[tuple[str, str], ...]
    table: dict[str, object]
    where: str


def _kind(data: Mapping[str, object], kind: str, where: str) -> _Kind:
    table = require(data, kind, dict, where)
    kind_where = f"{where}.{kind}"
    return _Kind(
        label=require(table, "label", str, kind_where),
        file=_file_pattern(table, kind, kind_where),
        layout=tuple(string_list(table, "layout", kind_where)),
        set_vars=_variables(table, "set", kind_where),
        prepend_vars=_variables(table, "prepend", kind_where),
        table=table,
        where=kind_where,
    )


def _download_limits(data: Mapping[str, object], where: str) -> DownloadLimits:
    table = optional(data, "download", dict, where, {})
    table_where = f"{where}.download"
    defaults = DownloadLimits()
    unknown = sorted(set(table) - {"max_size", "speed_limit", "speed_time", "deadline"})
    if unknown:
        raise ConfigurationError(
            f"{table_where}: unknown keys {unknown}; expected max_size, speed_limit, speed_time, deadline."
        )
    return DownloadLimits(
        max_size=_positive_int(table, "max_size", defaults.max_size, table_where),
        speed_limit=_positive_int(table, "speed_limit", defaults.speed_limit, table_where),
        speed_time=_positive_seconds(table, "speed_time", defaults.speed_time, table_where),
        deadline=_positive_seconds(table, "deadline", defaults.deadline, table_where),
    )


def _positive_int(table: Mapping[str, object], key: str, default: int, where: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigurationError(f"{where}.{key}: expected a positive number, got {value!r}.")
    return value


def _positive_seconds(table: Mapping[str, object], key: str, default: float, where: str) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigurationError(f"{where}.{key}: expected a positive number, got {value!r}.")
    try:
        return float(value)
    except OverflowError:
        raise ConfigurationError(
            f"{where}.{key}: {str(value)[:20]}… is too large.", fix="write a number of seconds, e.g. 30."
        ) from None


def _release(text: str, where: str) -> tuple[int, int, int]:
    """'3.6.8' → (3, 6, 8): NuGet's versions of CPython are plain releases."""
    match = _PYTHON_RELEASE.fullmatch(text)
    if match is None:
        raise ConfigurationError(f"{where}: expected a release like '3.6.8', got {text!r}.")
    major, minor, micro = (int(part) for part in match.groups())
    return major, minor, micro


def _python_archives(data: Mapping[str, object], known: Mapping[str, object], where: str) -> dict[str, Archive]:
    """[python]: one NuGet package per minor version, with the layout its release must have."""
    spec = _kind(data, "python", where)
    table, kind_where = spec.table, spec.where
    base_url = _file_pattern(table, "python", kind_where, key="base_url")
    if not base_url.startswith("https://"):
        raise ConfigurationError(f"{kind_where}.base_url: expected an https:// URL, got {base_url!r}.")
    since_where = f"{kind_where}.layout_since"
    layouts = optional(table, "layout_since", dict, kind_where, {})
    layout_since = [
        (_release(version, since_where), tuple(string_list(layouts, version, since_where))) for version in layouts
    ]
    archives: dict[str, Archive] = {}
    for version in string_list(table, "versions", kind_where):
        release = _release(version, f"{kind_where}.versions")
        minor = f"{release[0]}.{release[1]}"
        if minor in archives:
            raise ConfigurationError(
                f"{kind_where}.versions: {archives[minor].version} and {version} are both Python {minor}.",
                fix="keep one release per minor version (the newest NuGet has).",
            )
        file_name = spec.file.format(version=version)
        sha256, size = _known(known, file_name, where)
        extra = tuple(path for since, paths in layout_since if release >= since for path in paths)
        archives[minor] = Archive(
            name="python",
            label=spec.label,
            version=version,
            file_name=file_name,
            base_url=base_url.format(version=version).rstrip("/") + "/",
            sha256=sha256,
            size=size,
            layout=spec.layout + extra,
            set_vars=spec.set_vars,
            prepend_vars=spec.prepend_vars,
        )
    return archives


def _mkl_archives(
    data: Mapping[str, object], known: Mapping[str, object], base_url: str, where: str
) -> tuple[dict[str, Archive], str]:
    """[mkl]: one archive per version in the public bucket, and the version a build gets by default."""
    spec = _kind(data, "mkl", where)
    archives: dict[str, Archive] = {}
    for version in string_list(spec.table, "versions", spec.where):
        file_name = spec.file.format(version=version)
        sha256, size = _known(known, file_name, where)
        archives[version] = Archive(
            name="mkl",
            label=spec.label,
            version=version,
            file_name=file_name,
            base_url=base_url,
            sha256=sha256,
            size=size,
            layout=spec.layout,
            set_vars=spec.set_vars,
            prepend_vars=spec.prepend_vars,
        )
    default = require(spec.table, "default_version", str, spec.where)
    if default not in archives:
        raise ConfigurationError(
            f"{spec.where}.default_version: '{default}' is not one of versions {sorted(archives)}."
        )
    return archives, default


def parse_catalog(data: Mapping[str, object], source: Path) -> Catalog:
    """Validate a parsed deps.toml; every problem names the file and key."""
    where = str(source)
    base_url = require(data, "base_url", str, where)
    if not base_url.startswith("https://"):
        raise ConfigurationError(f"{where}.base_url: expected an https:// URL, got {base_url!r}.")
    base_url = base_url.rstrip("/") + "/"
    known = optional(data, "known", dict, where, {})
    mkl, mkl_default = _mkl_archives(data, known, base_url, where)

    magma_spec = _kind(data, "magma", where)
    magma: dict[tuple[str, str, str], Archive] = {}
    versions = require(magma_spec.table, "versions", dict, magma_spec.where)
    for version, entry in versions.items():
        entry_where = f"{magma_spec.where}.versions.{version}"
        if not isinstance(entry, dict):
            raise ConfigurationError(f"{entry_where}: expected a table with cuda_prefixes and variants.")
        variants = string_list(entry, "variants", entry_where)
        for variant in variants:
            if variant not in ("release", "debug"):
                raise ConfigurationError(f"{entry_where}.variants: expected 'release' or 'debug', got {variant!r}.")
        for prefix in string_list(entry, "cuda_prefixes", entry_where):
            if not re.fullmatch(r"cuda\d+", prefix):
                raise ConfigurationError(f"{entry_where}.cuda_prefixes: expected names like 'cuda90', got {prefix!r}.")
            for variant in variants:
                file_name = magma_spec.file.format(version=version, cuda_prefix=prefix, variant=variant)
                sha256, size = _known(known, file_name, where)
                magma[(version, prefix, variant)] = Archive(
                    name="magma",
                    label=magma_spec.label,
                    version=version,
                    file_name=file_name,
                    base_url=base_url,
                    sha256=sha256,
                    size=size,
                    layout=magma_spec.layout,
                    set_vars=magma_spec.set_vars,
                    prepend_vars=magma_spec.prepend_vars,
                    cuda_prefix=prefix,
                    variant=variant,
                )
    preference = tuple(string_list(magma_spec.table, "preference", magma_spec.where))
    unknown = [v for v in preference if v not in versions]
    if unknown:
        raise ConfigurationError(f"{magma_spec.where}.preference: versions {unknown} are not under magma.versions.")

    extract_table = require(data, "extract", dict, where)
    extract_where = f"{where}.extract"
    prefer = require(extract_table, "prefer", str, extract_where)
    if prefer not in ("native", "py7zr"):
        raise ConfigurationError(f"{extract_where}.prefer: expected 'native' or 'py7zr', got {prefer!r}.")
    extract = ExtractSettings(
        native_programs=tuple(string_list(extract_table, "native_programs", extract_where)),
        windows_locations=tuple(string_list(extract_table, "windows_locations", extract_where)),
        prefer=prefer,
    )
    return Catalog(
        source=source,
        base_url=base_url,
        mkl=mkl,
        mkl_default=mkl_default,
        magma=magma,
        magma_versions=tuple(versions),
        magma_preference=preference,
        python=_python_archives(data, known, where),
        extract=extract,
        download=_download_limits(data, where),
    )


def load_catalog(path: Path | None = None) -> Catalog:
    """The catalog in `path`, or build_config/deps.toml (parsed once per process)."""
    if path is None:
        return _default_catalog()
    return parse_catalog(load_toml(path), Path(path))


@functools.lru_cache(maxsize=1)
def _default_catalog() -> Catalog:
    path = config_dir() / CATALOG_FILE
    return parse_catalog(load_toml(path), path)


def magma_preference(text: str | None) -> list[str]:
    """--magma-version '2.5.4,2.5.2' → ['2.5.4', '2.5.2']: the first one built for the CUDA wins."""
    return [version.strip() for version in (text or "").split(",") if version.strip()]


def _magma_for(catalog: Catalog, cuda: CudaRelease, magma_versions: list[str], debug: bool) -> Archive:
    prefix = cuda.magma_prefix
    variant = "debug" if debug else "release"
    preference = magma_versions or list(catalog.magma_preference)
    unknown = [v for v in preference if v not in catalog.magma_versions]
    if unknown:
        raise ConfigurationError(
            f"unknown MAGMA version {', '.join(unknown)}; {catalog.source} lists {', '.join(catalog.magma_versions)}.",
            fix="pass one of those with --magma-version, or leave it out to take the newest one for your CUDA.",
        )
    for version in preference:
        archive = catalog.magma.get((version, prefix, variant))
        if archive is not None:
            return archive
    for_prefix = sorted({f"{v} {var}" for (v, p, var) in catalog.magma if p == prefix})
    available = (
        f"for CUDA {cuda} ({prefix}) there is: {', '.join(for_prefix)}"
        if for_prefix
        else f"there is no MAGMA build at all for CUDA {cuda} ({prefix})"
    )
    raise ConfigurationError(
        f"no MAGMA {variant} archive for CUDA {cuda} among versions {', '.join(preference)}; {available}.",
        fix=(
            "pick an available version with --magma-version (and drop --magma-debug if only release exists), "
            "use a CUDA version MAGMA was built for, or build without MAGMA with --no-magma."
        ),
    )


def select_archives(
    *,
    cuda: CudaRelease | None,
    mkl_version: str,
    magma_versions: list[str],
    magma_debug: bool = False,
    no_magma: bool = False,
    catalog: Catalog | None = None,
) -> list[Archive]:
    """The archives a build needs: MKL always, MAGMA for CUDA builds unless `no_magma`.

    `cuda` is the build's CUDA release (build_config/cuda.toml), or None for a CPU build; `magma_versions` is a
    preference list (the first one built for that CUDA's prefix wins; empty means the catalog's preference).
    """
    catalog = catalog or load_catalog()
    mkl = catalog.mkl.get(mkl_version)
    if mkl is None:
        raise ConfigurationError(
            f"unknown MKL version '{mkl_version}'; {catalog.source} lists {', '.join(sorted(catalog.mkl))}.",
            fix=f"pass one of those with --mkl-version (the default is {catalog.mkl_default}).",
        )
    archives = [mkl]
    if cuda is not None and not no_magma:
        archives.append(_magma_for(catalog, cuda, magma_versions, magma_debug))
    return archives


def python_archive(minor: str, catalog: Catalog | None = None) -> Archive | None:
    """NuGet's package of CPython `minor` ("3.6") for 64-bit Windows, or None when NuGet's `python`
    package has none (2.7, 3.4, a minor not released yet). Extracted, it lives where the cache puts
    every archive (cache.deps_dir), with the interpreter at python_interpreter() of that folder."""
    return (catalog or load_catalog()).python.get(minor)


def python_interpreter(folder: AnyPath) -> AnyPath:
    """<extracted package>/tools/python.exe (a PureWindowsPath stays one, for another machine's plan)."""
    return folder.joinpath(*PYTHON_EXE)


def select_python(minor: str, catalog: Catalog | None = None) -> Archive:
    """The package for `--python X.Y`, or a ConfigurationError that names the minors there are."""
    catalog = catalog or load_catalog()
    known = ", ".join(catalog.python)
    if not _PYTHON_MINOR.fullmatch(minor):
        raise ConfigurationError(
            f"--python {minor!r} is not a Python version of the form X.Y.",
            fix=f"pass the major and minor version of the Python to fetch, e.g. --python 3.6 (NuGet has {known}).",
        )
    archive = python_archive(minor, catalog)
    if archive is None:
        raise ConfigurationError(
            f"--python {minor}: {catalog.source} [python] lists no NuGet package of CPython {minor} for 64-bit "
            f"Windows; it lists {known}.",
            fix=f"pass one of those, or install Python {minor} yourself from python.org.",
        )
    return archive


@dataclass(frozen=True)
class BuildVariable:
    """One environment change a build makes for an extracted archive."""

    name: str
    value: str
    prepend: bool  # True: value goes before the current one, joined with ';'


def archive_variables(archive: Archive, folder: Path) -> list[BuildVariable]:
    """CMAKE_INCLUDE_PATH=<mkl>/include, LIB=<mkl>/lib (prepended), MAGMA_HOME=<magma> — as the catalog says."""

    def under(sub_path: str) -> str:
        return str(folder / sub_path) if sub_path else str(folder)

    return [BuildVariable(name, under(sub), False) for name, sub in archive.set_vars] + [
        BuildVariable(name, under(sub), True) for name, sub in archive.prepend_vars
    ]
