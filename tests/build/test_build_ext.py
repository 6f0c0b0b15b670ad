"""`invoke build-ext` on a real PyTorch C++ extension against the installed torch (2.13.0, CPU),
built twice through ccache: a cold build, then a clean rebuild that the cache serves; then, unchanged, not built
(issue 39, point 1), and each kind of change checked with the key and verdict build-ext itself computes
(builder/extension_key.py) on that built folder, each change undone after its check.

The extension (fixtures/torch_ops) is written against LibTorch's stable ABI, whose headers compile
in about 2 s a file, so on 2 cores its cold build takes seconds (a file that includes
torch/extension.h takes about 35 s)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from build_support import copy_fixture, reports, run_invoke
from support import plan_options

from pytorch_winbuild.builder.extension_key import RECORD, ExtensionKey, extension_key, remember_build, verdict
from pytorch_winbuild.faces.extension_python import torch_install
from pytorch_winbuild.facts.probe import probe
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.python_choice import PythonRequest
from pytorch_winbuild.planning.request import PlanRequest

# One worker builds the extension once for the whole module (pyproject.toml sets --dist loadgroup).
pytestmark = [pytest.mark.build, pytest.mark.xdist_group("torch_ops")]
COMMAND = ("setup.py", "build_ext", "--inplace")  # what --mode inplace runs (build_config/build_runner.toml)


@dataclass(frozen=True)
class Builds:
    source: Path
    cache: Path
    cold: subprocess.CompletedProcess[str]
    warm: subprocess.CompletedProcess[str]
    cold_report: dict[str, Any]
    warm_report: dict[str, Any]
    args: tuple[str, ...]


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    work = tmp_path_factory.mktemp("extension")
    source = copy_fixture("torch_ops", work / "torch_ops")
    cache = work / "cache"
    args = ("build-ext", str(source), "--cuda", "cpu", "--compiler-cache", "ccache", "--cache-dir", str(cache))
    cold = run_invoke(sys.executable, *args)
    assert cold.returncode == 0, cold.stdout[-3000:] + cold.stderr
    warm = run_invoke(sys.executable, *args, "--clean")
    assert warm.returncode == 0, warm.stdout[-3000:] + warm.stderr
    cold_report, warm_report = reports(cache / "logs")
    return Builds(source, cache, cold, warm, cold_report, warm_report, args)


def test_cold_build_compiles_every_file_through_the_planned_cache(builds: Builds) -> None:
    report = builds.cold_report
    assert report["kind"] == "build-ext" and report["result"] == "success"
    assert report["command"] == [sys.executable, "setup.py", "build_ext", "--inplace"]
    assert report["plan"]["pytorch_version"] == "2.13.0+cpu" and report["plan"]["compiler_cache"] == "ccache"
    assert report["cache"]["misses"] == 2 and report["cache"]["hits"] == 0
    runner = {entry["name"]: entry["value"] for entry in report["runner_env"]}
    assert runner["TORCH_NO_COMPILER_WRAPPER"] == "1"
    wrapper = Path(runner["CXX"])
    assert wrapper.parent == builds.cache / "launchers" / "ccache" and "g++" in wrapper.name
    log = Path(report["log"]).read_text(encoding="utf-8")
    assert f"{wrapper} -MMD -MF" in log, "every compile goes through the wrapper, so through ccache"
    assert "Compiler cache for the extension: ccache through wrapper scripts" in builds.cold.stdout


def test_built_extension_imports_and_computes(builds: Builds) -> None:
    program = (
        "import torch, winbuild_ext\n"
        "ops = torch.ops.winbuild_ext\n"
        "print(ops.add_scaled(torch.ones(3), torch.arange(3.0), 2.0).tolist())\n"
        "print(ops.add_scaled(torch.ones(3), torch.arange(3.0)).tolist())\n"
        "print(ops.row_norms(torch.tensor([[3.0, 4.0], [6.0, 8.0]])).tolist())\n"
        "try:\n"
        "    ops.add_scaled(torch.ones(2), torch.ones(3))\n"
        "except RuntimeError as error:\n"
        "    print(str(error).splitlines()[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=builds.source, capture_output=True, text=True, check=True
    )
    *results, error = done.stdout.splitlines()
    assert results == ["[1.0, 3.0, 5.0]", "[1.0, 2.0, 3.0]", "[5.0, 10.0]"]
    # STD_TORCH_CHECK's message: the function, the file and line, then the extension's own words.
    assert re.fullmatch(r"add_scaled, .*ops\.cpp:\d+, add_scaled: shapes differ: \[2\] and \[3\]", error), error


def test_the_built_cpu_extension_is_read_for_gpu_code_and_holds_none(builds: Builds) -> None:
    """After the build, cuobjdump reads the library (issue 27, point 15): a CPU extension is no warning."""
    library = f"winbuild_ext{sysconfig.get_config_var('EXT_SUFFIX')}"
    note = f"{library} holds no CUDA code (cuobjdump: no device code): no GPU architecture to check."
    assert note in builds.cold_report["notes"] and "check" in builds.cold_report["phases"]
    assert f"-- {note}" in builds.cold.stdout


def test_clean_rebuild_is_served_by_the_cache(builds: Builds) -> None:
    report = builds.warm_report
    assert report["cache"]["hits"] == 2 and report["cache"]["misses"] == 0
    assert "ccache: 2 hits, 0 misses (100% hits)" in builds.warm.stdout
    assert report["notes"][0] == f"--clean: removed {builds.source / 'build'}."
    # Both builds start Python, import torch and link; only the cold one compiles.
    assert report["phases"]["build"] < builds.cold_report["phases"]["build"]


def _reports(cache: Path) -> list[Path]:
    return sorted((cache / "logs").glob("build-ext-*.json"))


def test_an_unchanged_build_ext_is_up_to_date_and_runs_no_setup_py(builds: Builds) -> None:
    """Issue 39, point 1: the third run, with nothing changed since the --clean rebuild, runs no setup.py."""
    assert f"-- build-ext {builds.source}: building: no record of a successful build here" in builds.cold.stdout
    assert f"-- build-ext {builds.source}: --clean: building whatever the last build was." in builds.warm.stdout
    library = next(builds.source.glob("winbuild_ext*.so"))
    written = library.stat().st_mtime_ns
    again = run_invoke(sys.executable, *builds.args)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    line = next(line for line in again.stdout.splitlines() if line.startswith(f"-- build-ext {builds.source}"))
    torch = torch_install(sys.executable)
    assert torch is not None
    assert "up to date: 3 sources, setup.py, the environment" in line
    assert f"torch {torch.version} at {torch.folder}" in line and "1 built library are those of the last" in line
    assert "setup.py not run (--force rebuilds)" in line
    assert len(_reports(builds.cache)) == 2, "no third run: no log, no report"
    assert "running build_ext" not in again.stdout and library.stat().st_mtime_ns == written


@pytest.fixture(scope="module")
def plan() -> Plan:
    """The plan build-ext makes here for the fixture (CPU, no compiler cache, this Python)."""
    options = plan_options(
        cuda="cpu",
        compiler_cache="none",
        pytorch_version="2.13.0",
        build_venv=False,
        extension=True,
        python=PythonRequest("path", sys.executable),
    )
    return make_plan(PlanRequest(options), probe(gpus=False), load_knowledge())


@pytest.fixture
def recorded(builds: Builds, plan: Plan) -> Iterator[ExtensionKey]:
    """The builds folder recorded under this test's own key (the plan above, this environment), restored after."""
    record = (builds.source / RECORD).read_bytes()
    key = _key(builds, plan)
    remember_build(builds.source, key)
    assert verdict(builds.source, key).up_to_date
    yield key
    (builds.source / RECORD).write_bytes(record)


def _key(
    builds: Builds, plan: Plan, *, environ: dict[str, str] | None = None, torch: str | None = None
) -> ExtensionKey:
    folder = torch or (torch_install(sys.executable) or pytest.fail("no torch")).folder
    return extension_key(plan, builds.source, "inplace", COMMAND, folder, os.environ if environ is None else environ)


def _why(builds: Builds, key: ExtensionKey) -> str:
    decided = verdict(builds.source, key)
    assert not decided.up_to_date
    return decided.why


@pytest.mark.parametrize("name", ["csrc/ops.cpp", "csrc/ops.h", "setup.py"])
def test_a_changed_source_header_or_setup_py_builds_again(
    builds: Builds, plan: Plan, recorded: ExtensionKey, name: str
) -> None:
    path = builds.source / name
    text = path.read_bytes()
    path.write_bytes(text + b"\n// changed\n" if name != "setup.py" else text + b"\n# changed\n")
    try:
        part = "setup.py" if name == "setup.py" else "sources"
        assert _why(builds, _key(builds, plan)) == f"building: {part} changed since the last successful build"
    finally:
        path.write_bytes(text)
    assert verdict(builds.source, _key(builds, plan)).up_to_date


def test_a_new_source_file_builds_again(builds: Builds, plan: Plan, recorded: ExtensionKey) -> None:
    added = builds.source / "csrc" / "extra.h"
    added.write_text("#pragma once\n", encoding="utf-8")
    try:
        assert "sources changed" in _why(builds, _key(builds, plan))
    finally:
        added.unlink()


def test_a_changed_flag_environment_or_torch_builds_again(builds: Builds, plan: Plan, recorded: ExtensionKey) -> None:
    torch = (torch_install(sys.executable) or pytest.fail("no torch")).folder
    debug = extension_key(plan, builds.source, "inplace", (*COMMAND, "--debug"), torch, os.environ)
    assert _why(builds, debug) == "building: flags changed since the last successful build"
    assert "environment changed" in _why(builds, _key(builds, plan, environ={**os.environ, "CXXFLAGS": "-O0"}))
    assert "torch changed" in _why(builds, _key(builds, replace(plan, pytorch_version="2.13.1+cpu")))
    develop = extension_key(plan, builds.source, "develop", COMMAND, torch, os.environ)
    assert "--mode develop also writes outside the folder" in _why(builds, develop)
    unknown = extension_key(plan, builds.source, "inplace", COMMAND, None, os.environ)
    assert "the folder of torch 2.13.0 is not known" in _why(builds, unknown)


def test_a_changed_header_under_torch_builds_again(builds: Builds, plan: Plan, tmp_path: Path) -> None:
    """The torch folder of a (copied) install: a header rewritten in place, same version, builds again."""
    torch = tmp_path / "torch"
    (torch / "include" / "torch").mkdir(parents=True)
    header = torch / "include" / "torch" / "extension.h"
    header.write_text("#pragma once\n", encoding="utf-8")
    record = (builds.source / RECORD).read_bytes()
    try:
        key = _key(builds, plan, torch=str(torch))
        remember_build(builds.source, key)
        assert verdict(builds.source, key).up_to_date
        header.write_text("#pragma once\n// rebuilt\n", encoding="utf-8")
        assert "torch changed" in _why(builds, _key(builds, plan, torch=str(torch)))
    finally:
        (builds.source / RECORD).write_bytes(record)


def test_force_clean_and_a_changed_library_build_again(builds: Builds, plan: Plan, recorded: ExtensionKey) -> None:
    assert verdict(builds.source, recorded, force=True).why.startswith("--force: building")
    assert verdict(builds.source, recorded, clean=True).why.startswith("--clean: building")
    library = next(builds.source.glob("winbuild_ext*.so"))
    kept = builds.source.parent / "kept.so"
    shutil.copy2(library, kept)
    try:
        library.write_bytes(library.read_bytes() + b"\0")
        assert "the built library " + library.name + " is missing or changed" in _why(builds, recorded)
    finally:
        shutil.copy2(kept, library)
    assert verdict(builds.source, recorded).up_to_date
