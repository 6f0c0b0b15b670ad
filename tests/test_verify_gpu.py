"""verify.py's GPU check: which of a build's CUDA architectures run on a GPU, and the kernel run.

The coverage rules are NVIDIA's (CUDA C++ Programming Guide):
- "Binary Compatibility": a cubin generated for compute capability X.y only executes on devices
  of compute capability X.z where z >= y (never across major versions, never to an older minor).
- "PTX Compatibility": PTX for a compute capability can always be compiled (by the driver, JIT)
  to binary code of greater or equal compute capability.
- CUDA 12.9's "Feature Availability": architecture-specific targets ('a' suffix, sm_90a) run only
  on exactly that compute capability; family-specific ones ('f' suffix, sm_100f) on the same
  major version with an equal or higher minor.

The kernel part needs a GPU, which neither this machine nor CI has: it runs here against a stand-in
torch (real CPU tensors, a fake torch.cuda) and for real on a GPU machine by hand. The last tests run
the real check on this machine's real CPU torch.
"""

from __future__ import annotations

import ast
import inspect
import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from pytorch_winbuild.builder import verify
from pytorch_winbuild.builder.report import (
    BuildRecord,
    GpuCheck,
    GpuDevice,
    Verification,
    VerificationSkipped,
    gpu_lines,
    summary,
    verification_line,
)
from pytorch_winbuild.builder.verify import (
    MARKER,
    VERIFY_SCRIPT,
    arch_list_flag,
    arch_runs_on,
    check_torch,
    covering_archs,
    failure_error,
    parse_cuda_arch,
)
from pytorch_winbuild.diagnosis.triage import diagnose_text

# ---------------------------------------------------------------------------------------------
# Coverage: pure, no torch


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("sm_75", ("sm", 7, 5, "")),
        ("sm_86", ("sm", 8, 6, "")),
        ("compute_90", ("compute", 9, 0, "")),
        ("sm_90a", ("sm", 9, 0, "a")),
        ("compute_90a", ("compute", 9, 0, "a")),
        # capability 10.0 and later: major * 10 + minor, so three digits, the last one the minor
        ("sm_100", ("sm", 10, 0, "")),
        ("sm_100f", ("sm", 10, 0, "f")),
        ("sm_103a", ("sm", 10, 3, "a")),
        ("sm_120", ("sm", 12, 0, "")),
        ("sm_121", ("sm", 12, 1, "")),
        ("compute_120f", ("compute", 12, 0, "f")),
        (" SM_80 ", ("sm", 8, 0, "")),
        ("gfx90a", None),  # a ROCm architecture
        ("sm_", None),
        ("sm_9", None),
        ("sm_8x", None),
        ("lto_90", None),
        ("", None),
    ],
)
def test_arch_list_entries_are_parsed(entry: str, parsed: tuple[str, int, int, str] | None) -> None:
    assert parse_cuda_arch(entry) == parsed


@pytest.mark.parametrize(
    ("entry", "capability", "runs"),
    [
        # Binary Compatibility: sm_XY runs on X.z for z >= y only.
        ("sm_80", (8, 0), True),
        ("sm_80", (8, 6), True),  # same major, newer minor
        ("sm_80", (8, 9), True),
        ("sm_86", (8, 0), False),  # never on an older minor
        ("sm_86", (8, 9), True),
        ("sm_80", (9, 0), False),  # never across major versions
        ("sm_90", (10, 0), False),
        ("sm_100", (12, 0), False),  # 12.0 (sm_120) is another major version than 10.0
        ("sm_120", (12, 1), True),
        ("sm_121", (12, 0), False),
        ("sm_75", (7, 0), False),
        ("sm_70", (7, 5), True),
        # PTX Compatibility: compute_XY is JIT-compiled for any capability >= X.Y.
        ("compute_80", (9, 0), True),
        ("compute_80", (8, 6), True),
        ("compute_90", (12, 0), True),
        ("compute_90", (8, 9), False),  # never for an older capability
        ("compute_86", (8, 0), False),
        # Architecture-specific ('a'): exactly that capability.
        ("sm_90a", (9, 0), True),
        ("sm_90a", (9, 1), False),
        ("sm_90a", (10, 0), False),
        ("compute_90a", (10, 0), False),  # no forward compatibility, even as PTX
        ("compute_90a", (9, 0), True),
        ("sm_100a", (10, 3), False),
        # Family-specific ('f', CUDA 12.9+): same major, equal or higher minor.
        ("sm_100f", (10, 0), True),
        ("sm_100f", (10, 3), True),
        ("sm_103f", (10, 0), False),
        ("sm_100f", (11, 0), False),
        ("sm_100f", (12, 0), False),
        ("compute_120f", (12, 1), True),
        ("compute_120f", (13, 0), False),
        # Not a CUDA architecture: runs on nothing.
        ("gfx90a", (9, 0), False),
    ],
)
def test_coverage_follows_nvidia_compatibility_rules(entry: str, capability: tuple[int, int], runs: bool) -> None:
    assert arch_runs_on(entry, capability) is runs


def test_the_entries_that_cover_a_device_and_the_flag_that_builds_for_it() -> None:
    official = ["sm_75", "sm_80", "sm_86", "sm_90", "compute_90"]  # a typical get_arch_list()
    assert covering_archs(official, (8, 9)) == ["sm_80", "sm_86"]
    assert covering_archs(official, (9, 0)) == ["sm_90", "compute_90"]
    assert covering_archs(official, (12, 0)) == ["compute_90"]  # only through the driver's JIT
    assert covering_archs(official, (7, 0)) == []
    assert covering_archs(["sm_100"], (12, 0)) == []
    assert covering_archs(["sm_90a", "sm_100f", "sm_120"], (10, 3)) == ["sm_100f"]
    assert covering_archs([], (9, 0)) == []
    assert arch_list_flag([(9, 0)]) == "9.0"
    assert arch_list_flag([(9, 0), (8, 6), (9, 0)]) == "8.6;9.0"
    assert arch_list_flag([(12, 0), (10, 0), (8, 6)]) == "8.6;10.0;12.0"


def test_the_script_embeds_the_same_coverage_functions_in_python_3_5_code() -> None:
    for function in (parse_cuda_arch, arch_runs_on, covering_archs, arch_list_flag):
        assert inspect.getsource(function) in VERIFY_SCRIPT
    assert "@MARKER@" not in VERIFY_SCRIPT and "# @COVERAGE@" not in VERIFY_SCRIPT
    tree = ast.parse(VERIFY_SCRIPT)
    # The build's Python may be as old as an era allows: no f-strings, no annotations, no __future__.
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)]
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.arg) and node.annotation is not None]
    assert not [node for node in ast.walk(tree) if isinstance(node, (ast.AnnAssign, ast.ImportFrom))]


# ---------------------------------------------------------------------------------------------
# The script's GPU check against a stand-in torch: real CPU tensors, a fake torch.cuda


def _script() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "pytorch_winbuild_verify"}
    exec(compile(VERIFY_SCRIPT, "pytorch_winbuild_verify.py", "exec"), namespace)
    return namespace


# Kept double: torch.cuda needs an NVIDIA GPU and a CUDA build of torch; this machine and CI have neither.
class FakeCuda:
    """torch.cuda with devices of given names and capabilities; a device can fail or compute wrongly."""

    def __init__(
        self,
        devices: list[tuple[str, tuple[int, int]]],
        arch_list: list[str],
        *,
        fail: dict[int, str] | None = None,
        wrong: set[int] = frozenset(),
        broken: set[int] = frozenset(),
    ) -> None:  # type: ignore[assignment]
        self.devices, self.arch_list, self.fail, self.wrong, self.broken = devices, arch_list, fail or {}, wrong, broken
        self.current: int | None = None
        self.wrong_next = False

    def is_available(self) -> bool:
        return bool(self.devices)

    def get_arch_list(self) -> list[str]:
        return list(self.arch_list)

    def device_count(self) -> int:
        return len(self.devices)

    def get_device_name(self, index: int) -> str:
        if index in self.broken:
            raise RuntimeError("CUDA error: unspecified launch failure")
        return self.devices[index][0]

    def get_device_capability(self, index: int) -> tuple[int, int]:
        return self.devices[index][1]

    def synchronize(self, device: Any) -> None:
        if self.current in self.fail:
            raise RuntimeError(self.fail[self.current])


def fake_torch(cuda: FakeCuda, version: str | None = "12.8") -> SimpleNamespace:
    """The real CPU torch's tensors and ops, with `cuda` standing in for torch.cuda (no GPU here)."""
    import torch

    def device(kind: str, index: int) -> Any:
        assert kind == "cuda"
        cuda.current, cuda.wrong_next = index, index in cuda.wrong
        return torch.device("cpu")

    def mm(a: Any, b: Any) -> Any:  # the first product of a device's check is the "GPU" one
        result = torch.mm(a, b)
        if cuda.wrong_next:
            cuda.wrong_next = False
            result = result + 1
        return result

    return SimpleNamespace(
        version=SimpleNamespace(cuda=version, hip=None),
        cuda=cuda,
        device=device,
        arange=torch.arange,
        float32=torch.float32,
        mm=mm,
        equal=torch.equal,
        allclose=torch.allclose,
    )


# As torch words it: the error (CUDA's cudaErrorNoKernelImageForDevice string, also quoted in seed 000's
# FAQ), then the advice torch appends (c10/cuda/CUDAMiscFunctions.cpp, torch 1.10+, as user reports show it).
NO_KERNEL_IMAGE = (
    "CUDA error: no kernel image is available for execution on the device\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
)


def test_every_covered_gpu_runs_the_kernel() -> None:
    script = _script()
    gpu = script["check_gpus"](
        fake_torch(
            FakeCuda(
                [("NVIDIA GeForce RTX 3090", (8, 6)), ("NVIDIA H100 80GB HBM3", (9, 0))],
                ["sm_80", "sm_86", "sm_90", "compute_90"],
            )
        )
    )
    assert (
        gpu["checked"] is True
        and gpu["device_count"] == 2
        and gpu["arch_list"] == ["sm_80", "sm_86", "sm_90", "compute_90"]
    )
    assert gpu["devices"] == [
        {
            "index": 0,
            "device": "cuda:0",
            "name": "NVIDIA GeForce RTX 3090",
            "capability": "8.6",
            "covered": True,
            "covered_by": ["sm_80", "sm_86"],
            "kernel": "ok",
            "ok": True,
        },
        {
            "index": 1,
            "device": "cuda:1",
            "name": "NVIDIA H100 80GB HBM3",
            "capability": "9.0",
            "covered": True,
            "covered_by": ["sm_90", "compute_90"],
            "kernel": "ok",
            "ok": True,
        },
    ]
    assert script["gpu_failure"](gpu) is None


def test_torch_warnings_during_the_check_are_kept_in_one_line_each() -> None:
    import warnings

    class Warning(FakeCuda):
        def get_device_capability(self, index: int) -> tuple[int, int]:
            # torch 2.5-2.9 torch/cuda/__init__.py `_check_capability` (old_gpu_warn), as user reports quote it
            warnings.warn(
                "\n"
                "    Found GPU0 NVIDIA GeForce GTX 1080 which is of cuda capability 6.1.\n"
                "    Minimum and Maximum cuda capability supported by this version of PyTorch is\n"
                "    (7.5) - (12.0)\n",
                stacklevel=1,
            )
            return super().get_device_capability(index)

    gpu = _script()["check_gpus"](fake_torch(Warning([("NVIDIA GeForce GTX 1080", (6, 1))], ["sm_75", "sm_80"])))
    assert gpu["warnings"] == [
        "Found GPU0 NVIDIA GeForce GTX 1080 which is of cuda capability 6.1. Minimum and Maximum cuda capability "
        "supported by this version of PyTorch is (7.5) - (12.0)"
    ]
    assert gpu["devices"][0]["covered"] is False and gpu["devices"][0]["ok"] is False


def test_a_gpu_the_build_does_not_cover_fails_with_the_arch_list_that_fixes_it() -> None:
    script = _script()
    gpu = script["check_gpus"](
        fake_torch(
            FakeCuda([("NVIDIA GeForce RTX 3090", (8, 6)), ("NVIDIA H100 80GB HBM3", (9, 0))], ["sm_80", "sm_86"])
        )
    )
    first, second = gpu["devices"]
    assert first["ok"] is True  # one bad device hides no other
    assert (
        second["covered"] is False and second["covered_by"] == [] and second["ok"] is False and second["kernel"] == "ok"
    )
    step, error, fix = script["gpu_failure"](gpu)
    assert step == "CUDA kernel on cuda:1"
    assert (
        error == "cuda:1 (NVIDIA H100 80GB HBM3, compute capability 9.0): compute capability 9.0 is not among this "
        "build's CUDA architectures (sm_80 sm_86), so PyTorch's kernels have no image for it ('no kernel image "
        "is available for execution on the device')"
    )
    # Both GPUs' capabilities: rebuilding for 9.0 alone would drop the 3090.
    assert fix.startswith(
        'rebuild for the GPUs here: `invoke build --arch-list "8.6;9.0"` (TORCH_CUDA_ARCH_LIST=8.6;9.0).'
    )
    assert (
        "cuda:1 (NVIDIA H100 80GB HBM3) has compute capability 9.0" in fix
        and "this build's CUDA architectures are sm_80 sm_86." in fix
    )


def test_a_kernel_without_an_image_for_the_gpu_fails_the_device_and_names_the_flag() -> None:
    script = _script()
    # No arch list to judge from (coverage unknown): the kernel itself decides.
    gpu = script["check_gpus"](
        fake_torch(
            FakeCuda(
                [("NVIDIA H100 80GB HBM3", (9, 0)), ("NVIDIA H100 80GB HBM3", (9, 0))], [], fail={0: NO_KERNEL_IMAGE}
            )
        )
    )
    first, second = gpu["devices"]
    assert first["covered"] is None and first["kernel"] == "failed" and first["ok"] is False
    assert (
        first["error"] == "RuntimeError: CUDA error: no kernel image is available for execution on the device"
        and "CUDA_LAUNCH_BLOCKING" in first["traceback"]
    )
    assert second["ok"] is True and second["kernel"] == "ok"
    step, error, fix = script["gpu_failure"](gpu)
    assert step == "CUDA kernel on cuda:0"
    assert "no kernel image is available for execution on the device" in error
    assert (
        error.splitlines()[-1]
        == "cuda:0 (NVIDIA H100 80GB HBM3, compute capability 9.0): RuntimeError: CUDA error: no kernel image is "
        "available for execution on the device"
    )
    assert (
        "`invoke build --arch-list 9.0` (TORCH_CUDA_ARCH_LIST=9.0)" in fix
        and "this build's CUDA architectures are unknown." in fix
    )


def test_a_wrong_result_or_a_broken_device_fails_without_an_arch_list_fix() -> None:
    script = _script()
    gpu = script["check_gpus"](
        fake_torch(
            FakeCuda([("GPU A", (8, 0)), ("GPU B", (8, 0)), ("GPU C", (8, 0))], ["sm_80"], wrong={0}, broken={1})
        )
    )
    wrong, broken, fine = gpu["devices"]
    assert wrong["kernel"] == "failed" and wrong["error"].startswith(
        "RuntimeError: x @ x.T on cpu differs from the CPU's result (largest difference 1.0)"
    )
    assert (
        broken["kernel"] == "not run"
        and broken["name"] is None
        and broken["error"] == "RuntimeError: CUDA error: unspecified launch failure"
    )
    assert fine["ok"] is True
    step, error, fix = script["gpu_failure"](gpu)
    assert step == "CUDA kernel on cuda:0" and fix is None
    assert (
        error.splitlines()[-1]
        == "cuda:0 (GPU A, compute capability 8.0): RuntimeError: x @ x.T on cpu differs from the CPU's result "
        "(largest difference 1.0); cuda:1 (unnamed, compute capability unknown): RuntimeError: CUDA error: "
        "unspecified launch failure"
    )


def test_no_cuda_or_no_device_is_recorded_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script()
    without = script["check_gpus"](fake_torch(FakeCuda([], []), version=None))
    assert (
        without["checked"] is False
        and without["reason"] == "torch was built without CUDA"
        and script["gpu_failure"](without) is None
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    hidden = script["check_gpus"](fake_torch(FakeCuda([], ["sm_90"])))
    assert hidden["checked"] is False and hidden["devices"] == [] and script["gpu_failure"](hidden) is None
    assert hidden["reason"] == "no CUDA device visible (torch.cuda.is_available() is False; CUDA_VISIBLE_DEVICES='')"


def test_the_checks_own_fix_comes_before_the_diagnosis() -> None:
    triage = diagnose_text("RuntimeError: CUDA error: no kernel image is available for execution on the device")
    result = Verification(
        ok=False,
        interpreter="python",
        exit_code=1,
        failed_step="CUDA kernel on cuda:0",
        error_summary="cuda:0 (H100, compute capability 9.0): not built for it",
        fix="rebuild for the GPUs here: `invoke build --arch-list 9.0` (TORCH_CUDA_ARCH_LIST=9.0).",
        triage=triage,
    )
    error = failure_error(result)
    assert "failed at step 'CUDA kernel on cuda:0'" in str(error) and "[no-kernel-image]" in str(error)
    assert error.fix == result.fix
    assert failure_error(replace(result, fix=None)).fix == triage.matches[0].rule.fix_on(None)


def test_the_summary_shows_each_gpu_briefly(tmp_path: Any) -> None:
    gpu = GpuCheck(
        checked=True,
        arch_list=("sm_80", "sm_86"),
        device_count=2,
        devices=(
            GpuDevice(0, "cuda:0", "NVIDIA GeForce RTX 3090", "8.6", True, ("sm_80", "sm_86"), "ok", True),
            GpuDevice(
                1,
                "cuda:1",
                "NVIDIA H100 80GB HBM3",
                "9.0",
                False,
                (),
                "failed",
                False,
                "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            ),
        ),
        kernel_test="x * 2 + 1",
    )
    failed = Verification(ok=False, interpreter="python", exit_code=1, failed_step="CUDA kernel on cuda:1", gpu=gpu)
    assert gpu_lines(failed) == [
        "cuda:0 NVIDIA GeForce RTX 3090 · capability 8.6 · built for it (sm_80 sm_86) · kernel ok",
        "cuda:1 NVIDIA H100 80GB HBM3 · capability 9.0 · NOT built for it (arch list sm_80 sm_86) · kernel failed: "
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    ]
    unchecked = GpuCheck(False, None, 0, (), "x * 2 + 1", reason="torch was built without CUDA")
    assert gpu_lines(replace(failed, gpu=unchecked)) == ["not checked: torch was built without CUDA"]
    assert gpu_lines(replace(failed, gpu=None)) == []
    assert verification_line(VerificationSkipped("--no-verify")) == "skipped: --no-verify"
    record = BuildRecord("build", tmp_path / "run.log", tmp_path / "run.json")
    record.result = "verification failed"
    record.verification = failed
    text = summary(record)
    assert "verified  FAILED at CUDA kernel on cuda:1" in text
    assert "gpu       cuda:1 NVIDIA H100 80GB HBM3 · capability 9.0 · NOT built for it" in text


# ---------------------------------------------------------------------------------------------
# A failure's error is one paragraph: no traceback, not even one quoted inside an exception's message


def test_a_dataloader_worker_error_is_one_paragraph_ending_with_the_original_exception() -> None:
    """torch's own wrapper for a worker's exception (torch._utils.ExceptionWrapper, what a DataLoader raises)
    quotes the worker's traceback in its message: the paragraph keeps the exception, not the frames."""
    import sys

    from torch._utils import ExceptionWrapper

    try:
        raise ValueError("item 3 is broken\nsee the dataset")
    except ValueError:
        wrapper = ExceptionWrapper(sys.exc_info(), where="in DataLoader worker process 0")
    with pytest.raises(ValueError) as raised:
        wrapper.reraise()
    assert "Original Traceback (most recent call last):" in str(raised.value)  # torch's real message
    assert _script()["paragraph"](raised.value) == (
        "ValueError: Caught ValueError in DataLoader worker process 0. ValueError: item 3 is broken see the dataset"
    )


def test_a_failing_gpu_s_error_and_record_hold_no_traceback() -> None:
    """The check's failure text for a GPU is one paragraph; the device's traceback is diagnosed by
    check_torch, then dropped, like the import's."""
    script = _script()
    gpu = script["check_gpus"](fake_torch(FakeCuda([("NVIDIA H100 80GB HBM3", (9, 0))], [], fail={0: NO_KERNEL_IMAGE})))
    assert "Traceback (most recent call last):" in gpu["devices"][0]["traceback"]  # what the check itself keeps
    step, error, _ = script["gpu_failure"](gpu)
    assert "Traceback" not in error and "\n" not in error and "no kernel image is available" in error
    output = {"ok": False, "failed_step": step, "error": error, "gpu": gpu}
    parsed = verify._parse(MARKER + json.dumps(output), "python", 1)
    assert parsed is not None
    result, taken = parsed
    assert "Traceback (most recent call last):" in taken and "Traceback" not in json.dumps(result.to_dict())


# ---------------------------------------------------------------------------------------------
# The real check on this machine's real torch (the CPU wheel: no CUDA, and no GPU here)


def test_the_real_check_on_a_cpu_torch_records_no_cuda_and_passes() -> None:
    import torch  # installed here and by .ci/run (torch==2.13.0, CPU): without it this fails, never skips

    assert torch.version.cuda is None, "the CPU wheel is what this test is about"
    result = check_torch()
    assert result.ok is True and result.exit_code == 0, result.error
    assert result.cuda_version is None and result.cuda_available is False and result.gpu is not None
    assert result.gpu.to_dict() == {
        "checked": False,
        "arch_list": None,
        "device_count": 0,
        "devices": [],
        "kernel_test": "x * 2 + 1 and x @ x.T on a 64x64 float32 tensor, compared with the CPU",
        "reason": "torch was built without CUDA",
    }
    assert result.dataloader is not None and result.dataloader.ok is True
    assert gpu_lines(result) == ["not checked: torch was built without CUDA"]


def test_the_script_runs_alone_as_printed_by_the_module(tmp_path: Any) -> None:
    import subprocess
    import sys

    import torch  # installed here and by .ci/run: without it this fails, never skips

    assert torch.__version__
    printed = subprocess.run(
        [sys.executable, "-m", "pytorch_winbuild.builder.verify", "--script"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed == VERIFY_SCRIPT
    script = tmp_path / "check.py"
    script.write_text(printed, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=verify.TIMEOUT_SECONDS
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(verify.MARKER)
    # Typed once, the check's report is written back key for key, in its order, nulls (no CUDA, no MAGMA) included.
    printed_report = json.loads(done.stdout.splitlines()[-1].removeprefix(verify.MARKER))
    parsed = verify._parse(done.stdout, sys.executable, 0)
    assert parsed is not None and parsed[1] == ""
    written = parsed[0].to_dict()
    assert written == {**printed_report, "interpreter": sys.executable, "exit_code": 0}
    assert list(written) == [*printed_report, "interpreter", "exit_code"]


def test_an_interpreter_that_never_reports_is_named_by_its_last_line(tmp_path: Any) -> None:
    """`--python sh`, a real program that is no Python: it reads the check as a shell script, complains
    line after line and exits. The reason is the last line it printed (as sh prints it for the same
    file), not the whole output."""
    import shutil
    import subprocess

    sh = shutil.which("sh")
    assert sh is not None
    script = tmp_path / verify.SCRIPT_NAME
    script.write_text(VERIFY_SCRIPT, encoding="utf-8")
    own = subprocess.run([sh, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    said = [line.strip() for line in (own.stdout + own.stderr).splitlines() if line.strip()]
    assert own.returncode != 0 and len(said) > 1
    result = check_torch(sh)
    assert (result.ok, result.failed_step, result.exit_code) == (False, "start", own.returncode)
    # The script's folder is a fresh temporary one each run: compare what follows the script's name.
    assert result.error is not None
    assert result.error.partition(verify.SCRIPT_NAME)[2] == said[-1].partition(verify.SCRIPT_NAME)[2] != ""
    assert list(result.to_dict()) == [
        "ok",
        "failed_step",
        "error",
        "interpreter",
        "exit_code",
        "error_summary",
        "diagnosis",
        "first_error",
    ]


STOPPED_AT_CUDNN = {
    "ok": False,
    "python": "3.12.3",
    "executable": "/venv/bin/python",
    "cwd": "/tmp/check",
    "version": "2.13.0",
    "location": "/venv/lib/torch",
    "cuda_version": None,
    "cuda_available": False,
    "mkl": True,
    "magma": None,
    "failed_step": "cuDNN",
    "error": "RuntimeError: cuDNN broke",
    "traceback": "Traceback (most recent call last):\n  ...\nRuntimeError: cuDNN broke\n",
}


def test_a_fact_torch_answered_with_none_stays_null_and_one_never_asked_stays_out() -> None:
    """A check that stopped at cuDNN asked for MAGMA (null: no CUDA) but never for cuDNN or the GPUs."""
    parsed = verify._parse("noise\n" + MARKER + json.dumps(STOPPED_AT_CUDNN) + "\n", "python", 1)
    assert parsed is not None
    result, trace = parsed
    assert result.magma is None and result.cudnn is None and "RuntimeError: cuDNN broke" in trace
    assert result.to_dict() == {
        **{key: value for key, value in STOPPED_AT_CUDNN.items() if key != "traceback"},
        "interpreter": "python",
        "exit_code": 1,
        "error_summary": None,
        "diagnosis": [],
        "first_error": None,
    }
    assert verification_line(result) == "FAILED at cuDNN"


@pytest.mark.parametrize(
    "report",
    [
        "[1, 2]",  # not an object
        "{not json",
        json.dumps({**STOPPED_AT_CUDNN, "ok": "yes"}),
        json.dumps({**STOPPED_AT_CUDNN, "cudnn": True}),  # a count, not a truth value
        json.dumps({**STOPPED_AT_CUDNN, "gpu": {"checked": True, "devices": "all"}}),
        json.dumps({**STOPPED_AT_CUDNN, "dataloader": [2, "spawn"]}),
        json.dumps({key: value for key, value in STOPPED_AT_CUDNN.items() if key != "ok"}),
    ],
)
def test_a_report_not_of_the_shape_the_script_writes_is_no_report(report: str) -> None:
    """The interpreter that prints the report runs the build's torch: what it prints is checked, never trusted."""
    assert verify._parse(MARKER + report, "python", 1) is None
