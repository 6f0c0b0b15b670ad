"""The Python each PyTorch release builds with on Windows (build_config/python_releases.toml), per release.

An era's range is the union of its releases' (1.2-1.6 takes 3.5, but 1.6.0's setup.py asks >= 3.6.1; 2.1
never shipped cp312, 2.2 did), so a plan that knows its release checks that release's range, and an unpinned
plan builds the newest release of the era that its Python builds. The loader checks that the ranges follow
each other without gaps over every era and that each era's range is exactly the union of its releases'.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.config_files import array, as_table, load_toml, require, string_list
from pytorch_winbuild.knowledge.versions import (
    ReleaseRange,
    python_accepts,
    python_minors,
    release_tuple,
    version_tuple,
)


@dataclass(frozen=True)
class PythonRange(ReleaseRange):
    """Releases [first, end) of PyTorch and the Python [min, end) their setup.py and Windows wheels accept."""

    pytorch: tuple[str, str]
    newest: str  # the newest release of the range
    python: tuple[str, str]  # min may carry a patch ("3.6.1")
    sources: tuple[str, ...]

    def accepts(self, version: str) -> bool:
        return python_accepts(*self.python, version)

    @property
    def minors(self) -> list[str]:
        """Its Python releases "3.X", newest first."""
        return python_minors(*self.python)

    def text(self, release: str) -> str:
        """'PyTorch 1.6.0 builds with Python 3.6.1 up to, not including, 3.9 (source)'."""
        return (
            f"PyTorch {release} builds with Python {self.python[0]} up to, not including, {self.python[1]} "
            f"({'; '.join(self.sources)})"
        )


@dataclass(frozen=True)
class PythonReleases:
    ranges: tuple[PythonRange, ...]  # oldest first, without gaps

    def of(self, release: tuple[int, ...] | None) -> PythonRange:
        """The range of a release (None, "main", or one newer than every range read: the last)."""
        if release is not None:
            for found in self.ranges:
                if found.holds(release):
                    return found
        return self.ranges[-1]

    def within(self, first: str, end: str) -> list[PythonRange]:
        """The ranges of the releases [first, end) (an era's), newest first."""
        low, high = release_tuple(first), release_tuple(end)
        return [
            r
            for r in reversed(self.ranges)
            if low <= release_tuple(r.pytorch[0]) and release_tuple(r.pytorch[1]) <= high
        ]


def _pair(entry: Mapping[str, object], key: str, where: str) -> tuple[str, str]:
    value = string_list(entry, key, where)
    if len(value) != 2:
        raise ConfigurationError(f"{where}.{key}: expected [first, end).")
    for bound in value:
        version_tuple(bound)
    return value[0], value[1]


def load_python_releases(path: Path, eras: Iterable[tuple[str, tuple[str, str], tuple[str, str]]]) -> PythonReleases:
    """Read the file and check it against the eras (name, pytorch [first, end), python [min, end))."""
    ranges = []
    for index, item in enumerate(array(load_toml(path), "release", path.name)):
        where = f"{path.name}: release[{index}]"
        entry = as_table(item, where)
        sources = tuple(s for s in string_list(entry, "sources", where) if s.strip())
        if not sources:
            raise ConfigurationError(f"{where}.sources: name where the range was read.")
        found = PythonRange(
            _pair(entry, "pytorch", where), require(entry, "newest", str, where), _pair(entry, "python", where), sources
        )
        if not found.holds(release_tuple(found.newest)):
            raise ConfigurationError(f"{where}.newest: {found.newest} is not a release of {found.pytorch}.")
        ranges.append(found)
    for earlier, later in itertools.pairwise(ranges):
        if earlier.pytorch[1] != later.pytorch[0]:
            raise ConfigurationError(f"{path.name}: {earlier.pytorch} and {later.pytorch} must follow each other.")
    releases = PythonReleases(tuple(ranges))
    for name, (first, end), python in eras:
        held = releases.within(first, end)
        if not held or held[-1].pytorch[0] != first or held[0].pytorch[1] != end:
            raise ConfigurationError(
                f"{path.name}: era {name} ({first} to before {end}) is not covered by ranges that start and end "
                "with it."
            )
        union = (
            min((r.python[0] for r in held), key=version_tuple),
            max((r.python[1] for r in held), key=version_tuple),
        )
        if version_tuple(union[0])[:2] != version_tuple(python[0]) or union[1] != python[1]:
            raise ConfigurationError(
                f"{path.name}: era {name}'s releases build with Python {union[0]} up to {union[1]}, and eras.toml "
                f"says {python[0]} up to {python[1]}: make the era's range the union of its releases'."
            )
    return releases
