"""Ask one Python interpreter what it is: the `--python PATH` a user names (build, build-ext, env,
verify, a nightly entry's `python`) that the probe did not list.

The build runs under that interpreter (in a venv made from it), and the plan checks it against the
PyTorch era's Python range, so its version, bitness and implementation come from the interpreter
itself, in one short run that works on Python 2.7 and 3.x alike.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import Facts, PythonInfo

QUERY = (
    "import json, platform, struct, sys\n"
    "def can(name):\n"
    "    try:\n"
    "        __import__(name)\n"
    "        return True\n"
    "    except Exception:\n"
    "        return False\n"
    "print(json.dumps([platform.python_version(), struct.calcsize('P') * 8, sys.executable, "
    "platform.python_implementation(), can('venv') and can('ensurepip'), can('pip')]))"
)
TIMEOUT_SECONDS = 60
_FIX = "pass the path of a 64-bit CPython (e.g. C:\\Python36\\python.exe or ~/.pyenv/versions/3.6.15/bin/python), X.Y, or auto."


def ask_python(spec: str, label: str = "--python") -> PythonInfo:
    """The interpreter at `spec` (a path, or a name on PATH), as it describes itself; ConfigurationError (exit 2)
    when it does not exist or does not answer like Python."""
    found = shutil.which(spec) or (spec if Path(spec).is_file() else None)
    if found is None:
        what = "folder" if Path(spec).is_dir() else "file or command on PATH"
        raise ConfigurationError(f"{label} {spec}: no such {what} (or it is not executable).", fix=_FIX)
    try:
        completed = subprocess.run(
            [found, "-c", QUERY],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
        version, bits, executable, implementation, venv, pip = json.loads(completed.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, IndexError, ValueError, TypeError) as exc:
        raise ConfigurationError(
            f"{label} {spec} did not answer like a Python interpreter ({type(exc).__name__}).", fix=_FIX
        ) from None
    return PythonInfo(
        version=str(version),
        bits=int(bits),
        executable=str(executable or found),
        implementation=str(implementation),
        found_by=label,
        venv=bool(venv),
        pip=bool(pip),
    )


def with_python(facts: Facts, spec: str, label: str = "--python") -> tuple[Facts, str]:
    """The facts with the interpreter at `spec` among their Pythons (asked when the probe did not list it), and
    that interpreter's executable as the facts list it (a symlink or a name on PATH resolves to the one listed)."""
    listed = facts.pythons or (facts.python,)
    if any(p.executable == spec for p in listed):
        return facts, spec
    asked = ask_python(spec, label)
    same = [p for p in listed if Path(p.executable).resolve() == Path(asked.executable).resolve()]
    if same:
        return replace(facts, pythons=listed), same[0].executable
    return replace(facts, pythons=(*listed, asked)), asked.executable
