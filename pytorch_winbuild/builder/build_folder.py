"""The build folder: cleaning it, and keeping it consistent with the plan's generator and toolset.

A CMake build folder remembers its generator and toolset. Configuring it again with another
generator fails with "Does not match the generator used previously"; with another toolset under
Ninja it silently keeps the old compiler. So before each build the folder's last generator and
toolset are compared with the plan's, and on a difference CMakeCache.txt and CMakeFiles are
removed first (compiled objects stay). The last build's choice is read from the memory file
this runner writes, else from CMakeCache.txt itself (a folder configured by hand).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.facts.kept_build import BUILD_FOLDER
from pytorch_winbuild.json_file import read_json

MEMORY_FILE = ".pytorch-winbuild.json"
_GENERATOR_ENTRY = "CMAKE_GENERATOR:INTERNAL="


@dataclass(frozen=True)
class FolderIdentity:
    generator: str
    toolset: str | None
    toolset_known: bool = True  # False when read from CMakeCache.txt, which does not say it for Ninja

    def describe(self) -> str:
        return self.generator + (f", toolset {self.toolset}" if self.toolset else "")


def build_folder(source_dir: Path) -> Path:
    return source_dir / BUILD_FOLDER


def _make_writable_and_retry(function: Callable[[str], object], path: str, _: object) -> None:
    """Windows refuses to delete read-only files (git marks some so); clear the flag and retry."""
    os.chmod(path, stat.S_IWRITE)
    function(path)


def _remove_tree(path: Path) -> None:
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=_make_writable_and_retry)
    else:
        shutil.rmtree(path, onerror=_make_writable_and_retry)


def clean_build_folder(source_dir: Path) -> Path | None:
    """Remove `<source>/build`; the folder removed, or None when there was none."""
    folder = build_folder(Path(source_dir))
    if not folder.exists():
        return None
    _remove_tree(folder)
    return folder


def _from_memory(folder: Path) -> FolderIdentity | None:
    try:
        data = read_json(folder / MEMORY_FILE)
        return FolderIdentity(str(data["generator"]), data.get("toolset"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _from_cmake_cache(folder: Path) -> FolderIdentity | None:
    try:
        text = (folder / "CMakeCache.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(_GENERATOR_ENTRY):
            return FolderIdentity(line[len(_GENERATOR_ENTRY) :].strip(), None, toolset_known=False)
    return None


def last_identity(source_dir: Path) -> FolderIdentity | None:
    """The generator and toolset the build folder was last configured with, when known."""
    folder = build_folder(source_dir)
    return _from_memory(folder) or _from_cmake_cache(folder)


def _differs(last: FolderIdentity, wanted: FolderIdentity) -> bool:
    if last.generator != wanted.generator:
        return True
    return last.toolset_known and last.toolset != wanted.toolset


def reconcile_build_folder(source_dir: Path, wanted: FolderIdentity) -> str | None:
    """Clear CMake's configuration when the plan's generator/toolset differ; what was done, if anything."""
    last = last_identity(source_dir)
    if last is None or not _differs(last, wanted):
        return None
    folder = build_folder(source_dir)
    removed = []
    for name in ("CMakeCache.txt", "CMakeFiles"):
        path = folder / name
        if path.is_dir():
            _remove_tree(path)
            removed.append(name)
        elif path.exists():
            path.unlink()
            removed.append(name)
    return (
        f"The build folder {folder} was configured for {last.describe()}, and this plan uses {wanted.describe()}: "
        f"removed {' and '.join(removed) or 'nothing (already gone)'} so CMake configures afresh "
        "(otherwise CMake stops with 'Does not match the generator used previously' or keeps the old compiler)."
    )


def remember_build_folder(source_dir: Path, identity: FolderIdentity) -> None:
    """Record the generator/toolset this build configures the folder with."""
    folder = build_folder(source_dir)
    folder.mkdir(parents=True, exist_ok=True)
    data = {"generator": identity.generator, "toolset": identity.toolset}
    (folder / MEMORY_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
