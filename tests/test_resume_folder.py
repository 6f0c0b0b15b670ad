"""What a re-run keeps, read from build folders written here in the shapes the tools write them (builder/resume.py),
and how the progress display says that Ninja's count is what is left. The real CMake + Ninja build, stopped and
resumed, is tests/build/test_resume.py."""

from __future__ import annotations

import io
from pathlib import Path

from pytorch_winbuild.builder.progress import ProgressDisplay
from pytorch_winbuild.builder.settings import load_settings
from pytorch_winbuild.facts.kept_build import read_build_folder
from pytorch_winbuild.facts.source_tree import read_tree

# Ninja 1.10's log (v5): start, end, mtime, output, command hash; an output is listed again when rebuilt, and
# CMake's glob check is an absolute path.
NINJA_LOG_V5 = """# ninja log v5
0\t12\t0\t/src/build/CMakeFiles/cmake.verify_globs\t1
1\t20\t0\tCMakeFiles/x.dir/a.c.o\t2
2\t30\t0\tCMakeFiles/x.dir/b.c.o\t3
3\t40\t0\tCMakeFiles/x.dir/gone.c.o\t4
50\t60\t0\tCMakeFiles/x.dir/a.c.o\t5
61\t70\t0\tlibx.a\t6
"""

CMAKE_CACHE = """# This is the CMakeCache file.
//C++ compiler
CMAKE_CXX_COMPILER:FILEPATH=C:/VS/bin/cl.exe
//Name of generator.
CMAKE_GENERATOR:INTERNAL=Visual Studio 16 2019
"""


def test_a_new_folder_has_nothing_to_continue(tmp_path: Path) -> None:
    assert read_build_folder(tmp_path) is None
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / ".pytorch-winbuild.json").write_text("{}")
    assert read_build_folder(tmp_path) is None


def test_ninjas_log_counts_each_object_once_and_only_those_still_there(tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "CMakeFiles" / "x.dir").mkdir(parents=True)
    (build / ".ninja_log").write_text(NINJA_LOG_V5)
    for name in ("a.c.o", "b.c.o"):  # gone.c.o was deleted since: Ninja builds it again
        (build / "CMakeFiles" / "x.dir" / name).write_bytes(b"\x7fELF")
    (build / "libx.a").write_bytes(b"!<arch>\n")

    kept = read_build_folder(tmp_path)

    assert kept is not None and kept.objects == 2 and not kept.has_cmake_cache
    assert kept.kept(None) == "2 compiled objects (in Ninja's log)"


def test_a_folder_without_ninjas_log_is_counted_by_its_files(tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "x.dir" / "Release").mkdir(parents=True)
    (build / "CMakeCache.txt").write_text(CMAKE_CACHE)
    (build / "x.dir" / "Release" / "a.obj").write_bytes(b"obj")

    kept = read_build_folder(tmp_path)

    assert kept is not None and kept.cmake_cache == {
        "generator": "Visual Studio 16 2019",
        "compiler": "C:/VS/bin/cl.exe",
    }
    assert kept.kept("clcache's objects in C:\\cache\\clcache") == (
        "its CMake cache (Visual Studio 16 2019, C:/VS/bin/cl.exe), 1 compiled object (found in the folder) and "
        "clcache's objects in C:\\cache\\clcache"
    )


def test_a_resumed_count_is_said_once_after_ninja_regenerates_its_file() -> None:
    out = io.StringIO()
    display = ProgressDisplay(load_settings().progress, out, interactive=False, kept_objects=4)
    display.line("[0/2] Re-checking globbed directories...")
    display.line("[1/2] Re-running CMake...")
    display.line("[1/17] Building C object CMakeFiles/x.dir/f13.c.o")
    display.line("[2/17] Building C object CMakeFiles/x.dir/f14.c.o")
    lines = out.getvalue().splitlines()
    said = [line for line in lines if line.startswith("-- resumed:")]
    assert said == [
        "-- resumed: Ninja runs the 17 steps left of the build; 4 compiled objects of the last build are kept."
    ]
    assert lines[lines.index(said[0]) + 1] == "-- progress: 1/17 (5%), elapsed 0:00:00"


def test_a_fresh_build_or_a_percentage_says_nothing_of_resuming() -> None:
    out = io.StringIO()
    ProgressDisplay(load_settings().progress, out, interactive=False).line("[1/17] Building C object a.o")
    resumed = ProgressDisplay(load_settings().progress, out, interactive=False, kept_objects=3)
    resumed.line("[ 45%] Building CXX object a.o")  # the Makefile generator counts no steps
    assert "resumed" not in out.getvalue()


def test_a_dry_run_names_the_folder_a_build_would_continue_in(tmp_path: Path) -> None:
    """The plan's "Source" line says what `invoke build` would say before it starts, read from the same folder."""
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='torch')\n")
    (tmp_path / "version.txt").write_text("2.13.0a0\n")
    assert read_tree(tmp_path, True).text == f"{tmp_path} (PyTorch 2.13.0a0, from {tmp_path / 'version.txt'})"
    build = tmp_path / "build"
    (build / "CMakeFiles" / "x.dir").mkdir(parents=True)
    (build / "CMakeCache.txt").write_text("CMAKE_GENERATOR:INTERNAL=Ninja\nCMAKE_CXX_COMPILER:FILEPATH=/usr/bin/c++\n")
    (build / ".ninja_log").write_text(NINJA_LOG_V5)
    (build / "CMakeFiles" / "x.dir" / "a.c.o").write_bytes(b"\x7fELF")

    assert read_tree(tmp_path, True).text == (
        f"{tmp_path} (PyTorch 2.13.0a0, from {tmp_path / 'version.txt'}); a build continues in {build} (kept: its "
        "CMake cache (Ninja, /usr/bin/c++) and 1 compiled object (in Ninja's log)) unless --clean"
    )
    assert read_tree(tmp_path, False).text == str(tmp_path), "build-ext's folder is an extension's, not PyTorch's"
