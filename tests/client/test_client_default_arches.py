"""PyTorch's default architectures of Debian's 1.13.1 and 2.6.0 sources: build_config/default_arches.toml holds what
each release's select_compute_arch.cmake makes of every CUDA release, and MAX_JOBS counts the -gencode targets that
the release's own macro (cmake/public/utils.cmake torch_cuda_get_nvcc_gencode_flag) emits for that list."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from client_support import CLIENT_DIR
from conftest import Sources
from plan_machine import KNOWLEDGE
from support import common_architectures, plan_options

from pytorch_winbuild.facts.model import facts_from_dict
from pytorch_winbuild.knowledge.default_arches import default_arches, tables
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = [pytest.mark.client, pytest.mark.xdist_group("client")]

FILE = "cmake/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake"


def _gencode_targets(tree: Path, cuda: str) -> int:
    """The -gencode targets PyTorch's own macro emits for the "Common" list (what "Auto" falls back to)."""
    done = subprocess.run(
        ["cmake", f"-DTREE={tree}", f"-DCUDA_VERSION={cuda}", "-P", str(CLIENT_DIR / "arch_flags.cmake")],
        env={**os.environ, "TORCH_CUDA_ARCH_LIST": "Common"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    found = re.search(r"TORCH_GENCODE=(.*)", done.stdout)
    assert found, done.stdout + done.stderr
    return len(re.findall(r"-gencode", found.group(1)))


def _no_gpu_machine(cuda: str) -> dict[str, object]:
    return {
        "schema": 3,
        "os": "linux",
        "python": {"version": "3.10.12", "bits": 64, "executable": "/usr/bin/python3"},
        "cuda": [{"version": cuda, "path": f"/usr/local/cuda-{cuda}", "cudnn": "8.9.0"}],
        "tools": {},
        "gpus": [],
        "cpu_count": 32,
        "memory_total_mib": 65536,
        "memory_available_mib": 60000,
    }


@pytest.mark.parametrize(
    ("version", "table", "cudas"),
    [("1.13.1", ("1.13", "1.14"), ("11.7",)), ("2.6.0", ("2.6", "2.7"), ("12.4", "12.8"))],
)
def test_the_table_and_max_jobs_follow_the_releases_own_cmake(
    sources: Sources, tmp_path: Path, version: str, table: tuple[str, str], cudas: tuple[str, ...]
) -> None:
    tree = sources.tree(version)
    [read] = [t for t in tables() if t.pytorch == table]
    for cuda, listed in read.lists.items():
        assert common_architectures(tree / FILE, cuda, tmp_path) == listed, (version, cuda)
    for cuda in cudas:
        defaults = default_arches(version, cuda)
        assert defaults is not None and not defaults.note
        plan = make_plan(
            PlanRequest(plan_options(cuda=cuda, pytorch_version=version)),
            facts_from_dict(_no_gpu_machine(cuda)),
            KNOWLEDGE,
        )
        assert "TORCH_CUDA_ARCH_LIST" not in plan.final_env()
        assert plan.archs == defaults.count == _gencode_targets(tree, cuda), (version, cuda)
