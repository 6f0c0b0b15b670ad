"""`invoke diagnose` of a "no kernel image" failure names this machine's GPU and the exact --arch-list (issue 27,
point 14), instead of only the rule's generic example (6.1).

Kept double: nvidia-smi needs an NVIDIA driver and GPU, which neither this machine nor CI has. The stand-in on
PATH answers the probe's query with the row the H100 machine printed (tests/fixtures/gpu: name, compute
capability 9.0, driver, memory) and its banner; NVML has no driver here, so the probe asks nvidia-smi.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import run_invoke

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"
ROW = "0, NVIDIA H100 80GB HBM3, 9.0, 580.159.04, 81559"  # tests/fixtures/gpu/nvidia-smi-query.csv's first GPU
LOG = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 3, in <module>\n'
    "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
)


@pytest.fixture
def h100_on_path(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    banner = FIXTURES / "nvidia-smi.txt"
    smi.write_text(f"#!/bin/sh\nif [ $# -eq 0 ]; then cat '{banner}'; else echo '{ROW}'; fi\n", encoding="utf-8")
    smi.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_the_fix_names_this_machines_gpu_and_its_arch_list(tmp_path: Path, h100_on_path: dict[str, str]) -> None:
    log = tmp_path / "run.log"
    log.write_text(LOG, encoding="utf-8")
    done = run_invoke("diagnose", str(log), env=h100_on_path, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[no-kernel-image]" in done.stdout
    text = " ".join(done.stdout.split())
    assert (
        "On this machine: GPU 0 NVIDIA H100 80GB HBM3 (compute capability 9.0). Build for it with --arch-list 9.0."
        in text
    )
    data = json.loads(run_invoke("diagnose", str(log), "--json", env=h100_on_path, cwd=tmp_path).stdout)
    assert data["this_machine"]["arch_list"] == "9.0"
    assert data["this_machine"]["gpus"] == [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}]


def test_without_a_gpu_it_says_so_and_other_rules_do_not_probe(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(LOG, encoding="utf-8")
    done = run_invoke("diagnose", str(log), cwd=tmp_path)
    assert done.returncode == 0 and "On this machine: no NVIDIA GPU was found" in done.stdout
    other = tmp_path / "other.log"
    other.write_text("LINK : fatal error LNK1104: cannot open file 'mkl_intel_lp64.lib'\n", encoding="utf-8")
    quiet = run_invoke("diagnose", str(other), cwd=tmp_path)
    assert quiet.returncode == 0 and "On this machine" not in quiet.stdout
