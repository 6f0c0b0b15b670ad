"""Builds that fit the machine: memory in the facts, MAX_JOBS from memory, and the preflight.

Expected MAX_JOBS values are computed here from the cited figures of build_config/resources.toml
(read with tomllib, not through the code under test), so a change of figure changes the
expectation and a change of arithmetic in the code does not hide.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import tomllib
from pathlib import Path

import pytest
from support import HOSTS_DIR, plan_options

from pytorch_winbuild.builder.preflight import (
    GIB,
    DiskNeed,
    check_disk,
    checkout_needs,
    decide_disk,
    decide_memory,
    disk_needs,
    folder_size,
)
from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.model import Facts, facts_from_dict, load_facts
from pytorch_winbuild.knowledge.config_files import config_dir
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.jobs import JobMemory
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.request import PlanRequest

KNOWLEDGE = load_knowledge()
FIGURES = tomllib.loads((config_dir() / "resources.toml").read_text(encoding="utf-8"))
MEMORY = FIGURES["memory"]
CUDA12 = "vs2019-vs2022-cuda12"  # builds PyTorch 2.x (a FlashAttention era) with CUDA 12


def _host(name: str, cores: int | None, available_gib: float | None) -> Facts:
    facts = load_facts(HOSTS_DIR / f"{name}.json")
    available = None if available_gib is None else int(available_gib * 1024)
    return dataclasses.replace(facts, cpu_count=cores, memory_available_mib=available)


def _plan(facts: Facts, cuda: str, version: str = "2.13.0", **options: object) -> Plan:
    return make_plan(PlanRequest(plan_options(cuda=cuda, pytorch_version=version, **options)), facts, KNOWLEDGE)  # type: ignore[arg-type]


# ---------------------------------------------------------------- facts


def test_old_schemas_load_with_memory_unknown_and_schema_3_round_trips() -> None:
    base = {"os": "windows", "python": {"version": "3.12.3", "bits": 64, "executable": "py"}}
    for schema in (1, 2):
        old = facts_from_dict({"schema": schema, **base})
        assert (old.memory_total_mib, old.memory_available_mib, old.swap_total_mib) == (None, None, None)
    new = facts_from_dict(
        {"schema": 3, **base, "memory_total_mib": 16000, "memory_available_mib": 9000, "swap_total_mib": 2048}
    )
    assert facts_from_dict(json.loads(new.to_json())) == new
    assert (new.memory_total_mib, new.memory_available_mib, new.swap_total_mib) == (16000, 9000, 2048)


@pytest.mark.parametrize("value", [-1, True, "16 GB", 1.5])
def test_a_bad_memory_value_names_the_key(value: object) -> None:
    with pytest.raises(ConfigurationError, match="memory_available_mib"):
        facts_from_dict(
            {
                "schema": 3,
                "os": "linux",
                "python": {"version": "3.12.3", "bits": 64, "executable": "py"},
                "memory_available_mib": value,
            }
        )


def test_every_shipped_host_records_memory() -> None:
    for path in sorted(HOSTS_DIR.glob("*.json")):
        facts = load_facts(path)
        assert facts.memory_total_mib and facts.memory_available_mib and facts.swap_total_mib is not None, path
        assert facts.memory_available_mib <= facts.memory_total_mib, path


# ---------------------------------------------------------------- MAX_JOBS


@pytest.mark.parametrize(("cores", "available_gib"), [(64, 16), (64, 128), (8, 64), (32, 47.8), (16, 5.9), (64, 3)])
def test_cuda_max_jobs_is_the_smaller_of_cores_and_memory(cores: int, available_gib: float) -> None:
    facts = _host(CUDA12, cores, available_gib)
    plan = _plan(facts, "12.8", arch_list="8.6")
    per_job = MEMORY["cuda_job_flash"]["gib"]  # one architecture, a FlashAttention era
    expected = max(1, min(cores, math.floor(int(available_gib * 1024) / 1024 / per_job)))
    env = plan.final_env()
    assert env["MAX_JOBS"] == str(expected)
    decision = next(d for d in plan.decisions if d.startswith("MAX_JOBS"))
    assert f"/ {per_job:g} GiB per CUDA job" in decision and f"→ {expected} job" in decision
    assert f"(cores: {cores})" in decision and "pytorch/pytorch#124018" in decision
    if cores == 64 and available_gib == 16:
        assert expected == 2  # 64 cores / 16 GB must not give 64
    assert any("less than one CUDA job" in w for w in plan.warnings) == (available_gib < per_job)


def test_more_architectures_take_more_memory_per_job() -> None:
    facts = _host(CUDA12, 64, 40)
    plan = _plan(facts, "12.8", arch_list="7.5;8.0;8.6;8.9")
    per_job = MEMORY["cuda_job_flash"]["gib"] + 3 * MEMORY["cuda_extra_arch"]["gib"]
    assert plan.final_env()["MAX_JOBS"] == str(math.floor(40 / per_job))
    assert any(f"/ {per_job:g} GiB per CUDA job (4 architectures" in d for d in plan.decisions)


def test_cpu_only_and_older_eras_use_their_own_figures() -> None:
    cpu = _plan(_host("cpu-only", 64, 16), "cpu")
    assert cpu.final_env()["MAX_JOBS"] == str(math.floor(16 / MEMORY["cpp_job"]["gib"]))
    assert any("per C++ job" in d and "estimate" in d for d in cpu.decisions)
    old = _plan(_host("vs2017-cuda90-cuda100", 64, 16), "10.0", version="1.0.1", arch_list="6.1")
    assert old.era.name not in MEMORY["cuda_job_flash"]["eras"]
    assert old.final_env()["MAX_JOBS"] == str(math.floor(16 / MEMORY["cuda_job"]["gib"]))


def test_jobs_flag_wins_over_memory() -> None:
    plan = _plan(_host(CUDA12, 64, 16), "12.8", arch_list="8.6", jobs=12)
    assert plan.final_env()["MAX_JOBS"] == "12"
    assert not any(d.startswith("MAX_JOBS") for d in plan.decisions)


def test_facts_without_memory_keep_pytorchs_default_with_a_note() -> None:
    plan = _plan(_host(CUDA12, 64, None), "12.8", arch_list="8.6")
    assert "MAX_JOBS" not in plan.final_env()
    assert any("MAX_JOBS: not set" in d and "--jobs" in d for d in plan.decisions)


# ---------------------------------------------------------------- preflight: disk


def _need(folder: Path, gib: float, estimate: bool) -> DiskNeed:
    return DiskNeed("test need", folder, gib, estimate, "a test figure")


def test_disk_decision_against_the_real_free_space_of_a_folder(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free / GIB
    assert decide_disk(free, [_need(tmp_path, free / 2, False)], tmp_path) is None
    assert check_disk([_need(tmp_path, free / 2, False), _need(tmp_path / "not-yet", free / 4, True)]) == []
    # an estimate above the free space warns, with the numbers
    warnings = check_disk([_need(tmp_path, free / 2, False), _need(tmp_path, free, True)])
    assert len(warnings) == 1 and f"{free:.1f} GiB free" in warnings[0] and "estimate" in warnings[0]
    # a documented figure above it refuses: exit 3 and the fix
    with pytest.raises(ToolchainError) as refused:
        check_disk([_need(tmp_path / "deep" / "folder", free + 1, False)])
    assert refused.value.exit_code == 3
    assert f"{free + 1:.1f} GiB" in refused.value.message and "free space" in (refused.value.fix or "")


def test_disk_needs_of_a_configuration(tmp_path: Path) -> None:
    plan = _plan(_host(CUDA12, 32, 40), "12.8", arch_list="8.6")
    assert plan.compiler_cache == "sccache"
    cache_dir = tmp_path / "cache"
    (cache_dir / "sccache").mkdir(parents=True)
    (cache_dir / "sccache" / "object").write_bytes(b"x" * 4096)
    needs = disk_needs(plan, KNOWLEDGE, tmp_path / "src", cache_dir)
    by_what = {need.what.split(" (")[0]: need for need in needs}
    assert by_what["build folder of a CUDA build"].gib == FIGURES["disk"]["build_cuda"]["gib"]
    cache = by_what["sccache cache"]
    assert cache.gib == pytest.approx(FIGURES["disk"]["compiler_cache"]["sccache"]["gib"] - 4096 / GIB)
    assert not cache.estimate and "10G" in cache.source
    (tmp_path / "src" / "build").mkdir(parents=True)  # a build folder to build on: no new one
    assert [n.what for n in disk_needs(plan, KNOWLEDGE, tmp_path / "src", cache_dir)] == [cache.what]
    assert folder_size(cache_dir) == 4096 and folder_size(tmp_path / "missing") == 0


def test_a_clone_to_come_is_checked_before_it_starts(tmp_path: Path) -> None:
    destination = tmp_path / "src" / "pytorch"
    (need,) = checkout_needs(destination, KNOWLEDGE)
    assert need.gib == FIGURES["disk"]["checkout"]["gib"] and need.estimate == FIGURES["disk"]["checkout"]["estimate"]
    assert need.folder == destination  # its drive is the one checked: the clone's, not the cache's
    destination.mkdir(parents=True)
    assert checkout_needs(destination, KNOWLEDGE) == []  # an existing clone is fetched, not cloned again


# ---------------------------------------------------------------- preflight: memory


def test_memory_for_one_job() -> None:
    documented = JobMemory(6.0, "CUDA job", "a report", estimate=False)
    guessed = JobMemory(2.0, "C++ job", "a guess", estimate=True)
    assert decide_memory(8 * 1024, documented) is None and decide_memory(None, documented) is None
    with pytest.raises(ToolchainError) as refused:
        decide_memory(3 * 1024, documented)
    assert refused.value.exit_code == 3 and "3.0 GiB" in refused.value.message and "6 GiB" in refused.value.message
    warning = decide_memory(1024, guessed)
    assert warning is not None and "1.0 GiB" in warning and "estimate" in warning
