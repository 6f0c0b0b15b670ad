"""The Python an entry builds with: the one running the nightly, a version found on the machine, or a path.

The wheel is built by (and tagged for) that interpreter, and the plan checks it against the
PyTorch era's Python range, so its version and bitness are asked from the interpreter itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.facts.model import PythonInfo
from pytorch_winbuild.facts.probe_common import python_info
from pytorch_winbuild.nightly.matrix import PYTHON_CURRENT

QUERY = (
    "import json, platform, struct, sys; print(json.dumps([platform.python_version(), struct.calcsize('P') * 8, "
    "sys.executable, platform.python_implementation()]))"
)
TIMEOUT_SECONDS = 60
_VERSION = re.compile(r"\d+\.\d+")


def _ask(command: list[str], spec: str) -> PythonInfo:
    try:
        completed = subprocess.run(
            [*command, "-c", QUERY],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(
            f"python = {spec!r}: `{' '.join(command)}` could not be run ({exc}).",
            fix="install that Python, or change the entry's python in the matrix.",
        ) from None
    try:
        version, bits, executable, implementation = json.loads(completed.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError, TypeError):
        output = (completed.stderr or completed.stdout).strip().splitlines()
        raise ToolchainError(
            f"python = {spec!r}: `{' '.join(command)}` did not answer like a Python interpreter (exit status "
            f"{completed.returncode}: {output[-1] if output else 'no output'}).",
            fix="install that Python, or change the entry's python in the matrix.",
        ) from None
    return PythonInfo(
        version=str(version), bits=int(bits), executable=str(executable), implementation=str(implementation)
    )


def _version_command(version: str) -> list[str]:
    """How to start Python X.Y: the py launcher on Windows, pythonX.Y on PATH elsewhere."""
    if os.name == "nt":
        launcher = shutil.which("py")
        if launcher:
            return [launcher, f"-{version}"]
    found = shutil.which(f"python{version}")
    if found is None:
        raise ToolchainError(
            f"python = {version!r}: no Python {version} was found "
            f"({'py -' + version + ' and ' if os.name == 'nt' else ''}python{version} on PATH).",
            fix=f'install Python {version} (64-bit) on the runner, or set the entry\'s python to a path or "current".',
        )
    return [found]


def resolve_python(spec: str) -> PythonInfo:
    """The interpreter an entry names: "current", "X.Y" (the running one when it is X.Y) or a path."""
    if spec == PYTHON_CURRENT:
        return python_info()
    if _VERSION.fullmatch(spec):
        if f"{sys.version_info.major}.{sys.version_info.minor}" == spec:
            return python_info()
        return _ask(_version_command(spec), spec)
    return _ask([spec], spec)
