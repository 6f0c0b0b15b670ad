"""PyTorch's default architectures (build_config/default_arches.toml) are what its own CMake file makes of each
CUDA release, and MAX_JOBS counts them (issue 38: a plan without a GPU or --arch-list said PyTorch builds its
default list and sized memory for one architecture). The file is the installed torch 2.13.0 wheel's, evaluated by
the real cmake; tests/client does the same for Debian's 1.13.1 and 2.6.0 sources."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support import common_architectures, plan_options

from pytorch_winbuild.facts.model import facts_from_dict
from pytorch_winbuild.knowledge.default_arches import default_arches, tables
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = pytest.mark.build

KNOWLEDGE = load_knowledge()
WHEEL_FILE = (
    Path(torch.__file__).parent / "share/cmake/Caffe2/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake"
)


def test_the_2_13_table_is_what_the_wheels_file_makes_of_every_cuda(tmp_path: Path) -> None:
    assert torch.__version__.startswith("2.13.0") and WHEEL_FILE.is_file()
    [table] = [t for t in tables() if t.pytorch == ("2.13", "2.14")]
    assert set(table.lists) == set(KNOWLEDGE.cuda)
    for cuda, listed in table.lists.items():
        assert common_architectures(WHEEL_FILE, cuda, tmp_path) == listed, cuda


def _no_gpu_machine() -> dict[str, object]:
    return {
        "schema": 3,
        "os": "linux",
        "python": {"version": "3.12.3", "bits": 64, "executable": "/usr/bin/python3"},
        "cuda": [{"version": "12.8", "path": "/usr/local/cuda-12.8", "cudnn": "9.1.0"}],
        "tools": {},
        "gpus": [],
        "driver_version": None,
        "driver_cuda": None,
        "cpu_count": 32,
        "memory_total_mib": 65536,
        "memory_available_mib": 60000,
    }


@pytest.mark.parametrize("release", ["2.6.0", "2.13.0"])
def test_max_jobs_counts_the_default_list_as_it_counts_the_same_list_named(release: str) -> None:
    facts = facts_from_dict(_no_gpu_machine())
    defaults = default_arches(release, "12.8")
    assert defaults is not None and not defaults.note
    unset = make_plan(PlanRequest(plan_options(cuda="12.8", pytorch_version=release)), facts, KNOWLEDGE)
    named = make_plan(
        PlanRequest(plan_options(cuda="12.8", pytorch_version=release, arch_list=defaults.arch_list)), facts, KNOWLEDGE
    )
    assert "TORCH_CUDA_ARCH_LIST" not in unset.final_env()
    assert unset.archs == named.archs == defaults.count > 1
    assert unset.final_env()["MAX_JOBS"] == named.final_env()["MAX_JOBS"]
    one = make_plan(PlanRequest(plan_options(cuda="12.8", pytorch_version=release, arch_list="9.0")), facts, KNOWLEDGE)
    assert int(one.final_env()["MAX_JOBS"]) > int(
        unset.final_env()["MAX_JOBS"]
    )  # the out-of-memory case MAX_JOBS is for
    assert any(
        f"its {defaults.count} default architectures for CUDA 12.8 ({defaults.arch_list}" in d for d in unset.decisions
    )
