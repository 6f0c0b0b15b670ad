"""Where the build venv of a plan lives and what it holds: one venv per (era, build Python, requirement set).

The folder's name carries a key made from the base interpreter and the pinned requirements, so a
changed interpreter or requirement set gets a new venv and an unchanged one is reused
(builder/build_venv.py makes and checks it). Pure: it names paths for the plan's machine.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath, PureWindowsPath

from pytorch_winbuild.knowledge.build_requirements import Requirement

# How requirements go into the venv, printed and run alike: no prompt, no "new pip" notice.
PIP_INSTALL = ("-m", "pip", "install", "--disable-pip-version-check", "--no-input")


@dataclass(frozen=True)
class VenvPlan:
    """The build venv: made from `base` (the build Python), holding `requirements`."""

    base: str  # the build Python's executable
    folder: str  # <cache>/venvs/<era>-py<X.Y>-<key>
    python: str  # the venv's interpreter: every command of the era runs under it
    key: str
    requirements: tuple[Requirement, ...]

    @property
    def specs(self) -> tuple[str, ...]:
        return tuple(r.spec for r in self.requirements)


def venv_key(base_python: str, python_version: str, specs: tuple[str, ...]) -> str:
    """12 hex digits of SHA-256 over the interpreter and the sorted requirement specs."""
    text = json.dumps([base_python, python_version, sorted(specs)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def venv_python(folder: PurePath, windows: bool) -> PurePath:
    """A venv's interpreter: Scripts\\python.exe on Windows, bin/python elsewhere (the venv module's layout)."""
    return folder / "Scripts" / "python.exe" if windows else folder / "bin" / "python"


def plan_venv(
    os_name: str,
    cache_dir: str,
    era_name: str,
    base_python: str,
    python_version: str,
    requirements: tuple[Requirement, ...],
) -> VenvPlan:
    """The venv of this (era, build Python, requirements) under the plan's cache folder."""
    windows = os_name == "windows"
    path_type: type[PurePath] = PureWindowsPath if windows else PurePosixPath
    minor = ".".join(python_version.split(".")[:2])
    key = venv_key(base_python, python_version, tuple(r.spec for r in requirements))
    safe_era = "".join(ch if ch.isalnum() or ch in ".-" else "_" for ch in era_name)  # "2.9+" → "2.9_"
    folder = path_type(cache_dir) / "venvs" / f"{safe_era}-py{minor}-{key}"
    return VenvPlan(
        base=base_python,
        folder=str(folder),
        python=str(venv_python(folder, windows)),
        key=key,
        requirements=requirements,
    )
