"""Prove a build works: import torch in a fresh interpreter started outside the source tree.

Outside, because Python puts the current folder first on sys.path: run from a PyTorch checkout,
`import torch` finds the source folder's torch/ (which has no compiled _C) and fails with
"No module named torch._C" even when the install is fine. The check also runs a DataLoader with
two worker processes under `if __name__ == '__main__':` with the spawn start method — Windows
has no fork, so that is how every DataLoader with workers runs there, and a build or an
environment that breaks it is caught here instead of in the user's first training script.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import VerificationError
from .redact import redact_text

MARKER = "PYTORCH_WINBUILD_VERIFY "
TIMEOUT_SECONDS = 600
SCRIPT_NAME = "pytorch_winbuild_verify.py"

# Runs in the fresh interpreter. Module-level classes and functions, because spawn workers
# re-import this file (as __mp_main__) to unpickle the dataset and the collate function.
VERIFY_SCRIPT = '''\
import json
import os
import sys
import traceback

MARKER = %(marker)r
ITEMS = 8


class Squares:
    """A dataset defined in __main__, as a user's script does."""

    def __len__(self):
        return ITEMS

    def __getitem__(self, index):
        return index * index


def collate(batch):
    return [int(value) for value in batch]


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
        step = "DataLoader"
        import torch.utils.data

        loader = torch.utils.data.DataLoader(Squares(), batch_size=2, num_workers=2, collate_fn=collate, multiprocessing_context="spawn")
        batches = [batch for batch in loader]
        total = sum(sum(batch) for batch in batches)
        expected = sum(index * index for index in range(ITEMS))
        if total != expected:
            raise RuntimeError("DataLoader workers returned %%r (sum %%d), expected the sum %%d" %% (batches, total, expected))
        result["dataloader"] = {"num_workers": 2, "start_method": "spawn", "batches": len(batches), "ok": True}
        result["ok"] = True
    except BaseException:
        result["failed_step"] = step
        result["error"] = traceback.format_exc()
    return result


if __name__ == "__main__":
    import multiprocessing

    multiprocessing.set_start_method("spawn", force=True)
    outcome = check()
    print(MARKER + json.dumps(outcome), flush=True)
    sys.exit(0 if outcome["ok"] else 1)
''' % {"marker": MARKER}


def _parse(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def failure_error(result: dict[str, Any]) -> VerificationError:
    """One paragraph naming the failed step and its exception, with the diagnosis's advice."""
    message = f"a fresh `{result.get('interpreter')}` outside the source tree failed at step '{result.get('failed_step', 'start')}': {result.get('error_summary', 'no output')}"
    matches = result.get("diagnosis") or []
    if matches:
        message += " Diagnosis: " + "; ".join(f"[{m['id']}] {m['title']}" for m in matches) + "."
        return VerificationError(message, fix=matches[0]["fix"])
    return VerificationError(message, fix="run `invoke verify` to repeat the check, and `invoke diagnose` on the build log.")


def _run(python: str, env: dict[str, str]) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory(prefix="pytorch-winbuild-verify-") as folder:
        script = Path(folder) / SCRIPT_NAME
        script.write_text(VERIFY_SCRIPT, encoding="utf-8")
        try:
            completed = subprocess.run([python, str(script)], cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=TIMEOUT_SECONDS, check=False)
        except FileNotFoundError:
            return -1, "", f"FileNotFoundError: the Python interpreter {python} does not exist."
        except subprocess.TimeoutExpired:
            return -1, "", f"TimeoutError: the check did not finish within {TIMEOUT_SECONDS} s (a DataLoader worker that never started?)."
    return completed.returncode, completed.stdout, completed.stderr


def check_torch(python: str | None = None, *, env: Mapping[str, str] | None = None, extra_paths: Sequence[Path] = ()) -> dict[str, Any]:
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
    result = _parse(stdout) or {"ok": False, "failed_step": "start", "error": output.strip() or f"exit status {exit_code}"}
    result["interpreter"] = python
    result["exit_code"] = exit_code
    if result.get("ok") and exit_code == 0:
        return result
    from .triage import diagnose_text

    result["ok"] = False
    result["error"] = redact_text(str(result.get("error") or ""))
    error_lines = [line.strip() for line in (result["error"] or output).splitlines() if line.strip()]
    result["error_summary"] = error_lines[-1] if error_lines else "no output"
    printed = "\n".join(line for line in output.splitlines() if not line.startswith(MARKER))
    triage = diagnose_text(printed + "\n" + result["error"], source="verification output")
    result["diagnosis"] = [match.to_dict() for match in triage.matches]
    result["first_error"] = triage.first_error.to_dict() if triage.first_error else None
    return result


def verify_torch(python: str | None = None, *, env: Mapping[str, str] | None = None, extra_paths: Sequence[Path] = ()) -> dict[str, Any]:
    """`check_torch`, raising VerificationError when the check failed."""
    result = check_torch(python, env=env, extra_paths=extra_paths)
    if not result["ok"]:
        raise failure_error(result)
    return result
