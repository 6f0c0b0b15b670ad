"""What a source tree's build folder keeps for the next build: CMake's cache and the objects Ninja compiled.

PyTorch's setup.py configures CMake once (build/CMakeCache.txt) and then runs Ninja, which builds only what is
missing or out of date, so a build run again continues where the last one stopped. This reads what the folder holds,
cheaply and without running a tool: CMake's cache (the generator and compiler it recorded) and Ninja's log (the
objects it compiled that are still there). The dry run's "Source" line says it (source_tree.py), and the build says it
before it starts and in a stopped build's fix (builder/resume.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

BUILD_FOLDER = "build"  # where PyTorch's setup.py configures CMake, under the source tree
CMAKE_CACHE = "CMakeCache.txt"
NINJA_LOG = ".ninja_log"  # one line per output Ninja built: start, end, mtime, output, command hash (v5 to v7)
OBJECT_SUFFIXES = (".o", ".obj")  # gcc/clang/nvcc on Linux, cl.exe and nvcc on Windows
# What CMakeCache.txt says that a user may want to see, by the entries that say it, first found wins.
CACHE_ENTRIES = {
    "generator": ("CMAKE_GENERATOR",),
    "compiler": ("CMAKE_CXX_COMPILER", "CMAKE_C_COMPILER"),
}


@dataclass(frozen=True)
class KeptFolder:
    """What an existing build folder keeps for the next run."""

    folder: Path
    cmake_cache: dict[str, str]  # CACHE_ENTRIES' names found in CMakeCache.txt; empty when it has none
    has_cmake_cache: bool
    objects: int  # compiled objects still on disk: the ones Ninja's log lists, else every .o/.obj found
    counted_from: str  # where `objects` comes from: Ninja's log, or a walk of the folder

    def kept(self, compiler_cache: str | None) -> str:
        """'its CMake cache (Ninja, /usr/bin/c++), 14 compiled objects and ccache's objects in …'."""
        parts = []
        if self.has_cmake_cache:
            recorded = ", ".join(self.cmake_cache[name] for name in CACHE_ENTRIES if name in self.cmake_cache)
            parts.append("its CMake cache" + (f" ({recorded})" if recorded else ""))
        parts.append(f"{self.objects} compiled object{'' if self.objects == 1 else 's'} ({self.counted_from})")
        if compiler_cache:
            parts.append(compiler_cache)
        return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]


def _cache_entries(path: Path) -> dict[str, str] | None:
    """CACHE_ENTRIES read from CMakeCache.txt (`NAME:TYPE=value` lines); None when there is no such file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, equals, value = line.partition("=")
        if equals and not line.startswith(("#", "//")):
            values.setdefault(key.partition(":")[0], value.strip())
    found = {}
    for label, names in CACHE_ENTRIES.items():
        recorded = next((values[name] for name in names if values.get(name)), None)
        if recorded:
            found[label] = recorded
    return found


def _logged_objects(folder: Path) -> int | None:
    """The compiled objects Ninja's log lists that are still on disk; None without a log."""
    try:
        lines = (folder / NINJA_LOG).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    outputs = {
        fields[3] for fields in (line.split("\t") for line in lines if not line.startswith("#")) if len(fields) > 4
    }
    return sum(1 for output in outputs if output.endswith(OBJECT_SUFFIXES) and (folder / output).is_file())


def _walked_objects(folder: Path) -> int:
    """Every .o/.obj under the folder: a build folder of another generator (Visual Studio) keeps no Ninja log."""
    return sum(name.endswith(OBJECT_SUFFIXES) for _, _, names in os.walk(folder) for name in names)


def read_build_folder(source_dir: Path) -> KeptFolder | None:
    """What `<source>/build` keeps for this run, or None when there is nothing to continue from (no CMake cache and
    no Ninja log: the folder is new, or holds only this tool's memory file)."""
    folder = Path(source_dir) / BUILD_FOLDER
    entries = _cache_entries(folder / CMAKE_CACHE)
    logged = _logged_objects(folder)
    if entries is None and logged is None:
        return None
    if logged is not None:
        return KeptFolder(folder, entries or {}, entries is not None, logged, "in Ninja's log")
    return KeptFolder(folder, entries or {}, True, _walked_objects(folder), "found in the folder")
