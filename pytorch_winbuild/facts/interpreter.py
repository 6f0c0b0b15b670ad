"""Ask one Python interpreter what it is: the `--python PATH` a user names (build, build-ext, env,
verify, a nightly entry's `python`) that the probe did not list.

The build runs under that interpreter (in a venv made from it), and the plan checks it against the
PyTorch era's Python range, so its version, bitness and implementation come from the interpreter
itself, in one short run that works on Python 2.7 and 3.x alike (the probe's own query).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from pytorch_winbuild import child_processes
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import Facts, PythonInfo
from pytorch_winbuild.facts.probe_pythons import PYTHON_QUERY, parse_answer
from pytorch_winbuild.text.terminal_text import echoed

TIMEOUT_SECONDS = 60
_FIX = (
    "pass the path of a 64-bit CPython (e.g. C:\\Python36\\python.exe or ~/.pyenv/versions/3.6.15/bin/python), "
    "X.Y, or auto."
)


def ask_python(spec: str, label: str = "--python") -> PythonInfo:
    """The interpreter at `spec` (a path, or a name on PATH), as it describes itself; ConfigurationError (exit 2)
    when it does not exist or does not answer like Python."""
    found = shutil.which(spec) or (spec if Path(spec).is_file() else None)
    if found is None:
        what = "folder" if Path(spec).is_dir() else "file or command on PATH"
        raise ConfigurationError(f"{label} {spec}: no such {what} (or it is not executable).", fix=_FIX)
    try:
        completed = child_processes.run_bounded([found, *PYTHON_QUERY], timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise ConfigurationError(
            f"{label} {echoed(spec)} did not answer within {TIMEOUT_SECONDS} s (it was stopped, with what it started).",
            fix=_FIX,
        ) from None
    except OSError as exc:
        raise ConfigurationError(
            f"{label} {echoed(spec)} could not be run ({exc.strerror or exc}).", fix=_FIX
        ) from None
    answer = parse_answer(completed.stdout, label)
    if answer is None:
        output = (completed.stderr or completed.stdout).strip().splitlines()
        raise ConfigurationError(
            f"{label} {echoed(spec)} did not answer like a Python interpreter (exit status {completed.returncode}: "
            f"{echoed(output[-1]) if output else 'no output'}).",
            fix=_FIX,
        )
    return answer.info


def with_python(facts: Facts, spec: str, label: str = "--python") -> tuple[Facts, str]:
    """The facts with the interpreter at `spec` among their Pythons (asked when the probe did not list it), and
    that interpreter's executable as it names itself (sys.executable: a name on PATH resolves to its path)."""
    listed = facts.pythons or (facts.python,)
    if any(p.executable == spec for p in listed):
        return facts, spec
    asked = ask_python(spec, label)
    # Its own sys.executable, not the resolved file: a venv's python links to its base interpreter's.
    if any(p.executable == asked.executable for p in listed):
        return replace(facts, pythons=listed), asked.executable
    return replace(facts, pythons=(*listed, asked)), asked.executable
