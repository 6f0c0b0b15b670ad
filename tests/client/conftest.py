"""Fixtures of the client tier: PyTorch's real source releases, fetched from Debian and checked.

The downloads are kept in $PYTORCH_WINBUILD_CLIENT_CACHE (default ~/.cache/pytorch-winbuild-tests):
debian-pytorch/ (the .dsc and .orig tarballs, fetched by apt-get source and checked every
session, see client_support.py) and wheels/ (the plans' setuptools pins, fetched by pip). Each
session unpacks what it runs into its own temporary folder. A release that cannot be had or does not
verify fails the tests that need it, never skips them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from client_support import (
    RELEASES,
    FetchedRelease,
    SourceError,
    cache_root,
    fetch_release,
    fetch_wheel,
    indexed_versions,
    unpack_release,
    unpack_wheel,
)


class Sources:
    """Each release's verified download and unpacked tree, and unpacked wheels, made once a session."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self._versions: list | None = None
        self._fetched: dict[str, FetchedRelease | SourceError] = {}
        self._trees: dict[str, Path] = {}
        self._wheels: dict[str, Path] = {}

    def fetched(self, version: str) -> FetchedRelease:
        if version not in self._fetched:
            release = next(entry for entry in RELEASES if entry.version == version)
            try:
                if self._versions is None:
                    self._versions = indexed_versions()
                self._fetched[version] = fetch_release(release, self._versions, cache_root() / "debian-pytorch")
            except SourceError as error:
                self._fetched[version] = error
        outcome = self._fetched[version]
        if isinstance(outcome, SourceError):
            pytest.fail(f"PyTorch {version}'s source: {outcome}", pytrace=False)
        return outcome

    def tree(self, version: str) -> Path:
        if version not in self._trees:
            self._trees[version] = unpack_release(self.fetched(version), self.scratch / "trees")
        return self._trees[version]

    def wheel(self, spec: str) -> Path:
        if spec not in self._wheels:
            wheel = fetch_wheel(spec, cache_root() / "wheels")
            self._wheels[spec] = unpack_wheel(wheel, self.scratch / "wheels" / spec)
        return self._wheels[spec]


@pytest.fixture(scope="session")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Sources:
    return Sources(tmp_path_factory.mktemp("client"))
