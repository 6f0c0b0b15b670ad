"""`invoke build-ext` on a real PyTorch C++ extension against the installed torch (2.13.0, CPU),
built twice through ccache: a cold build, then a clean rebuild that the cache serves.

The extension (fixtures/torch_ops) is written against LibTorch's stable ABI, whose headers compile
in about 2 s a file, so on 2 cores its cold build takes seconds (a file that includes
torch/extension.h takes about 35 s)."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from build_support import copy_fixture, reports, run_invoke

# One worker builds the extension once for the whole module (pyproject.toml sets --dist loadgroup).
pytestmark = [pytest.mark.build, pytest.mark.xdist_group("torch_ops")]


@dataclass(frozen=True)
class Builds:
    source: Path
    cache: Path
    cold: subprocess.CompletedProcess[str]
    warm: subprocess.CompletedProcess[str]
    cold_report: dict[str, Any]
    warm_report: dict[str, Any]


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
    return Builds(source, cache, cold, warm, cold_report, warm_report)


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
