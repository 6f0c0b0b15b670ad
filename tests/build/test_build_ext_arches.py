"""After build-ext, the GPU code the built library holds is compared with the machine's GPUs (issue 27, point 15).

An extension built for the wrong GPU imports fine and fails at its first kernel launch ("no kernel image is
available"); build-ext now reads the library with cuobjdump and says so first, with the --arch-list to rebuild
with. The extension (fixtures/cuda_kernel) is a real one, built by torch's BuildExtension with this machine's
nvcc (CUDA 13.0) and read by a real cuobjdump. This machine has no GPU, so the facts are its own with the GPU of
the H100 machine whose nvidia-smi output is in tests/fixtures/gpu, as in test_build_ext_plan_warnings.py.
"""

from __future__ import annotations

import json
import shutil
import sys
import sysconfig
from dataclasses import replace
from pathlib import Path

import pytest
from build_support import FIXTURES, copy_fixture
from support import plan_options

from pytorch_winbuild.builder.built_arches import Holdings, check_built_archs, judge, parse_listing
from pytorch_winbuild.builder.pipeline import ExtensionRequest, run_build_ext
from pytorch_winbuild.builder.report import BuildRecord
from pytorch_winbuild.facts.model import Facts, Gpu
from pytorch_winbuild.facts.probe import probe
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.python_choice import PythonRequest
from pytorch_winbuild.planning.request import PlanRequest

H100 = Gpu(index=0, name="NVIDIA H100 80GB HBM3", compute_capability="9.0", memory_mib=81559)
ON_H100 = "GPU 0 NVIDIA H100 80GB HBM3 (compute capability 9.0)"
LIBRARY = f"winbuild_kernel{sysconfig.get_config_var('EXT_SUFFIX')}"


@pytest.fixture(scope="module")
def facts() -> Facts:
    found = probe()
    assert found.cuda_by_version("13.0") is not None, "the build tier needs CUDA 13.0 at /usr/local/cuda"
    return replace(found, gpus=(H100,), driver_version="580.159.04", driver_cuda="13.0")


def build(facts: Facts, folder: Path, arch_list: str) -> BuildRecord:
    """build-ext of fixtures/cuda_kernel for `arch_list` on the H100 machine's facts."""
    options = plan_options(
        cuda="13.0",
        arch_list=arch_list,
        compiler_cache="none",
        pytorch_version="2.13.0",
        build_venv=False,
        python=PythonRequest("path", sys.executable),
    )
    plan = make_plan(PlanRequest(options), facts, load_knowledge())
    source = copy_fixture("cuda_kernel", folder / "cuda_kernel")
    record = run_build_ext(plan, ExtensionRequest(path=source, cache_dir=folder / "cache", log_dir=folder))
    assert record.result == "success" and "check" in record.phases
    return record


def library_notes(record: BuildRecord) -> list[str]:
    return [note for note in record.notes if LIBRARY in note]


@pytest.mark.build
def test_a_library_built_for_another_gpu_is_a_warning_with_the_arch_list_to_rebuild_with(
    facts: Facts, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = build(facts, tmp_path, "8.0")
    warning = (
        f"warning: {LIBRARY} holds sm_80 (cubin), and none of it runs on {ON_H100}: its kernels would fail there "
        "with 'no kernel image is available for execution on the device'. Rebuild for the GPUs here with "
        "--arch-list 9.0 (TORCH_CUDA_ARCH_LIST=9.0)."
    )
    assert library_notes(record) == [warning]
    assert warning in json.loads(record.report.read_text(encoding="utf-8"))["notes"]
    assert f"-- {warning}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.build
@pytest.mark.parametrize(
    ("arch_list", "holds", "through"),
    [
        ("9.0", "sm_90 (cubin)", "sm_90"),
        # PTX for 8.0, which the driver compiles for the 9.0 GPU at first use (NVIDIA's PTX compatibility).
        ("8.0+PTX", "sm_80 (cubin), compute_80 (PTX)", "compute_80"),
    ],
)
def test_a_library_whose_code_runs_on_the_gpu_says_so_without_a_warning(
    facts: Facts, tmp_path: Path, arch_list: str, holds: str, through: str
) -> None:
    record = build(facts, tmp_path, arch_list)
    assert library_notes(record) == [f"{LIBRARY} holds {holds}: it runs on {ON_H100} through {through}."]


@pytest.mark.build
def test_a_cpu_extension_holds_no_cuda_code_and_is_no_warning(tmp_path: Path) -> None:
    """A real CPU extension module: CPython's own _json, copied into an extension's folder."""
    import _json

    folder = tmp_path / "cpu_ext"
    folder.mkdir()
    shutil.copy(_json.__file__, folder)
    name = Path(_json.__file__).name
    lines = check_built_archs(folder, [H100], "/usr/local/cuda", "linux")
    assert lines == [f"{name} holds no CUDA code (cuobjdump: no device code): no GPU architecture to check."]


LISTING = FIXTURES / "cuobjdump" / "list-elf-list-ptx.txt"  # real cuobjdump 13.5 output; its README says how made


def test_a_real_listing_gives_each_cubin_and_ptx_once_in_torchs_names() -> None:
    archs = parse_listing(LISTING.read_text(encoding="utf-8"))
    # ELF (cubin) entries are sm_XY; the PTX entry, named sm_90.ptx, holds compute_90; sm_100f is listed as sm_100.
    assert archs == ("sm_75", "sm_80", "sm_90a", "sm_100", "compute_90")


def test_the_listings_code_is_judged_by_nvidias_compatibility_rules() -> None:
    holdings = Holdings(Path("libkernels.so"), parse_listing(LISTING.read_text(encoding="utf-8")))
    held = "libkernels.so holds sm_75 (cubin), sm_80 (cubin), sm_90a (cubin), sm_100 (cubin), compute_90 (PTX)"
    rtx = Gpu(1, "NVIDIA GeForce RTX 5090", "12.0")  # sm_100 does not run on 12.0; compute_90 does, through the JIT
    v100 = Gpu(2, "Tesla V100-SXM2-16GB", "7.0")  # older than everything it holds
    assert judge(holdings, [H100, rtx, v100], "libkernels.so") == [
        f"{held}: it runs on {ON_H100} through sm_90a compute_90, GPU 1 NVIDIA GeForce RTX 5090 (compute capability "
        "12.0) through compute_90.",
        f"warning: {held}, and none of it runs on GPU 2 Tesla V100-SXM2-16GB (compute capability 7.0): its kernels "
        "would fail there with 'no kernel image is available for execution on the device'. Rebuild for the GPUs "
        'here with --arch-list "7.0;9.0;12.0" (TORCH_CUDA_ARCH_LIST=7.0;9.0;12.0).',
    ]
    assert judge(holdings, [], "libkernels.so") == [
        f"{held}; not compared with a GPU (there was no GPU on this machine)."
    ]
