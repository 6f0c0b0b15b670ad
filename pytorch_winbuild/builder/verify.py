"""Prove a build works: import torch in a fresh interpreter started outside the source tree.

Outside, because the current folder comes first on sys.path (a checkout's torch/ has no _C). It also runs a spawn-mode
DataLoader with workers and, on each visible GPU, a real kernel and the arch list against NVIDIA's rules.
VERIFY_SCRIPT needs only the standard library and torch (`python -m pytorch_winbuild.builder.verify --script`).
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from pytorch_winbuild.builder.report import CHECK_FACTS, DataLoaderCheck, GpuCheck, GpuDevice, Verification
from pytorch_winbuild.errors import VerificationError
from pytorch_winbuild.json_file import parse_json
from pytorch_winbuild.knowledge.arch_list import (
    TEGRA_CAPABILITIES,
    arch_list_flag,
    arch_runs_on,
    covering_archs,
    parse_cuda_arch,
)
from pytorch_winbuild.text.redact import redact_text

MARKER = "PYTORCH_WINBUILD_VERIFY "
TIMEOUT_SECONDS = 600
SCRIPT_NAME = "pytorch_winbuild_verify.py"


def _embedded():
    """The coverage functions' source, for VERIFY_SCRIPT (which has no access to this package)."""
    functions = (parse_cuda_arch, arch_runs_on, covering_archs, arch_list_flag)
    return "\n\n".join(
        [f"TEGRA_CAPABILITIES = {TEGRA_CAPABILITIES!r}", *(inspect.getsource(function) for function in functions)]
    )


# Runs in the fresh interpreter, any Python a build may use (3.5 code: no f-strings). Module-level
# classes and functions, because spawn workers re-import this file (as __mp_main__) to unpickle
# the dataset and the collate function.
_SCRIPT = '''\
import json
import os
import sys
import traceback
import warnings

MARKER = @MARKER@
ITEMS = 8
KERNEL_TEST = "x * 2 + 1 and x @ x.T on a 64x64 float32 tensor, compared with the CPU"


class Squares:
    """A dataset defined in __main__, as a user's script does."""

    def __len__(self):
        return ITEMS

    def __getitem__(self, index):
        return index * index


def collate(batch):
    return [int(value) for value in batch]


# @COVERAGE@


def describe(error):
    """An exception in one line: its type and its message's first line (CUDA errors add lines of advice)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return type(error).__name__ + (": " + lines[0] if lines else "")


def one_line(text, limit=500):
    return " ".join(line.strip() for line in str(text).splitlines() if line.strip())[:limit]


def paragraph(error, limit=2000):
    """An exception as one paragraph: its type and its whole message on one line. A traceback quoted inside
    the message (a DataLoader worker's "Original Traceback") is cut down to its last line, the exception."""
    kept = []
    quoting = False
    for line in str(error).splitlines():
        if line.strip().endswith("Traceback (most recent call last):"):
            quoting = True
            continue
        if quoting and (line.startswith(" ") or not line.strip()):
            continue
        quoting = False
        kept.append(line)
    text = one_line(type(error).__name__ + (": " + "\\n".join(kept) if kept else ""), limit + 1)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_kernel(torch, index):
    """Run small real kernels on cuda:index and compare them with the CPU; raise if one fails."""
    device = torch.device("cuda", index)
    x = (torch.arange(64 * 64, dtype=torch.float32) % 7).reshape(64, 64)
    on_gpu = x.to(device)
    added = on_gpu * 2 + 1
    product = torch.mm(on_gpu, on_gpu.t())
    torch.cuda.synchronize(device)
    if added.device != device or product.device != device:
        raise RuntimeError("the kernels ran on {} and {}, not on {}".format(added.device, product.device, device))
    if not torch.equal(added.cpu(), x * 2 + 1):
        raise RuntimeError("x * 2 + 1 on {} differs from the CPU's result".format(device))
    # Small integers: exact in float32 (and in TF32), so any difference is a wrong result.
    expected = torch.mm(x, x.t())
    if not torch.allclose(product.cpu(), expected, rtol=1e-5, atol=1e-3):
        difference = (product.cpu() - expected).abs().max().item()
        raise RuntimeError(
            "x @ x.T on {} differs from the CPU's result (largest difference {})".format(device, difference)
        )


def check_device(torch, index, arch_list):
    """Name, capability, coverage and a kernel on one device; never raises."""
    device = {
        "index": index,
        "device": "cuda:{}".format(index),
        "name": None,
        "capability": None,
        "covered": None,
        "covered_by": [],
        "kernel": "not run",
        "ok": False,
    }
    try:
        device["name"] = torch.cuda.get_device_name(index)
        major, minor = torch.cuda.get_device_capability(index)
        device["capability"] = "{}.{}".format(major, minor)
        if arch_list:
            device["covered_by"] = covering_archs(arch_list, (major, minor))
            device["covered"] = bool(device["covered_by"])
        try:
            run_kernel(torch, index)
            device["kernel"] = "ok"
        except Exception:
            device["kernel"] = "failed"
            raise
        if device["covered"] is False:
            device["error"] = (
                "compute capability {} is not among this build's CUDA architectures ({}), so PyTorch's kernels "
                "have no image for it ('no kernel image is available for execution on the device')"
            ).format(device["capability"], " ".join(arch_list))
        else:
            device["ok"] = True
    except Exception as error:
        device["traceback"] = traceback.format_exc()
        device["error"] = describe(error)
    return device


def check_gpus(torch):
    """The gpu section: the build's architectures and every visible device, or why none was checked."""
    gpu = {"checked": False, "arch_list": None, "device_count": 0, "devices": [], "kernel_test": KERNEL_TEST}
    if not torch.version.cuda:
        hip = getattr(torch.version, "hip", None)
        gpu["reason"] = "torch was built without CUDA" + (" (a ROCm build, HIP {})".format(hip) if hip else "")
        return gpu
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpu["reason"] = (
            "no CUDA device visible (torch.cuda.is_available() is False"
            + ("; CUDA_VISIBLE_DEVICES={!r}".format(visible) if visible is not None else "")
            + ")"
        )
        return gpu
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gpu["arch_list"] = list(torch.cuda.get_arch_list())
        except Exception as error:
            gpu["arch_list_error"] = describe(error)
        gpu["device_count"] = int(torch.cuda.device_count())
        if gpu["device_count"] == 0:
            gpu["reason"] = "no CUDA device visible (torch.cuda.device_count() is 0)"
            return gpu
        gpu["checked"] = True
        for index in range(gpu["device_count"]):
            gpu["devices"].append(check_device(torch, index, gpu["arch_list"]))
    messages = [one_line(warning.message) for warning in caught]
    if messages:
        gpu["warnings"] = messages
    return gpu


def gpu_failure(gpu):
    """(failed step, error, fix or None) when a device failed, else None."""
    failed = [device for device in gpu["devices"] if not device["ok"]]
    if not failed:
        return None
    lines = []
    for device in failed:
        lines.append(
            "{} ({}, compute capability {}): {}".format(
                device["device"],
                device["name"] or "unnamed",
                device["capability"] or "unknown",
                device.get("error", "failed"),
            )
        )
    error = "; ".join(lines)  # one paragraph: each device's tracebacks stay in its own record
    fix = None
    wrong_arch = [
        device for device in failed if device["covered"] is False or "no kernel image" in device.get("traceback", "")
    ]
    capabilities = [
        tuple(int(part) for part in device["capability"].split("."))
        for device in gpu["devices"]
        if device["capability"]
    ]
    if wrong_arch and capabilities:
        flag = arch_list_flag(capabilities)
        quoted = flag if ";" not in flag else '"' + flag + '"'
        described = ", ".join(
            "{} ({}) has compute capability {}".format(device["device"], device["name"], device["capability"])
            for device in gpu["devices"]
            if device["capability"]
        )
        built = " ".join(gpu["arch_list"] or []) or "unknown"
        fix = (
            "rebuild for the GPUs here: `invoke build --arch-list {}` (TORCH_CUDA_ARCH_LIST={}). {}; "
            "this build's CUDA architectures are {}."
        ).format(quoted, flag, described, built)
    return "CUDA kernel on " + failed[0]["device"], error, fix


def check():
    result = {"ok": False, "python": sys.version.split()[0], "executable": sys.executable, "cwd": os.getcwd()}
    step = "import torch"
    try:
        import torch

        result["version"] = torch.__version__
        result["location"] = os.path.dirname(os.path.abspath(torch.__file__))
        step = "CUDA"
        result["cuda_version"] = torch.version.cuda
        result["cuda_available"] = bool(torch.cuda.is_available())
        step = "MKL"
        result["mkl"] = bool(torch.backends.mkl.is_available())
        step = "MAGMA"
        result["magma"] = bool(torch.cuda.has_magma) if torch.version.cuda else None
        step = "cuDNN"
        result["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        step = "GPU"
        result["gpu"] = check_gpus(torch)
        step = "DataLoader"
        import torch.utils.data

        loader = torch.utils.data.DataLoader(
            Squares(), batch_size=2, num_workers=2, collate_fn=collate, multiprocessing_context="spawn"
        )
        batches = [batch for batch in loader]
        total = sum(sum(batch) for batch in batches)
        expected = sum(index * index for index in range(ITEMS))
        if total != expected:
            raise RuntimeError(
                "DataLoader workers returned %r (sum %d), expected the sum %d" % (batches, total, expected)
            )
        result["dataloader"] = {"num_workers": 2, "start_method": "spawn", "batches": len(batches), "ok": True}
        failure = gpu_failure(result["gpu"])
        if failure:
            result["failed_step"], result["error"], fix = failure
            if fix:
                result["fix"] = fix
        else:
            result["ok"] = True
    except BaseException as error:
        result["failed_step"] = step
        # The record keeps the reason, one paragraph; the traceback (frames of this script) is for the diagnosis.
        result["error"] = paragraph(error)
        result["traceback"] = traceback.format_exc()
    return result


if __name__ == "__main__":
    import multiprocessing

    multiprocessing.set_start_method("spawn", force=True)
    outcome = check()
    print(MARKER + json.dumps(outcome), flush=True)
    sys.exit(0 if outcome["ok"] else 1)
'''
VERIFY_SCRIPT = _SCRIPT.replace("@MARKER@", repr(MARKER)).replace("# @COVERAGE@", _embedded())


# The check's report is read once, here, into a Verification. It comes from an interpreter that ran the build's
# torch, so each value must be of the type the script writes; a report with one that is not counts as no report.
_T = TypeVar("_T")


def _typed(data: Mapping[str, object], key: str, kind: type[_T]) -> _T | None:
    """`data[key]` when it is what the script writes there (None when absent or null); else ValueError."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):  # JSON true is no count
        raise ValueError(f"the check's {key!r} is a {type(value).__name__}, not a {kind.__name__}")
    return value


def _required(data: Mapping[str, object], key: str, kind: type[_T]) -> _T:
    value = _typed(data, key, kind)
    if value is None:
        raise ValueError(f"the check reported no {key!r}")
    return value


def _texts(data: Mapping[str, object], key: str) -> tuple[str, ...] | None:
    values = _typed(data, key, list)
    if values is None:
        return None
    if not all(isinstance(value, str) for value in values):
        raise ValueError(f"the check's {key!r} is not a list of strings")
    return tuple(values)


def _object(value: object, what: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise ValueError(f"the check's {what} is not an object")
    return value


def _device(data: Mapping[str, object]) -> GpuDevice:
    return GpuDevice(
        index=_required(data, "index", int),
        device=_required(data, "device", str),
        name=_typed(data, "name", str),
        capability=_typed(data, "capability", str),
        covered=_typed(data, "covered", bool),
        covered_by=_texts(data, "covered_by") or (),
        kernel=_required(data, "kernel", str),
        ok=_required(data, "ok", bool),
        error=_typed(data, "error", str),
    )


def _gpu(data: Mapping[str, object]) -> GpuCheck:
    return GpuCheck(
        checked=_required(data, "checked", bool),
        arch_list=_texts(data, "arch_list"),
        device_count=_required(data, "device_count", int),
        devices=tuple(_device(_object(device, "device")) for device in _required(data, "devices", list)),
        kernel_test=_required(data, "kernel_test", str),
        arch_list_error=_typed(data, "arch_list_error", str),
        reason=_typed(data, "reason", str),
        warnings=_texts(data, "warnings") or (),
    )


def _dataloader(data: Mapping[str, object]) -> DataLoaderCheck:
    return DataLoaderCheck(
        num_workers=_required(data, "num_workers", int),
        start_method=_required(data, "start_method", str),
        batches=_required(data, "batches", int),
        ok=_required(data, "ok", bool),
    )


def _verification(data: Mapping[str, object], python: str, exit_code: int) -> Verification:
    """The check's JSON object typed; ValueError when a value is not of the type the script writes."""
    gpu, dataloader = data.get("gpu"), data.get("dataloader")
    return Verification(
        ok=_required(data, "ok", bool),
        interpreter=python,
        exit_code=exit_code,
        python=_typed(data, "python", str),
        executable=_typed(data, "executable", str),
        cwd=_typed(data, "cwd", str),
        version=_typed(data, "version", str),
        location=_typed(data, "location", str),
        cuda_version=_typed(data, "cuda_version", str),
        cuda_available=_typed(data, "cuda_available", bool),
        mkl=_typed(data, "mkl", bool),
        magma=_typed(data, "magma", bool),
        cudnn=_typed(data, "cudnn", int),
        gpu=None if gpu is None else _gpu(_object(gpu, "gpu section")),
        dataloader=None if dataloader is None else _dataloader(_object(dataloader, "DataLoader section")),
        failed_step=_typed(data, "failed_step", str),
        error=_typed(data, "error", str),
        fix=_typed(data, "fix", str),
        answered_none=frozenset(key for key in CHECK_FACTS if key in data and data[key] is None),
    )


def _parse(stdout: str, python: str, exit_code: int) -> tuple[Verification, str] | None:
    """The check's report, typed, and its tracebacks for the diagnosis; None when it printed none, or one that is not
    what the script writes. Untrusted: the interpreter that printed it ran the build's torch."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = parse_json(line[len(MARKER) :], allow_nonfinite=True)
                if not isinstance(data, dict):
                    return None
                return _verification(data, python, exit_code), take_tracebacks(data)
            except ValueError:
                return None
    return None


def failure_error(result: Verification, verify_command: str = "invoke verify") -> VerificationError:
    """One paragraph naming the failed step and its exception, with the diagnosis's advice; `verify_command`
    repeats the check (a build's: with the cache it remembered the build venv in)."""
    step = "start" if result.failed_step is None else result.failed_step
    message = (
        f"a fresh `{result.interpreter}` outside the source tree failed at step "
        f"'{step}': {result.error_summary or 'no output'}"
    )
    triage = result.triage
    matches = triage.matches if triage else ()
    if matches:
        message += " Diagnosis: " + "; ".join(f"[{m.rule.id}] {m.rule.title}" for m in matches) + "."
    # The check's own fix (a GPU the build does not cover: the --arch-list for it) is the most specific.
    fix = result.fix or (matches[0].rule.fix_on(triage.posix) if triage and matches else None)
    return VerificationError(
        message, fix=fix or f"run `{verify_command}` to repeat the check, and `invoke diagnose` on the build log."
    )


def _run(python: str, env: dict[str, str]) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory(prefix="pytorch-winbuild-verify-") as folder:
        script = Path(folder) / SCRIPT_NAME
        script.write_text(VERIFY_SCRIPT, encoding="utf-8")
        try:
            completed = subprocess.run(
                [python, str(script)],
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=TIMEOUT_SECONDS,
                check=False,
            )
        except FileNotFoundError:
            return -1, "", f"FileNotFoundError: the Python interpreter {python} does not exist."
        except subprocess.TimeoutExpired:
            return (
                -1,
                "",
                f"TimeoutError: the check did not finish within {TIMEOUT_SECONDS} s (a DataLoader worker "
                "that never started?).",
            )
    return completed.returncode, completed.stdout, completed.stderr


def check_torch(
    python: str | None = None, *, env: Mapping[str, str] | None = None, extra_paths: Sequence[Path] = ()
) -> Verification:
    """Run the check; its result, with `ok` false and the diagnosis when something failed.

    `extra_paths` go in front of PYTHONPATH: a wheel unpacked into a folder is checked that way
    without installing it into the user's environment.
    """
    python = python or sys.executable
    process_env = dict(os.environ if env is None else env)
    if extra_paths:
        current = process_env.get("PYTHONPATH")
        process_env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in extra_paths), *([current] if current else [])])
    exit_code, stdout, stderr = _run(python, process_env)
    output = redact_text(stdout + stderr)
    said = [line.strip() for line in output.splitlines() if line.strip() and not line.startswith(MARKER)]
    result, trace = _parse(stdout, python, exit_code) or (  # the check never reported: its interpreter's last line
        Verification(
            ok=False,
            interpreter=python,
            exit_code=exit_code,
            failed_step="start",
            error=said[-1] if said else f"exit status {exit_code}",
        ),
        "",
    )
    if result.ok and exit_code == 0:
        return result
    return _diagnosed(result, trace, output)


def _diagnosed(result: Verification, trace: str, output: str) -> Verification:
    """A failed check with its reason in one line and the diagnosis of what its interpreter printed; the
    tracebacks are diagnosed, not kept: no traceback in the record."""
    from pytorch_winbuild.diagnosis.triage import diagnose_text

    error = redact_text(result.error or "")
    error_lines = [line.strip() for line in (error or output).splitlines() if line.strip()]
    printed = "\n".join(line for line in output.splitlines() if not line.startswith(MARKER))
    posix = os.name != "nt"  # the check ran on this machine: its fixes
    # The rules see the traceback (a DataLoader rule needs its multiprocessing frames); the first error is the reason.
    triage = diagnose_text(printed + "\n" + (trace or error), source="verification output", posix=posix)
    if trace:
        reason = diagnose_text(printed + "\n" + error, source="verification output", posix=posix)
        triage = replace(reason, matches=triage.matches)
    return replace(
        result, ok=False, error=error, error_summary=error_lines[-1] if error_lines else "no output", triage=triage
    )


def take_tracebacks(output: Mapping[str, object]) -> str:
    """The check's traceback and each GPU's, redacted, for the diagnosis; read from its output (of the shape
    `_verification` accepts), as the typed result keeps none."""
    gpu = output.get("gpu")
    devices = gpu.get("devices") if isinstance(gpu, dict) else None
    traces = [output.get("traceback")]
    traces += [device.get("traceback") for device in devices or [] if isinstance(device, dict)]
    return "\n".join(redact_text(str(trace)) for trace in traces if trace)


if __name__ == "__main__":  # python -m pytorch_winbuild.builder.verify [--script | PYTHON]
    if sys.argv[1:] == ["--script"]:
        sys.stdout.write(VERIFY_SCRIPT)
    else:
        outcome = check_torch(sys.argv[1] if len(sys.argv) > 1 else None)
        print(json.dumps(outcome.to_dict(), indent=2, ensure_ascii=False))
        sys.exit(0 if outcome.ok else 1)
