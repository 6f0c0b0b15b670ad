"""A build acts on its plan's warnings as loudly as the dry run shows them (issue 27, point 13).

`invoke build-ext EXT --arch-list 8.0` on a machine whose only GPU is an H100 (compute capability 9.0) built an
extension that cannot run there ("no kernel image is available"), with no word: the plan had the warning, but
only a dry run printed it. This machine has no GPU, so the facts are this machine's own (its real CUDA 13.0 and
compilers) with the GPU of the H100 machine whose nvidia-smi output is in tests/fixtures/gpu (name and compute
capability as nvidia-smi reported them there). The extension's setup.py is real and runs.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support import plan_options

from pytorch_winbuild.builder.pipeline import ExtensionRequest, run_build_ext
from pytorch_winbuild.facts.model import Gpu
from pytorch_winbuild.facts.probe import probe
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.python_choice import PythonRequest
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = pytest.mark.build

H100 = Gpu(index=0, name="NVIDIA H100 80GB HBM3", compute_capability="9.0", memory_mib=81559)


def test_build_ext_prints_and_records_an_arch_list_that_misses_the_gpu(tmp_path: Path, capsys) -> None:
    facts = probe()
    assert facts.cuda_by_version("13.0") is not None, "the build tier needs CUDA 13.0 at /usr/local/cuda"
    facts = replace(facts, gpus=(H100,), driver_version="580.159.04", driver_cuda="13.0")
    options = plan_options(
        cuda="13.0",
        arch_list="8.0",
        compiler_cache="none",
        pytorch_version="2.13.0",
        build_venv=False,
        python=PythonRequest("path", sys.executable),
    )
    plan = make_plan(PlanRequest(options), facts, load_knowledge())
    expected = next(w for w in plan.warnings if "does not cover GPU 0 NVIDIA H100 80GB HBM3" in w)
    extension = tmp_path / "ext"
    extension.mkdir()
    (extension / "setup.py").write_text("print('built')\n", encoding="utf-8")
    record = run_build_ext(plan, ExtensionRequest(path=extension, cache_dir=tmp_path / "cache", log_dir=tmp_path))
    assert record.result == "success"
    assert f"warning: {expected}" in record.notes
    printed = " ".join(capsys.readouterr().out.split())
    assert "-- warning: --arch-list 8.0 does not cover GPU 0 NVIDIA H100 80GB HBM3 (compute capability 9.0)" in printed
