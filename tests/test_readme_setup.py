"""The README's bash blocks, run as printed in a fresh copy of the repository: the first command sets
itself up (a venv, pip, then the tool from the venv without activating it) and every other bash line
then runs with the venv's scripts first on PATH, as after `. .venv/bin/activate`.

`bash .ci/run` is the one line not run here: it is CI's own entry point, which runs this test.
The copy holds what a clone holds (git's tracked and untracked-but-not-ignored files), so a step done
by hand in this checkout cannot hide a missing one. pip installs from this machine's configured index
(PyPI in CI), hence the `pypi` tier.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from doc_blocks import readme_blocks
from support import REPO_ROOT

pytestmark = pytest.mark.pypi
SETUP_TIMEOUT = 600


def _fresh_copy(target: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():  # a deleted file is still listed by --cached until committed
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _shell_env() -> dict[str, str]:
    """This shell's environment without a venv or Python path of the test run's own (the tool's cache is then
    the copy's own cache/ folder, its default in a checkout)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "activate").is_file())
    return env


def test_the_readme_bash_lines_run_as_printed_in_a_fresh_copy(tmp_path: Path):
    copy = _fresh_copy(tmp_path / "pytorch-winbuild")
    env = _shell_env()
    first, *rest = [command for block in readme_blocks("bash") for command in block.commands()]
    setup = subprocess.run(
        ["bash", "-c", first], cwd=copy, env=env, capture_output=True, text=True, timeout=SETUP_TIMEOUT
    )
    assert setup.returncode == 0, f"{first}\n{setup.stdout[-3000:]}\n{setup.stderr[-3000:]}"
    assert "Ready to plan: .venv/bin/invoke build --dry-run" in setup.stdout, setup.stdout[-3000:]
    assert "Plan for PyTorch" in setup.stdout
    activated = {
        **env,
        "PATH": f"{copy / '.venv' / 'bin'}{os.pathsep}{env['PATH']}",
        "VIRTUAL_ENV": str(copy / ".venv"),
    }
    for command in rest:
        if command == "bash .ci/run":
            continue
        ran = subprocess.run(["bash", "-c", command], cwd=copy, env=activated, capture_output=True, text=True)
        assert ran.returncode == 0, f"{command}\n{ran.stderr}"
