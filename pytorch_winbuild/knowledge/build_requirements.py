"""The packages each era's build needs in its venv, pinned per Python (build_config/build_requirements.toml).

Old eras build only with old Pythons, and each Python has a newest release of numpy, setuptools… that
still installs on it; an era may cap a package (numpy<2, setuptools<=72.1.0) where its setup.py needs
it. The pin is the newest listed release that installs on the Python and meets the era's cap, so a
venv is reproducible (the same pins until this file changes) and each pin says where it comes from.
Every era × Python of eras.toml is resolved on load: a gap is a ConfigurationError naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.config_files import array, load_toml, optional, require, string_list

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version


@dataclass(frozen=True)
class Requirement:
    name: str
    version: str
    source: str  # the release's wheel and Requires-Python, and the era's cap when it decided the pin

    @property
    def spec(self) -> str:
        """What pip installs: name==version."""
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class _Release:
    version: Version
    python: tuple[tuple[int, int], tuple[int, int]]  # [min, end) minors it installs on (Windows x64)
    source: str


@dataclass(frozen=True)
class _Need:
    name: str
    spec: SpecifierSet  # empty: any release
    python: tuple[tuple[int, int], tuple[int, int]] | None  # only on these Pythons; None: all of the era's
    reason: str


@dataclass(frozen=True)
class BuildRequirements:
    """The pins of every era × Python of eras.toml, resolved when the file is loaded."""

    pins: dict[tuple[str, str], tuple[Requirement, ...]]  # (era, "3.7") → requirements in install order
    python_ranges: dict[str, tuple[str, str]]  # era → its [min, end) Python range (eras.toml)
    releases: dict[str, tuple[_Release, ...]] = field(default_factory=dict)  # [package.NAME] as listed
    # installable()'s answers: the releases are fixed once loaded, and a plan's fixes ask the same (name, Python)
    # hundreds of thousands of times (sorting and printing every Version each time was a third of the fix matrix)
    _installable: dict[tuple[str, str], tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def installable(self, name: str, python_minor: str) -> list[str]:
        """The listed releases of `name` that install on Python "3.X", oldest first (what --cmake X.Y may name)."""
        known = self._installable.get((name, python_minor))
        if known is None:
            python = _minor(python_minor, f"build requirements: Python {python_minor!r}")
            found = [r for r in self.releases.get(name, ()) if r.python[0] <= python < r.python[1]]
            known = self._installable[name, python_minor] = tuple(
                str(r.version) for r in sorted(found, key=lambda r: r.version)
            )
        return list(known)

    def newest(self, name: str, python_minor: str, fits: Callable[[str], bool]) -> Requirement | None:
        """The newest listed release of `name` that installs on Python "3.X" and `fits` (a plan's bounds), with
        its source; None when there is none."""
        allowed = [version for version in self.installable(name, python_minor) if fits(version)]
        if not allowed:
            return None
        release = next(r for r in self.releases[name] if str(r.version) == allowed[-1])
        return Requirement(name, allowed[-1], release.source)

    def requirements_for(self, era_name: str, python_minor: str) -> tuple[Requirement, ...]:
        """The era's pins for a Python "3.X"; an era or a Python outside its range is exit 2 (the planner
        checks the range first; this is the last guard before a venv is made)."""
        if era_name not in self.python_ranges:
            known = ", ".join(self.python_ranges)
            raise ConfigurationError(f"build requirements: no era '{era_name}' (known: {known}).")
        pins = self.pins.get((era_name, python_minor))
        if pins is None:
            low, end = self.python_ranges[era_name]
            raise ConfigurationError(
                f"build requirements: era {era_name} builds with Python {low} up to, not including, {end}; "
                f"{python_minor!r} is not one of them.",
                fix=f"use a Python from {low} to before {end} for this era (eras.toml: python).",
            )
        return pins


def _minor(text: str, where: str) -> tuple[int, int]:
    """'3.7' → (3, 7): a Python minor as eras.toml and this file write it."""
    parts = text.split(".")
    if len(parts) != 2 or not all(part.isascii() and part.isdigit() for part in parts):
        raise ConfigurationError(f'{where}: expected a Python minor such as "3.7", got {text!r}.')
    return int(parts[0]), int(parts[1])


def _minor_range(value: Sequence[object], where: str) -> tuple[tuple[int, int], tuple[int, int]]:
    match value:
        case [str() as first, str() as last]:
            low, end = _minor(first, where), _minor(last, where)
        case _:
            raise ConfigurationError(f"{where}: expected [min, end) as two Python minors, got {value!r}.")
    if low[0] != end[0] or low >= end:
        raise ConfigurationError(f"{where}: [{first}, {last}) holds no Python 3 minor.")
    return low, end


def _minors(low: tuple[int, int], end: tuple[int, int]) -> list[str]:
    return [f"{low[0]}.{minor}" for minor in range(low[1], end[1])]


def _normalized(name: str) -> str:
    """PEP 503's normalised project name (runs of -_. become one -, lower case). Written out rather than
    packaging.utils.canonicalize_name, whose import (packaging.tags) costs every plan about 10 ms."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _name(table: Mapping[str, object], where: str) -> str:
    name = require(table, "name", str, where)
    if _normalized(name) != name:
        raise ConfigurationError(f"{where}.name: write {name!r} as pip normalises it: {_normalized(name)!r}.")
    return name


def _releases(packages: Mapping[str, object], where: str) -> dict[str, tuple[_Release, ...]]:
    from packaging.version import InvalidVersion, Version

    releases = {}
    for name in packages:
        here = f"{where}.{name}"
        entries = array(require(packages, name, dict, where), "releases", here)
        found = []
        for index, entry in enumerate(entries):
            at = f"{here}.releases[{index}]"
            if not isinstance(entry, dict):
                raise ConfigurationError(f"{at}: expected a table, got {entry!r}.")
            text = require(entry, "version", str, at)
            try:
                version = Version(text)
            except InvalidVersion:
                raise ConfigurationError(f"{at}.version: {text!r} is not a PEP 440 version.") from None
            if str(version) != text:
                raise ConfigurationError(f"{at}.version: write {text!r} as pip prints it: {str(version)!r}.")
            source = require(entry, "source", str, at)
            if not source.strip():
                raise ConfigurationError(f"{at}.source: every release names where it comes from.")
            found.append(_Release(version, _minor_range(array(entry, "python", at), f"{at}.python"), source))
        releases[name] = tuple(found)
    return releases


def _needs(entry: Mapping[str, object], where: str) -> tuple[_Need, ...]:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    needs = []
    for index, item in enumerate(array(entry, "packages", where)):
        at = f"{where}.packages[{index}]"
        if not isinstance(item, dict):
            raise ConfigurationError(f'{at}: expected a table such as {{ name = "numpy" }}, got {item!r}.')
        text = optional(item, "spec", str, at, "")
        try:
            spec = SpecifierSet(text)
        except InvalidSpecifier:
            raise ConfigurationError(f'{at}.spec: {text!r} is not a PEP 440 specifier such as "<2".') from None
        python = _minor_range(array(item, "python", at), f"{at}.python") if "python" in item else None
        reason = optional(item, "reason", str, at, "")
        if (text or python) and not reason.strip():
            raise ConfigurationError(f"{at}.reason: a spec or a python range says why.")
        needs.append(_Need(_name(item, at), spec, python, reason))
    names = [need.name for need in needs]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{where}.packages: a package is listed twice ({', '.join(names)}).")
    return tuple(needs)


def _pin(need: _Need, releases: tuple[_Release, ...], python: tuple[int, int], where: str) -> Requirement:
    """The newest release that installs on `python` and meets the era's spec."""
    installs = [release for release in releases if release.python[0] <= python < release.python[1]]
    allowed = [release for release in installs if need.spec.contains(release.version, prereleases=True)]
    if not allowed:
        raise ConfigurationError(
            f"{where}: no release of {need.name} installs on Python {python[0]}.{python[1]}"
            + (f" within {need.spec}" if str(need.spec) else "")
            + "; add one to its [package] releases."
        )
    best = max(allowed, key=lambda release: release.version)
    source = best.source
    if max(installs, key=lambda release: release.version) is not best:  # the era's cap decided the pin
        source += f"; {need.name}{need.spec}: {need.reason}"
    return Requirement(need.name, str(best.version), source)


def load_build_requirements(path: Path, era_pythons: dict[str, tuple[str, str]]) -> BuildRequirements:
    """Read and resolve the file for the eras of eras.toml (era name → its python [min, end))."""
    data = load_toml(path)
    releases = _releases(require(data, "package", dict, path.name), f"{path.name}: package")
    eras = array(data, "era", path.name)
    pins: dict[tuple[str, str], tuple[Requirement, ...]] = {}
    seen = []
    for index, entry in enumerate(eras):
        where = f"{path.name}: era[{index}]"
        if not isinstance(entry, dict):
            raise ConfigurationError(f"{where}: expected a table, got {entry!r}.")
        name = require(entry, "name", str, where)
        where = f"{path.name}: era.{name}"
        if name not in era_pythons:
            raise ConfigurationError(f"{where}: not an era of eras.toml ({', '.join(era_pythons)}).")
        if name in seen:
            raise ConfigurationError(f"{where}: listed twice.")
        seen.append(name)
        if not [source for source in string_list(entry, "sources", where) if source.strip()]:
            raise ConfigurationError(f"{where}.sources: name where the era's list was read.")
        needs = _needs(entry, where)
        low, end = _minor_range(list(era_pythons[name]), f"eras.toml: era {name}.python")
        for python in _minors(low, end):
            minor = _minor(python, where)
            wanted = [need for need in needs if need.python is None or need.python[0] <= minor < need.python[1]]
            for need in wanted:
                if need.name not in releases:
                    raise ConfigurationError(f"{where}: {need.name} has no [package.{need.name}] releases.")
            pins[(name, python)] = tuple(
                _pin(need, releases[need.name], minor, f"{where} (Python {python})") for need in wanted
            )
    missing = [name for name in era_pythons if name not in seen]
    if missing:
        raise ConfigurationError(f"{path.name}: no [[era]] for {', '.join(missing)} of eras.toml.")
    return BuildRequirements(pins=pins, python_ranges=dict(era_pythons), releases=releases)
