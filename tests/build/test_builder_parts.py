"""The build runner's parts, each against the real thing it drives: git repositories with a
submodule, ccache and sccache with real compiles, build folders, the progress display, and the
verification in fresh interpreters."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from build_support import git, run_invoke
from support import plan_options

from pytorch_winbuild.builder.build_folder import (
    FolderIdentity,
    clean_build_folder,
    reconcile_build_folder,
    remember_build_folder,
)
from pytorch_winbuild.builder.compiler_cache import CacheSession, extension_cache_env, parse_stats
from pytorch_winbuild.builder.deps import fetch_missing_archives
from pytorch_winbuild.builder.environment import apply_change
from pytorch_winbuild.builder.progress import ProgressDisplay, Step, parse_progress
from pytorch_winbuild.builder.report import BuildRecord, run_paths, summary
from pytorch_winbuild.builder.settings import load_settings, parse_settings
from pytorch_winbuild.builder.source import acquire_source, clone_destination, old_era_prep
from pytorch_winbuild.errors import ConfigurationError, DependencyError
from pytorch_winbuild.facts.model import load_facts
from pytorch_winbuild.facts.source_tree import SourceTree
from pytorch_winbuild.knowledge.config_files import load_toml
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import EnvChange
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = pytest.mark.build

SETTINGS = load_settings()


# ---------------------------------------------------------------------------------------------
# Source: clones with a submodule, made with real git


def commit_all(folder: Path, message: str) -> str:
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", message)
    return git(folder, "rev-parse", "HEAD")


@pytest.fixture
def allow_file_submodules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Git refuses file:// submodules by default since 2.38; GitHub ones need no such setting."""
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.file.allow")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "always")


@pytest.fixture
def upstream(tmp_path: Path, allow_file_submodules: None) -> dict[str, str]:
    """A repository with a third_party submodule, tags v1 and v2 and a branch."""
    third = tmp_path / "third_party_repo"
    third.mkdir()
    git(third, "init", "-q", "-b", "main")
    (third / "library.h").write_text("int third_party(void);\n")
    commit_all(third, "third party library")
    main = tmp_path / "upstream"
    main.mkdir()
    git(main, "init", "-q", "-b", "main")
    (main / "version.txt").write_text("1.0.0\n")
    git(main, "submodule", "add", "-q", str(third), "third_party/library")
    shas = {"v1": commit_all(main, "version 1")}
    git(main, "tag", "v1")
    (main / "version.txt").write_text("2.0.0\n")
    shas["v2"] = commit_all(main, "version 2")
    git(main, "tag", "v2")
    git(main, "checkout", "-q", "-b", "feature")
    (main / "feature.txt").write_text("a branch\n")
    shas["feature"] = commit_all(main, "a feature")
    git(main, "checkout", "-q", "main")
    return {"url": str(main), **shas}


def test_clone_checks_out_the_ref_with_its_submodules(upstream: dict[str, str], tmp_path: Path) -> None:
    destination = tmp_path / "clone"
    checkout = acquire_source(repo=upstream["url"], ref="v1", destination=destination)
    assert (checkout.origin, checkout.commit, checkout.path) == ("cloned", upstream["v1"], destination)
    assert (destination / "version.txt").read_text() == "1.0.0\n"
    assert (destination / "third_party" / "library" / "library.h").is_file()


def test_existing_clone_is_fetched_and_moved_to_each_kind_of_ref(upstream: dict[str, str], tmp_path: Path) -> None:
    destination = tmp_path / "clone"
    acquire_source(repo=upstream["url"], ref="v1", destination=destination)
    by_tag = acquire_source(repo=upstream["url"] + "/", ref="v2", destination=destination)
    assert (by_tag.origin, by_tag.commit) == ("fetched", upstream["v2"])
    assert acquire_source(repo=upstream["url"], ref="feature", destination=destination).commit == upstream["feature"]
    assert (destination / "feature.txt").is_file()
    assert acquire_source(repo=upstream["url"], ref=upstream["v1"], destination=destination).commit == upstream["v1"]
    assert (
        acquire_source(repo=upstream["url"], ref=None, destination=destination).commit == upstream["v2"]
    )  # the default branch
    with pytest.raises(ConfigurationError, match="--ref no-such-ref names no branch, tag or commit"):
        acquire_source(repo=upstream["url"], ref="no-such-ref", destination=destination)


def test_a_clone_with_local_changes_or_another_origin_is_never_overwritten(
    upstream: dict[str, str], tmp_path: Path
) -> None:
    destination = tmp_path / "clone"
    acquire_source(repo=upstream["url"], ref="v1", destination=destination)
    (destination / "version.txt").write_text("1.0.0-patched\n")
    with pytest.raises(ConfigurationError, match=r"has local changes \(e\.g\. M version\.txt\)"):
        acquire_source(repo=upstream["url"], ref="v2", destination=destination)
    assert (destination / "version.txt").read_text() == "1.0.0-patched\n"
    with pytest.raises(ConfigurationError, match=r"is a clone of .*upstream, not of /elsewhere/pytorch"):
        acquire_source(repo="/elsewhere/pytorch", ref="v2", destination=destination)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigurationError, match="is not empty and is not a git clone"):
        acquire_source(repo=upstream["url"], ref="v1", destination=occupied)


def test_clone_destination_defaults_to_the_cache() -> None:
    assert clone_destination("https://github.com/pytorch/pytorch.git", None, Path("cache")) == Path("cache/src/pytorch")
    assert clone_destination("https://github.com/pytorch/pytorch", Path("C:/src/pt"), Path("cache")) == Path(
        "C:/src/pt"
    )


def _checkout_without_symlinks(tmp_path: Path, name: str, real_file: str) -> Path:
    """A repository whose tools/shared/cwrap_common.py is a symbolic link to `real_file`, as in pre-0.4.0
    PyTorch, cloned by the real git with core.symlinks=false (Git for Windows' default)."""
    origin = tmp_path / f"{name}-origin"
    (origin / real_file).parent.mkdir(parents=True)
    (origin / real_file).write_text("def parse_arguments(): ...\n")
    (origin / "tools/shared").mkdir(parents=True)
    (origin / "tools/shared/cwrap_common.py").symlink_to(Path("../..") / real_file)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(origin)], check=True)
    subprocess.run([*git, "-C", str(origin), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-qm", "tree"], check=True)
    clone = tmp_path / name
    subprocess.run(["git", "-c", "core.symlinks=false", "clone", "-q", str(origin), str(clone)], check=True)
    return clone


@pytest.mark.build
@pytest.mark.parametrize(
    ("layout", "real_file"),
    [("0.3.x", "torch/lib/ATen/common_with_cwrap.py"), ("early 2018 master", "aten/src/ATen/common_with_cwrap.py")],
)
def test_old_era_prep_replaces_the_text_git_leaves_for_the_cwrap_link(tmp_path: Path, layout: str, real_file: str):
    """pytorch/pytorch#6386: tools/shared/cwrap_common.py was a symlink that Windows checkouts get as text;
    seed 002 step 1 copies the real file over it. Git itself makes the stub here."""
    eras = {era.name: era for era in load_knowledge().eras}
    source = _checkout_without_symlinks(tmp_path, "pytorch", real_file)
    stub = source / "tools/shared/cwrap_common.py"
    assert not stub.is_symlink() and stub.read_text() == f"../../{real_file}"  # what git wrote, as in the issue
    assert old_era_prep(source, eras["2.9+"]) is None and stub.read_text() == f"../../{real_file}"
    said = old_era_prep(source, eras["0.3-0.4"])
    assert said == (
        f"Copied {real_file} to tools/shared/cwrap_common.py (PyTorch 0.3-0.4 sources need it there, the seeds' "
        "prep step)."
    )
    assert stub.read_text() == "def parse_arguments(): ...\n"
    assert old_era_prep(source, eras["0.3-0.4"]) is None  # a real file now: left alone


def test_old_era_prep_supplies_a_missing_file_and_leaves_everything_else(tmp_path: Path):
    era = next(era for era in load_knowledge().eras if era.name == "0.3-0.4")
    source = tmp_path / "pytorch-0.4"
    (source / "aten/src/ATen").mkdir(parents=True)
    (source / "aten/src/ATen/common_with_cwrap.py").write_text("def parse_arguments(): ...\n")
    assert old_era_prep(source, era) is not None  # 0.4.0+: setup.py makes the same copy
    assert (source / "tools/shared/cwrap_common.py").read_text() == "def parse_arguments(): ...\n"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "common_with_cwrap.py").write_text("secret\n")
    (source / "tools/shared/cwrap_common.py").write_text("../../../outside/common_with_cwrap.py")
    assert old_era_prep(source, era) is None  # a stub naming a file outside the tree is not followed
    assert (source / "tools/shared/cwrap_common.py").read_text() == "../../../outside/common_with_cwrap.py"
    (source / "tools/shared/cwrap_common.py").unlink()
    (source / "tools/shared").rmdir()
    (source / "tools/shared").symlink_to(outside)
    assert old_era_prep(source, era) is None and not (outside / "cwrap_common.py").exists()


# ---------------------------------------------------------------------------------------------
# Build folder


def test_clean_build_folder_removes_it_and_says_what(tmp_path: Path) -> None:
    assert clean_build_folder(tmp_path) is None
    (tmp_path / "build" / "CMakeFiles").mkdir(parents=True)
    (tmp_path / "build" / "CMakeFiles" / "object.o").write_bytes(b"\x7fELF")
    (tmp_path / "build" / "CMakeFiles" / "object.o").chmod(0o444)
    assert clean_build_folder(tmp_path) == tmp_path / "build"
    assert not (tmp_path / "build").exists()


def test_a_toolset_change_clears_cmake_configuration_but_keeps_objects(tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "CMakeFiles").mkdir(parents=True)
    (build / "CMakeCache.txt").write_text("CMAKE_GENERATOR:INTERNAL=Ninja\n")
    (build / "object.obj").write_bytes(b"compiled")
    remember_build_folder(tmp_path, FolderIdentity("Ninja", "14.11.25503"))
    assert reconcile_build_folder(tmp_path, FolderIdentity("Ninja", "14.11.25503")) is None
    said = reconcile_build_folder(tmp_path, FolderIdentity("Ninja", "14.16.27023"))
    assert said is not None and said.startswith(
        f"The build folder {build} was configured for Ninja, toolset 14.11.25503, and this plan uses Ninja, "
        "toolset 14.16.27023: removed CMakeCache.txt and CMakeFiles"
    )
    assert not (build / "CMakeCache.txt").exists() and not (build / "CMakeFiles").exists()
    assert (build / "object.obj").read_bytes() == b"compiled"


def test_a_folder_configured_by_hand_is_judged_by_its_generator_only(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "CMakeCache.txt").write_text(
        "# This is the CMakeCache file.\nCMAKE_GENERATOR:INTERNAL=Visual Studio 15 2017\n"
    )
    assert reconcile_build_folder(tmp_path, FolderIdentity("Visual Studio 15 2017", "14.11.25503")) is None
    assert "configured for Visual Studio 15 2017, and this plan uses Ninja" in (
        reconcile_build_folder(tmp_path, FolderIdentity("Ninja", None)) or ""
    )


# ---------------------------------------------------------------------------------------------
# MKL/MAGMA archives of a Windows plan (a saved facts file: VS 2017 with CUDA 9.0 and 10.0)


def windows_plan(cache: Path, present: bool):
    facts = load_facts(Path(__file__).resolve().parents[2] / "build_config" / "hosts" / "vs2017-cuda90-cuda100.json")
    return make_plan(
        PlanRequest(
            plan_options(cuda="9.0", cache_dir=str(cache)),
            tree=SourceTree(version=("1.0.0", "version.txt")),
            locate_archive=lambda archive: (str(cache / "deps" / archive.file_name[:-3]), present),
        ),
        facts,
        load_knowledge(),
    )


def test_archives_in_the_cache_are_not_fetched_again(tmp_path: Path) -> None:
    assert (
        fetch_missing_archives(windows_plan(tmp_path, present=True), tmp_path, mirror="file:///no/such/mirror") is None
    )


def test_missing_archives_are_fetched_before_the_build(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with pytest.raises(DependencyError) as failed:
        fetch_missing_archives(
            windows_plan(tmp_path / "cache", present=False), tmp_path / "cache", mirror=mirror.as_uri()
        )
    assert f"{mirror / 'mkl_2018.2.185.7z'} does not exist" in failed.value.message
    assert f"{mirror / 'magma_2.4.0_cuda90_release.7z'} does not exist" in failed.value.message
    # The build takes its mirror from the configuration alone (it has no --mirror): the fix names that.
    assert "remove `mirror:` from invoke.yaml" in failed.value.fix and "--mirror" not in failed.value.fix


# ---------------------------------------------------------------------------------------------
# Environment


def test_changes_apply_in_order_and_windows_names_ignore_case() -> None:
    env = {"Path": r"C:\VS\bin", "NO_CUDA": "1"}
    apply_change(env, EnvChange("PATH", r"C:\CUDA\v9.0\bin", "prepend", "nvcc first"), ";", windows=True)
    apply_change(env, EnvChange("no_cuda", "", "unset", "CUDA on"), ";", windows=True)
    apply_change(env, EnvChange("LIB", r"C:\mkl\lib", "prepend", "MKL"), ";", windows=True)
    assert env == {"Path": r"C:\CUDA\v9.0\bin;C:\VS\bin", "LIB": r"C:\mkl\lib"}
    linux = {"PATH": "/usr/bin", "path": "other"}
    apply_change(linux, EnvChange("PATH", "/usr/local/cuda/bin", "prepend", "nvcc first"), ":", windows=False)
    assert linux == {"PATH": "/usr/local/cuda/bin:/usr/bin", "path": "other"}


# ---------------------------------------------------------------------------------------------
# Progress


def test_progress_lines_of_ninja_and_make_are_read() -> None:
    settings = SETTINGS.progress
    assert parse_progress("[120/5000] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/x.cpp.obj", settings) == Step(
        120, 5000
    )
    assert parse_progress("[ 45%] Building CXX object src/a.cpp.o", settings) == Step(45, 100)
    assert parse_progress("FAILED: caffe2/x.obj", settings) is None
    assert parse_progress("  [3/4] indented is compiler output, not progress", settings) is None


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_without_a_terminal_progress_is_sparse_with_an_eta() -> None:
    out = io.StringIO()
    clock = FakeClock()
    display = ProgressDisplay(SETTINGS.progress, out, interactive=False, clock=clock)
    display.line("-- Configuring done")
    for done in range(1, 101):
        clock.now += 6  # six seconds per step: 100 steps, ten minutes
        display.line(f"[{done}/100] Building CXX object f{done}.o")
        if done == 50:
            display.line("warning: something the user should see")
    lines = out.getvalue().splitlines()
    assert lines[0] == "-- Configuring done"
    assert lines[1] == "-- progress: 1/100 (1%), elapsed 0:00:06"
    assert lines[2] == "-- progress: 10/100 (10%), elapsed 0:01:00, ETA 0:09:00"
    assert "warning: something the user should see" in lines
    assert lines[-1] == "-- progress: 100/100 (100%), elapsed 0:10:00, ETA 0:00:00"
    assert len(lines) == 13  # 11 progress lines (1 %, every 10 %, 100 %) and 2 others, not 100


def test_on_a_terminal_a_bar_replaces_the_step_lines() -> None:
    out = io.StringIO()
    display = ProgressDisplay(SETTINGS.progress, out, interactive=True)
    display.line("[1/3] Building CXX object a.o")
    display.line("a.cpp:1: warning: unused variable")
    display.line("[3/3] Linking CXX shared module _C.so")
    display.close()
    text = out.getvalue()
    assert "a.cpp:1: warning: unused variable\n" in text
    assert "3/3" in text and "100%" in text
    assert "[1/3] Building CXX object a.o\n" not in text
    assert display.last_step == Step(3, 3)


# ---------------------------------------------------------------------------------------------
# Compiler caches, with real compiles


@pytest.fixture
def hello(tmp_path: Path) -> Path:
    source = tmp_path / "hello.cpp"
    source.write_text("int hello() { return 42; }\n")
    return source


def compile_through(launcher: str, source: Path, env: dict[str, str]) -> None:
    subprocess.run(
        [launcher, "g++", "-c", str(source), "-o", str(source.with_suffix(".o"))],
        env=env,
        check=True,
        capture_output=True,
    )


@pytest.mark.parametrize("name", ["ccache", "sccache"])
def test_cache_session_counts_one_build(name: str, hello: Path, tmp_path: Path) -> None:
    variable = {"ccache": "CCACHE_DIR", "sccache": "SCCACHE_DIR"}[name]
    env = {**os.environ, variable: str(tmp_path / name), "SCCACHE_IDLE_TIMEOUT": "0"}
    session = CacheSession(SETTINGS.caches[name], env)
    session.start()
    compile_through(name, hello, env)  # a miss
    compile_through(name, hello, env)  # the same compile again: a hit
    stats = session.finish()
    assert (stats.hits, stats.misses, stats.error) == (1, 1, None)
    assert stats.describe() == f"{name}: 1 hits, 1 misses (50% hits)"
    session.start()  # zeroed (sccache) or read as the baseline (ccache) for the next build
    assert (session.finish().hits, session.finish().misses) == (0, 0)


def test_older_tools_are_read_from_their_human_statistics(hello: Path, tmp_path: Path) -> None:
    env = {**os.environ, "CCACHE_DIR": str(tmp_path / "ccache")}
    subprocess.run(["ccache", "-z"], env=env, check=True, capture_output=True)
    compile_through("ccache", hello, env)
    compile_through("ccache", hello, env)
    text = subprocess.run(["ccache", "-s"], env=env, check=True, capture_output=True, text=True).stdout
    assert SETTINGS.caches["ccache"].stats_fallback is not None
    assert parse_stats(text, SETTINGS.caches["ccache"].stats_fallback)[:2] == (1, 1)
    # ccache 3.x cannot be installed beside the 4.x here: its `-s` text as ccache v3.7.12's stats_summary
    # (src/stats.c) prints it: the three fixed lines, then each counter as printf("%-31s %8u\n") in
    # stats_info order, the hit rate after "cache miss" ("%6.2f %%"), and "max cache size" (format_size).
    counters = [("cache hit (direct)", 7), ("cache hit (preprocessed)", 2), ("cache miss", 4), ("called for link", 3)]
    ccache3 = (
        "cache directory                     /home/u/.ccache\n"
        "primary config                      /home/u/.ccache/ccache.conf\n"
        "secondary config      (readonly)    /etc/ccache.conf\n"
    )
    for message, count in counters:
        ccache3 += f"{message:<31} {count:>8}\n"
        if message == "cache miss":
            ccache3 += f"cache hit rate                    {100 * 9 / 13:6.2f} %\n"
    ccache3 += "max cache size                  5.0 GB\n"
    assert parse_stats(ccache3, SETTINGS.caches["ccache"].stats_fallback)[:2] == (9, 4)
    # clcache is a Windows tool: its `-s` text is clcache 4.2.0's printStatistics (clcache/__main__.py,
    # tag v4.2.0 of frerich/clcache), the template copied verbatim and filled as that function fills it
    # (str(cache) of a disk cache is "Disk cache at <dir>"; sizes with "{:,}").
    template = """
clcache statistics:
  current cache dir         : {}
  cache size                : {:,} bytes
  maximum cache size        : {:,} bytes
  cache entries             : {}
  cache hits                : {}
  cache misses
    total                      : {}
    evicted                    : {}
    header changed             : {}
    source changed             : {}
  passed to real compiler
    called w/ invalid argument : {}
    called for preprocessing   : {}
    called for linking         : {}
    called for external debug  : {}
    called w/o source          : {}
    called w/ multiple sources : {}
    called w/ PCH              : {}""".strip()
    # dir, size, maximum, entries, hits, misses (total, evicted, header, source), then the seven passed-on calls
    filled = (1024, 1073741824, 3, 12, 5, 1, 2, 2, 0, 0, 4, 0, 0, 0, 0)
    clcache = template.format("Disk cache at C:\\cache\\clcache", *filled)
    assert parse_stats(clcache, SETTINGS.caches["clcache"].stats)[:2] == (12, 5)


def test_extension_wrapper_runs_the_real_compiler_through_the_cache(hello: Path, tmp_path: Path) -> None:
    env = {**os.environ, "CCACHE_DIR": str(tmp_path / "ccache")}
    env.pop("CXX", None)
    variables, said = extension_cache_env("ccache", "linux", env, tmp_path / "cache", SETTINGS.extension_cache)
    assert variables["TORCH_NO_COMPILER_WRAPPER"] == "1"
    assert said.startswith(f"ccache through wrapper scripts in {tmp_path / 'cache' / 'launchers' / 'ccache'}")
    subprocess.run(["ccache", "-z"], env=env, check=True, capture_output=True)
    subprocess.run([variables["CXX"], "-c", str(hello), "-o", str(tmp_path / "hello.o")], env=env, check=True)
    stats = subprocess.run(["ccache", "--print-stats"], env=env, check=True, capture_output=True, text=True).stdout
    assert "\ncache_miss\t1\n" in stats
    assert extension_cache_env("none", "linux", env, tmp_path, SETTINGS.extension_cache) == (
        {"TORCH_NO_COMPILER_WRAPPER": "1"},
        "no compiler cache (--compiler-cache none or none installed)",
    )
    assert extension_cache_env("clcache", "windows", env, tmp_path, SETTINGS.extension_cache) == (
        {},
        "clcache through the plan's CC/CXX; nvcc is not cached (clcache caches only the C/C++ compiler), so .cu "
        "files compile again every build",
    )
    assert (
        "sccache does not reach extension builds on windows"
        in extension_cache_env("sccache", "windows", env, tmp_path, SETTINGS.extension_cache)[1]
    )


def test_extension_wrappers_refuse_a_cache_folder_with_a_blank(tmp_path: Path) -> None:
    """The real setuptools splits $CC at blanks: CC='/x/sp ace/gcc' makes build_ext run '/x/sp'. So the
    wrappers are refused there, with nothing written, instead of a build that fails far from the cause."""
    spaced = tmp_path / "sp ace"
    spaced.mkdir()
    (spaced / "gcc").symlink_to(shutil.which("gcc") or "gcc")
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup, Extension\nsetup(name='h', ext_modules=[Extension('h', ['h.c'])])\n"
    )
    (tmp_path / "h.c").write_text(
        '#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "h", 0, -1, 0};\n'
        "PyMODINIT_FUNC PyInit_h(void) { return PyModule_Create(&m); }\n"
    )
    built = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext"],
        cwd=tmp_path,
        env={**os.environ, "CC": str(spaced / "gcc")},
        capture_output=True,
        text=True,
    )
    assert built.returncode != 0 and f"No such file or directory: '{tmp_path / 'sp'}'" in built.stdout + built.stderr
    with pytest.raises(ConfigurationError, match="setuptools splits"):
        extension_cache_env("ccache", "linux", dict(os.environ), spaced / "cache", SETTINGS.extension_cache)
    assert not (spaced / "cache").exists()


def test_runner_settings_are_checked_on_load() -> None:
    data = load_toml("build_runner.toml")
    data["cache"]["ccache"]["stats"]["format"] = "xml"
    with pytest.raises(
        ConfigurationError, match=r"cache\.ccache\.stats\.format: expected one of json, tsv, text, got 'xml'"
    ):
        parse_settings(data, "build_config/build_runner.toml")
    data = load_toml("build_runner.toml")
    data["cache"]["clcache"]["stats"]["hits"] = ["cache hits"]
    with pytest.raises(ConfigurationError, match="needs a group that captures the count"):
        parse_settings(data, "build_config/build_runner.toml")


# ---------------------------------------------------------------------------------------------
# Report


def test_reports_never_overwrite_and_summaries_name_the_files(tmp_path: Path) -> None:
    log, report = run_paths(tmp_path / "logs", "build")
    log.write_text("the first run\n")
    second_log, second_report = run_paths(tmp_path / "logs", "build")
    assert second_log != log and second_report != report
    record = BuildRecord("build", log, report, command=["python", "setup.py", "install"])
    record.set_environment(
        {"SCCACHE_REDIS": "redis://:s3cret-pass@cache:6379", "GITHUB_TOKEN": "ghp_" + "a" * 36, "USE_CUDA": "0"}
    )
    record.result, record.exit_code = "success", 0
    record.write()
    written = report.read_text()
    assert "s3cret-pass" not in written and "a" * 36 not in written
    assert json.loads(written)["environment"] == {
        "GITHUB_TOKEN": "***",
        "SCCACHE_REDIS": "redis://:***@cache:6379",
        "USE_CUDA": "0",
    }
    text = summary(record)
    assert text.splitlines()[0].startswith("== pytorch-winbuild build succeeded in")
    assert f"log      {log}" in text and f"report   {report}" in text


# ---------------------------------------------------------------------------------------------
# Verification and the tasks around it (the real check of a build that works: the end-to-end test
# in test_build_mini_torch.py, and tests/test_verify_gpu.py on this Python's own torch)


def test_invoke_verify_explains_a_python_without_torch(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = tmp_path / "bare" / "bin" / "python"
    done = run_invoke(sys.executable, "verify", "--python", str(bare))
    # What that Python itself says, as the last line of its traceback.
    own = subprocess.run([str(bare), "-c", "import torch"], capture_output=True, text=True, cwd=tmp_path)
    reason = own.stderr.strip().splitlines()[-1]
    assert done.returncode == 6
    record = json.loads(done.stdout)
    assert record["failed_step"] == "import torch" and record["error"] == reason  # one paragraph, no traceback
    assert "Traceback" not in done.stdout + done.stderr and "File " not in done.stdout
    assert done.stderr.startswith(
        f"verification failed: a fresh `{bare}` outside the source tree failed at step 'import torch': {reason}"
    )
    # The fix is this machine's: the commands it quotes, run by the real sh with the bare Python's folder first
    # on PATH, print that Python.
    assert "[no-module-torch]" in done.stderr and "`where python`" not in done.stderr
    [shown] = re.findall(r"`(command -v python)`", record["diagnosis"][0]["fix"])
    which = subprocess.run(["sh", "-c", shown], env={"PATH": f"{bare.parent}:/usr/bin:/bin"}, capture_output=True)
    assert which.stdout.decode().strip() == str(bare)


def test_build_refuses_what_it_cannot_build(tmp_path: Path) -> None:
    nothing = run_invoke(sys.executable, "build", "--cuda", "cpu", "--ref", "v2.4.0")
    assert nothing.returncode == 2 and "--ref needs --repo" in nothing.stderr
    not_pytorch = run_invoke(
        sys.executable, "build", "--source", str(tmp_path), "--cuda", "cpu", "--cache-dir", str(tmp_path / "cache")
    )
    assert (
        not_pytorch.returncode == 2
        and f"{tmp_path} has neither a pyproject.toml nor a setup.py, so pip cannot build it" in not_pytorch.stderr
    )
    no_setup = run_invoke(
        sys.executable, "build-ext", str(tmp_path), "--cuda", "cpu", "--cache-dir", str(tmp_path / "cache")
    )
    assert no_setup.returncode == 2 and f"{tmp_path} has no setup.py" in no_setup.stderr
