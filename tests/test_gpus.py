"""GPUs: probe, architecture rules, the plan's arch list and driver checks, doctor.

Expected values come from outside the code: real nvidia-smi output captured on an H100 machine
(tests/fixtures/gpu), the real CUDA 13.0 nvcc at /usr/local/cuda, NVIDIA's compatibility rules
(CUDA C++ Programming Guide, "Binary Compatibility" / "PTX Compatibility"; CUDA Toolkit release
notes, Tables 2 and 3) and PyTorch's torch/utils/cpp_extension.py `named_arches`.

Test doubles, and why (docs/test-doubles.md lists every double of the suite): this machine and
CI have no NVIDIA driver, so nvidia-smi cannot run and NVML has no GPU to report. nvidia-smi is
replaced by a runner that answers with the real output captured on the H100 machine; NVML's
success path by a module with pynvml's function names returning that machine's values. Both are
checked against the captured files (nvidia-smi-query.csv, nvidia-smi-q.xml), so neither can drift
from what the machine printed. NVML's "no driver" path runs for real.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import types
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from support import HOSTS_DIR, plan_options, run_invoke

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.faces.doctor import doctor_checks
from pytorch_winbuild.facts.model import Gpu, facts_from_dict, load_facts
from pytorch_winbuild.facts.probe_common import CommandResult, Commands
from pytorch_winbuild.facts.probe_gpu import (
    GpuProbe,
    NvmlUnavailable,
    cuda_from_driver_int,
    parse_smi_header_cuda,
    read_nvml,
)
from pytorch_winbuild.knowledge.arch_list import Arch, NameTable, covers, default_for_gpus, expand_arch_list
from pytorch_winbuild.knowledge.choices import parse_arch_request
from pytorch_winbuild.knowledge.default_arches import default_arches
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.request import PlanRequest

FIXTURES = Path(__file__).parent / "fixtures" / "gpu"
NVCC = Path("/usr/local/cuda/bin/nvcc")
KNOWLEDGE = load_knowledge()


def parse_arch_list(text: str, names: NameTable) -> tuple[Arch, ...]:
    """--arch-list as the edge reads it (names checked against every release's) and a plan expands it (`names`)."""
    return expand_arch_list(parse_arch_request(text, KNOWLEDGE.gpu.any_release()).entries, names)


H100 = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "memory_mib": 81559}
GTX1080 = {"index": 0, "name": "NVIDIA GeForce GTX 1080", "compute_capability": "6.1", "memory_mib": 8192}


def linux_facts(
    gpus: list[dict] | None, driver: str | None, driver_cuda: str | None, cuda: tuple[str, ...] = ("13.0",)
) -> dict:
    return {
        "schema": 2,
        "os": "linux",
        "python": {"version": "3.12.3", "bits": 64, "executable": "/usr/bin/python3"},
        "cuda": [{"version": v, "path": f"/usr/local/cuda-{v}", "cudnn": "9.1.0"} for v in cuda],
        "tools": {
            "cmake": {"path": "/usr/bin/cmake", "version": "3.31.0"},
            "ninja": {"path": "/usr/bin/ninja", "version": "1.12.1"},
        },
        "gpus": gpus,
        "driver_version": driver,
        "driver_cuda": driver_cuda,
    }


def plan(facts: dict, cuda: str = "auto", **options):
    return make_plan(
        PlanRequest(plan_options(cuda=cuda, pytorch_version=options.pop("pytorch_version", "2.9.0"), **options)),
        facts_from_dict(facts),
        KNOWLEDGE,
    )


# ---------------------------------------------------------------- probe


# What the H100 machine's NVML reports, as nvidia-smi -q -x printed it there (checked below against
# tests/fixtures/gpu/nvidia-smi-q.xml): driver, CUDA driver version (1000 * major + 10 * minor), name, MiB.
H100_NVML = {"driver": "580.159.04", "cuda_int": 13000, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
# The query rows as `nvidia-smi --format=csv,noheader,nounits` gives them on that machine (checked below
# against the captured --format=csv output, which has a header and units).
SMI_ROW_WITH_CAP = "0, NVIDIA H100 80GB HBM3, 9.0, 580.159.04, 81559"
SMI_ROW_OLD_DRIVER = "0, NVIDIA H100 80GB HBM3, 580.159.04, 81559"


# Kept double: nvidia-smi needs an NVIDIA driver and GPU, which neither this machine nor CI has.
class CapturedSmi:
    """nvidia-smi as the H100 machine answered (the query without units, the banner as printed)."""

    def __init__(self, old_driver: bool = False) -> None:
        self.old_driver = old_driver
        self.calls: list[list[str]] = []

    def __call__(self, args, timeout):
        self.calls.append(list(args))
        if len(args) == 1:
            return CommandResult(0, (FIXTURES / "nvidia-smi.txt").read_text(encoding="utf-8"))
        query = args[1]
        if "compute_cap" in query and self.old_driver:
            # The form drivers before the field existed use for an unknown query field.
            return CommandResult(2, 'Field "compute_cap" is not a valid field to query.\n\n')
        row = SMI_ROW_WITH_CAP if "compute_cap" in query else SMI_ROW_OLD_DRIVER
        return CommandResult(0, row + "\n")


def test_the_nvidia_smi_stand_in_answers_what_the_machine_printed():
    """The stand-in's rows against the captured CSV (same GPU, capability, driver, memory without " MiB")."""
    with (FIXTURES / "nvidia-smi-query.csv").open(encoding="utf-8", newline="") as file:
        (captured,) = [{key.strip(): value.strip() for key, value in row.items()} for row in csv.DictReader(file)]
    memory = captured["memory.total [MiB]"].removesuffix(" MiB")
    fields = (captured["index"], captured["name"], captured["compute_cap"], captured["driver_version"], memory)
    assert ", ".join(fields) == SMI_ROW_WITH_CAP
    assert ", ".join(fields[:2] + fields[3:]) == SMI_ROW_OLD_DRIVER
    assert CapturedSmi()(["nvidia-smi"], 5).stdout == (FIXTURES / "nvidia-smi.txt").read_text(encoding="utf-8")


def test_the_nvml_stand_in_answers_what_the_machine_printed():
    """H100_NVML against nvidia-smi -q -x of the same machine (NVML is what nvidia-smi reads)."""
    log = ElementTree.parse(FIXTURES / "nvidia-smi-q.xml").getroot()
    (gpu,) = log.findall("gpu")
    major, minor = log.findtext("cuda_version").split(".")
    assert {
        "driver": log.findtext("driver_version"),
        "cuda_int": 1000 * int(major) + 10 * int(minor),
        "name": gpu.findtext("product_name"),
        "memory_mib": int(gpu.findtext("fb_memory_usage/total").removesuffix(" MiB")),
    } == H100_NVML


def test_nvidia_smi_fixtures_parse_as_the_machine_printed_them():
    from pytorch_winbuild.facts.probe_gpu import gpus_from_smi_rows, parse_smi_query

    fields = ["index", "name", "compute_cap", "driver_version", "memory.total", "uuid", "pci.bus_id"]
    rows = parse_smi_query((FIXTURES / "nvidia-smi-query.csv").read_text(encoding="utf-8"), fields)
    assert gpus_from_smi_rows(rows) == (Gpu(0, "NVIDIA H100 80GB HBM3", "9.0", 81559),)
    assert rows[0]["driver_version"] == "580.159.04"
    assert parse_smi_header_cuda((FIXTURES / "nvidia-smi.txt").read_text(encoding="utf-8")) == "13.0"


def test_probe_falls_back_to_nvidia_smi_when_nvml_is_absent(tmp_path: Path):
    """The real pynvml, which finds no libnvidia-ml here (as on CI), then nvidia-smi's captured answers."""
    runner = CapturedSmi()
    notes: list[str] = []
    with Commands(runner) as commands:
        answer = GpuProbe(read_nvml, tmp_path / "nvidia-smi", commands).result(notes)
    assert answer.gpus == (Gpu(0, "NVIDIA H100 80GB HBM3", "9.0", 81559),)
    assert (answer.driver_version, answer.driver_cuda, answer.source) == ("580.159.04", "13.0", "nvidia-smi")
    assert notes == []


def test_a_driver_without_compute_cap_still_gives_the_gpus_and_a_note(tmp_path: Path):
    runner = CapturedSmi(old_driver=True)
    notes: list[str] = []
    with Commands(runner) as commands:
        answer = GpuProbe(None, tmp_path / "nvidia-smi", commands).result(notes)
    assert answer.gpus == (Gpu(0, "NVIDIA H100 80GB HBM3", None, 81559),)
    assert any("compute_cap" not in call[1] for call in runner.calls if len(call) > 1)
    assert "does not report compute capabilities" in notes[0] and "--arch-list" in notes[0]


def test_no_driver_is_an_empty_list_without_a_note():
    notes: list[str] = []
    with Commands(CapturedSmi()) as commands:
        answer = GpuProbe(read_nvml, None, commands).result(notes)
    assert answer.gpus == () and notes == []


def test_real_nvml_on_a_machine_without_a_driver_says_the_library_is_absent():
    """pynvml (nvidia-ml-py) for real: no libnvidia-ml here, as on CI."""
    with pytest.raises(NvmlUnavailable) as error:
        read_nvml()
    assert error.value.absent and "Library Not Found" in str(error.value)


def test_nvml_answer_is_read_field_by_field(monkeypatch: pytest.MonkeyPatch):
    """pynvml's API with the H100 machine's values (nvidia-smi -q: 580.159.04, CUDA 13.0, 81559 MiB)."""
    import pynvml

    # Kept double: NVML needs an NVIDIA driver and a GPU; this machine and CI have neither.
    fake = types.SimpleNamespace(
        NVMLError=pynvml.NVMLError,
        NVML_ERROR_LIBRARY_NOT_FOUND=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: H100_NVML["driver"],
        nvmlSystemGetCudaDriverVersion_v2=lambda: H100_NVML["cuda_int"],
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: H100_NVML["name"].encode() + b"\x1b[2J",
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),  # compute_cap in nvidia-smi-query.csv
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=H100_NVML["memory_mib"] * 1024 * 1024),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    answer = read_nvml()
    assert answer.gpus == (
        Gpu(0, "NVIDIA H100 80GB HBM3[2J", "9.0", 81559),
    )  # the escape character never reaches a fact
    assert (answer.driver_version, answer.driver_cuda) == ("580.159.04", "13.0")


@pytest.mark.parametrize(("value", "cuda"), [(13000, "13.0"), (11040, "11.4"), (12080, "12.8"), (10010, "10.1")])
def test_the_driver_integer_is_1000_major_plus_10_minor(value: int, cuda: str):
    """NVML nvmlSystemGetCudaDriverVersion and cudaDriverGetVersion: 1000 * major + 10 * minor."""
    assert cuda_from_driver_int(value) == cuda


# ---------------------------------------------------------------- facts


def test_schema_1_files_load_with_gpus_unknown_and_schema_2_round_trips():
    old = facts_from_dict({"schema": 1, "os": "linux", "python": {"version": "3.12.3", "bits": 64, "executable": "py"}})
    assert old.gpus is None
    new = facts_from_dict(linux_facts([H100], "580.159.04", "13.0"))
    assert facts_from_dict(__import__("json").loads(new.to_json())) == new


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"gpus": [{"index": 0, "name": "x", "compute_capability": "9"}]},
            "gpus[0].compute_capability: expected MAJOR.MINOR",
        ),
        ({"gpus": [{"index": -1, "name": "x"}]}, "expected a GPU number from 0 to 65535, got -1"),
        ({"driver_version": "latest"}, "driver_version: expected an NVIDIA driver version"),
        ({"driver_cuda": "13"}, "driver_cuda: expected MAJOR.MINOR"),
        ({"gpus": "H100"}, "gpus: expected list"),
    ],
)
def test_bad_gpu_facts_name_the_key(change: dict, message: str):
    with pytest.raises(ConfigurationError) as error:
        facts_from_dict({**linux_facts([H100], "580.159.04", "13.0"), **change}, "f.json")
    assert message in error.value.paragraph()


# ---------------------------------------------------------------- architecture rules


@pytest.mark.parametrize(
    ("entry", "gpu", "runs"),
    [
        # A cubin for X.y runs on X.z, z >= y (Binary Compatibility).
        (Arch(8, 0), "8.6", True),
        (Arch(8, 6), "8.0", False),
        (Arch(8, 0), "9.0", False),
        # PTX for X.Y is JIT-compiled for any GPU of X.Y or newer (PTX Compatibility).
        (Arch(8, 0, ptx=True), "9.0", True),
        (Arch(9, 0, ptx=True), "12.0", True),
        (Arch(9, 0, ptx=True), "8.9", False),
        # Architecture-specific code (sm_90a) runs on that GPU only.
        (Arch(9, 0, "a"), "9.0", True),
        (Arch(9, 0, "a", ptx=True), "10.0", False),
        # Family-specific code (sm_100f) runs on the family: same major, same or higher minor.
        (Arch(10, 0, "f"), "10.3", True),
        (Arch(10, 0, "f"), "12.0", False),
    ],
)
def test_nvidia_compatibility_rules(entry: Arch, gpu: str, runs: bool):
    assert entry.runs_on(gpu) is runs


def test_pytorch_names_expand_as_cpp_extension_expands_them():
    """v2.9.0 torch/utils/cpp_extension.py lines 2400 and 2402 (named_arches): Ampere = '8.0;8.6+PTX',
    Hopper = '9.0+PTX'; spaces read as ';' (line 2450's replace(' ', ';'))."""
    names = KNOWLEDGE.gpu.names_for("2.9.0", "cpp_extension")
    entries = parse_arch_list("Ampere Hopper;7.5", names)
    assert [str(e) for e in entries] == ["8.0", "8.6+PTX", "9.0+PTX", "7.5"]
    assert covers(entries, "8.9") and not covers(parse_arch_list("7.5", names), "8.0")


@pytest.mark.parametrize("bad", ["sm_61", "Amperee", "9", "6.1+ptx", "8.6;;x", ""])
def test_malformed_entries_are_refused(bad: str):
    with pytest.raises(ConfigurationError):
        parse_arch_list(bad, KNOWLEDGE.gpu.any_release())


def test_a_gpu_newer_than_the_cuda_gets_ptx_and_an_older_one_nothing():
    entries, notes = default_for_gpus(["12.0", "5.2", "8.6"], KNOWLEDGE.cuda["12.4"].sm)
    assert [str(e) for e in entries] == ["5.2", "8.6", "9.0+PTX"]
    assert "12.0 is newer" in notes[0]
    entries, notes = default_for_gpus(["6.1"], KNOWLEDGE.cuda["13.0"].sm)
    assert entries == () and "cannot be built by this CUDA" in notes[0]


def test_a_desktop_gpu_newer_than_the_cuda_never_gets_a_tegra_cubin():
    """CUDA 11.6 builds up to 8.7, which is Orin (Jetson). NVIDIA's CUDA C++ Programming Guide, "Binary
    Compatibility": cubin compatibility holds for desktop GPUs only, not between desktop and Tegra. So an
    RTX 4090 (8.9) gets 8.6+PTX, whose sm_86 cubin runs on it natively, not 8.7+PTX (PTX only: JIT at start)."""
    entries, notes = default_for_gpus(["8.9"], KNOWLEDGE.cuda["11.6"].sm)
    assert [str(e) for e in entries] == ["8.6+PTX"]
    assert "runs on it natively" in notes[0]
    entries, notes = default_for_gpus(["9.0"], KNOWLEDGE.cuda["11.6"].sm)  # no 9.x cubin: PTX it is
    assert [str(e) for e in entries] == ["8.6+PTX"] and "compiled by the driver" in notes[0]
    assert not Arch(8, 7).runs_on("8.9") and not Arch(5, 0).runs_on("5.3") and not Arch(8, 6).runs_on("8.7")
    assert Arch(8, 7).runs_on("8.7") and Arch(8, 6).runs_on("8.9") and Arch(8, 7, ptx=True).runs_on("8.9")


@pytest.mark.build
def test_cuda_13_table_is_what_the_real_nvcc_lists():
    listed = subprocess.run([str(NVCC), "--list-gpu-code"], capture_output=True, text=True, check=True).stdout.split()
    from_nvcc = sorted(f"{int(code[3:]) // 10}.{int(code[3:]) % 10}" for code in listed)
    assert sorted(KNOWLEDGE.cuda["13.0"].sm) == from_nvcc


@pytest.mark.build
def test_cuda_13_specific_variants_are_what_the_real_nvcc_compiles(tmp_path: Path):
    """Every a/f variant of the table compiles; the same suffix on another capability is refused."""
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n", encoding="utf-8")
    release = KNOWLEDGE.cuda["13.0"]

    def compiles(*codes: str) -> subprocess.CompletedProcess[str]:
        gencodes = [f"-gencode=arch=compute_{code},code=sm_{code}" for code in codes]
        return subprocess.run(
            [str(NVCC), "-c", str(source), "-o", str(tmp_path / "k.o"), *gencodes], capture_output=True, text=True
        )

    digits = {c: c.replace(".", "") for c in release.sm}
    # One nvcc for all of them (one host compile instead of one per variant): it fails if any one is refused.
    table = [digits[c] + "a" for c in release.arch_specific] + [digits[c] + "f" for c in release.family_specific]
    every = compiles(*table)
    assert every.returncode == 0, every.stderr
    assert compiles("86a").returncode != 0 and compiles("90f").returncode != 0


# ---------------------------------------------------------------- the plan


def test_default_arch_list_is_the_machines_gpus():
    result = plan(linux_facts([H100], "580.159.04", "13.0"), "13.0")
    assert result.final_env()["TORCH_CUDA_ARCH_LIST"] == "9.0"
    reason = next(c.reason for c in result.changes if c.name == "TORCH_CUDA_ARCH_LIST")
    # Unset, PyTorch's CMake would fall back to its default list (build_config/default_arches.toml), said with it.
    defaults = default_arches("2.9.0", "13.0")
    assert defaults is not None and defaults.note  # 2.9.0's own file was not read: the nearest table, and it says so
    assert "NVIDIA H100 80GB HBM3 (9.0)" in reason
    assert f"its {defaults.count} default architectures for CUDA 13.0 ({defaults.arch_list}" in reason
    assert defaults.note in reason
    assert result.archs == 1  # the list set: one architecture per compile job


def test_unknown_gpus_leave_the_arch_list_to_pytorch_and_say_so():
    result = plan(linux_facts([], None, None), "13.0")
    assert "TORCH_CUDA_ARCH_LIST" not in result.final_env()
    assert any("no GPU was found" in d for d in result.decisions)


def test_arch_list_nvcc_would_refuse_exits_2_before_the_build(tmp_path: Path):
    """The fix offers what plans on that machine (issue 38): the H100's 9.0, which CUDA 13.0 compiles; not CUDA
    12.9, the newest CUDA that compiles 5.0, which the machine does not have. With 12.9 installed, it offers it."""
    host = tmp_path / "h100.json"

    def build(cuda: str, arch_list: str) -> subprocess.CompletedProcess[str]:
        flags = ("--cuda", cuda, "--arch-list", arch_list, "--pytorch-version", "2.9.0", "--dry-run")
        return run_invoke("build", "--host", str(host), *flags)

    host.write_text(json.dumps(linux_facts([H100], "580.159.04", "13.0")), encoding="utf-8")
    result = build("13.0", "5.0")
    assert result.returncode == 2, result.stderr
    assert "does not compile for 5.0" in result.stderr and "Traceback" not in result.stderr
    assert "--arch-list 9.0" in result.stderr and "--cuda 12.9" not in result.stderr
    assert build("13.0", "9.0").returncode == 0  # the fix, followed
    host.write_text(json.dumps(linux_facts([H100], "580.159.04", "13.0", ("13.0", "12.9"))), encoding="utf-8")
    offered = build("13.0", "5.0")
    assert "--cuda 12.9 (the newest CUDA that compiles 5.0)" in offered.stderr, offered.stderr
    assert build("12.9", "5.0").returncode == 0


def test_arch_list_that_misses_a_gpu_warns():
    result = plan(linux_facts([H100], "580.159.04", "13.0"), "13.0", arch_list="8.6")
    assert any("does not cover GPU 0 NVIDIA H100" in w for w in result.warnings)


def test_cuda_that_cannot_build_for_the_only_gpu_is_refused_and_auto_skips_it():
    facts = linux_facts([GTX1080], "580.159.04", "13.0", cuda=("12.8", "13.0"))
    with pytest.raises(ToolchainError) as error:
        plan(facts, "13.0")
    assert "cannot build for any GPU" in error.value.paragraph()
    auto = plan(facts, "auto")
    assert auto.cuda is not None and auto.cuda.version == "12.8"
    assert auto.final_env()["TORCH_CUDA_ARCH_LIST"] == "6.1"


def test_cuda_newer_than_the_driver_is_refused_with_the_driver_to_install():
    """CUDA 13.0 needs driver 580.65.06 on Linux (CUDA Toolkit release notes, Table 3)."""
    facts = linux_facts([H100], "535.183.01", "12.2", cuda=("12.1", "13.0"))
    with pytest.raises(ToolchainError) as error:
        plan(facts, "13.0")
    assert "runs CUDA up to 12.2" in error.value.paragraph() and "580.65.06" in error.value.paragraph()
    assert plan(facts, "auto").cuda.version == "12.1"


def test_a_newer_minor_release_runs_through_minor_version_compatibility_with_a_warning():
    result = plan(linux_facts([H100], "550.54.14", "12.4", cuda=("12.8",)), "12.8")
    assert any("minor version compatibility" in w and "525.60.13" in w for w in result.warnings)


def test_driver_cuda_comes_from_the_driver_table_when_the_driver_does_not_say():
    """Driver 398.82 on Windows runs CUDA 9.2 (Table 3: 9.2 needs >= 397.44, 10.0 >= 411.31)."""
    from pytorch_winbuild.planning.gpu_plan import driver_cuda

    facts = load_facts(HOSTS_DIR / "vs2015-vs2017-cuda80-cuda90.json")
    assert driver_cuda(KNOWLEDGE, facts.__class__(**{**facts.__dict__, "driver_cuda": None})) == "9.2"


@pytest.mark.parametrize("host", ["vs2017-cuda90-cuda100", "vs2019-vs2022-cuda12"])
def test_shipped_hosts_plan_for_their_gpu(host: str):
    facts = load_facts(HOSTS_DIR / f"{host}.json")
    for cuda in facts.cuda:
        version = {"vs2017-cuda90-cuda100": "1.0.1", "vs2019-vs2022-cuda12": "2.6.0"}[host]
        result = make_plan(PlanRequest(plan_options(cuda=cuda.version, pytorch_version=version)), facts, KNOWLEDGE)
        assert result.final_env()["TORCH_CUDA_ARCH_LIST"] == facts.gpus[0].compute_capability


# ---------------------------------------------------------------- doctor


def test_doctor_lists_the_gpu_and_the_driver():
    checks = {c.topic: c for c in doctor_checks(load_facts(HOSTS_DIR / "vs2019-vs2022-cuda12.json"), KNOWLEDGE)}
    assert "runs CUDA up to 12.8" in checks["NVIDIA driver"].detail
    assert checks["GPU 0"].detail.startswith("NVIDIA GeForce RTX 4090, compute capability 8.9")


def test_doctor_says_why_there_is_no_gpu():
    checks = {c.topic: c for c in doctor_checks(load_facts(HOSTS_DIR / "cpu-only.json"), KNOWLEDGE)}
    assert "no NVIDIA GPU or driver found" in checks["GPU"].detail
    checks = {
        c.topic: c for c in doctor_checks(facts_from_dict(linux_facts([GTX1080], "580.159.04", "13.0")), KNOWLEDGE)
    }
    assert checks["GPU 0"].status == "warning" and "CUDA 13.0 cannot build for it" in checks["GPU 0"].detail


def test_a_nightly_entry_with_an_arch_list_its_nvcc_refuses_fails_at_load():
    import tomllib

    from pytorch_winbuild.nightly.matrix import parse_matrix

    data = tomllib.loads((HOSTS_DIR.parent / "nightly.toml").read_text(encoding="utf-8"))
    data["entry"][0].update(cuda="13.0", arch_list="5.0")
    with pytest.raises(ConfigurationError) as error:
        parse_matrix(data, "nightly.toml", KNOWLEDGE)
    assert "arch_list = '5.0': CUDA 13.0's nvcc does not compile for 5.0" in error.value.paragraph()
