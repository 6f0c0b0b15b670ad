"""The build venv of a cache's last `invoke build` is the Python the next tasks mean (issue 38, points 2 and 3).

`invoke verify` without --python checks it, and `invoke build-ext` without --python builds against its torch when
the tool's own Python has none. Both only hold if the venv is remembered whatever the build's outcome: a build
whose verification fails says "run invoke verify to repeat the check", and that must check the same Python. All
real: mini torch built by `invoke build` into a build venv pip fills, the tool run from a venv made with
`python -m venv` that has the tool's dependencies and no torch, and the extension's setup.py importing the torch
of the Python it runs with.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from build_support import REPO_ROOT, last_report, run_invoke

pytestmark = pytest.mark.build

# The extension: its setup.py says which Python ran it and which torch that Python imported.
PROBE_SETUP = """\
import sys

import torch
from setuptools import setup

print("built against", sys.executable, torch.__version__, flush=True)
setup(name="probe-ext", version="0.1")
"""


def one_paragraph(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def torchless_tool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python that runs pytorch-winbuild and has no torch: a venv of this Python (`python -m venv`) with the
    tool's dependencies from pyproject.toml, as the README's first command makes one (the package itself is
    imported from the repository root, where `python -m invoke` runs)."""
    folder = tmp_path_factory.mktemp("tool") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    dependencies = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *dependencies],
        check=True,
        timeout=600,
    )
    assert subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode != 0
    return python


def test_verify_after_a_failed_verification_checks_the_build_venv(venv_python: Path, mini_source: Path, tmp_path: Path):
    """The build installs a mini torch whose import fails, so it exits 6 with "run `... verify ...` to repeat the
    check". The tool's own Python (venv_python) sees this Python's real torch, which imports: before the fix,
    verify checked that one and said all was well."""
    init = mini_source / "torch" / "__init__.py"
    init.write_text(init.read_text() + 'raise RuntimeError("mini torch: this build is broken on purpose")\n')
    cache = tmp_path / "cache"

    failed = run_invoke(
        venv_python, "build", "--source", str(mini_source), "--cuda", "cpu", "--compiler-cache", "none",
        "--cache-dir", str(cache),
    )  # fmt: skip

    assert failed.returncode == 6, failed.stdout[-3000:] + failed.stderr
    report = last_report(cache / "logs")
    built_by = report["plan"]["venv"]["python"]
    assert report["result"] == "verification failed" and report["verification"]["interpreter"] == built_by
    paragraph = one_paragraph(failed.stderr)
    assert "this build is broken on purpose" in paragraph
    [repeat] = re.findall(r"run `([^`]+)` to repeat the check", paragraph)
    assert repeat == f"invoke verify --cache-dir {shlex.quote(str(cache))}"  # the cache that remembers the venv

    again = run_invoke(venv_python, *shlex.split(repeat)[1:])  # as printed

    assert again.returncode == 6, again.stdout[-3000:] + again.stderr
    checked = json.loads(again.stdout)
    assert checked["interpreter"] == built_by and checked["failed_step"] == "import torch"
    assert "this build is broken on purpose" in checked["error"]


def test_build_ext_builds_against_the_torch_of_the_last_build(
    torchless_tool: Path, venv_python: Path, mini_source: Path, tmp_path: Path
):
    """The tool's Python has no torch. Before any build, build-ext's fix says what to run; run as printed (mini
    torch as the checkout), `invoke build` puts torch into the cache's build venv, and build-ext then builds against
    it and says so. A Python running the tool that has torch of its own comes first, and the plan says that too."""
    extension = tmp_path / "ext"
    extension.mkdir()
    (extension / "setup.py").write_text(PROBE_SETUP, encoding="utf-8")
    cache = tmp_path / "cache"
    build_ext = ("build-ext", str(extension), "--cuda", "cpu", "--compiler-cache", "none", "--cache-dir", str(cache))

    refused = run_invoke(torchless_tool, *build_ext)

    assert refused.returncode == 3, refused.stdout[-3000:] + refused.stderr
    paragraph = one_paragraph(refused.stderr)
    assert f"torch is not installed in the Python running this task ({torchless_tool})" in paragraph
    assert f"this cache ({cache}) holds no build venv of an `invoke build`" in paragraph
    assert f"install torch into this Python: `{torchless_tool} -m pip install torch`" in paragraph
    [build_way] = re.findall(r"`(invoke build [^`]+)`", paragraph)
    assert build_way == f"invoke build --source DIR --cache-dir {cache}"

    # DIR is the user's checkout; this machine has CUDA but no GPU, so the user builds for the CPU.
    built = run_invoke(
        torchless_tool, *shlex.split(build_way.replace("DIR", shlex.quote(str(mini_source))))[1:], "--cuda", "cpu"
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr
    venv = last_report(cache / "logs")["plan"]["venv"]["python"]

    done = run_invoke(torchless_tool, *build_ext)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    [report_file] = (cache / "logs").glob("build-ext-*.json")
    report = json.loads(report_file.read_text(encoding="utf-8"))
    assert report["command"] == [venv, "setup.py", "build_ext", "--inplace"]
    assert report["plan"]["pytorch_version"] == "2.13.0a0+mini"
    decision = (
        f"Build Python (no --python): {venv}, the build venv of this cache's last `invoke build`, which has torch "
        f"2.13.0a0+mini, the torch the extension builds against; the Python running this task ({torchless_tool}) "
        "has none."
    )
    assert decision in report["plan"]["decisions"]
    assert f"-- {decision}" in one_paragraph(done.stdout)
    assert f"built against {venv} 2.13.0a0+mini" in Path(report["log"]).read_text(encoding="utf-8")

    # A Python with torch of its own running the tool: that torch, and the plan names the other way.
    own = run_invoke(venv_python, *build_ext)

    assert own.returncode == 0, own.stdout[-3000:] + own.stderr
    mine = max((cache / "logs").glob("build-ext-*.json"), key=lambda path: path.stat().st_mtime_ns)
    report = json.loads(mine.read_text(encoding="utf-8"))
    assert report["command"][0] == str(venv_python)
    assert (
        f"Build Python (no --python): {venv_python}, the Python running this task, which has torch "
        f"{version('torch')}, the torch the extension builds against; --python {venv} would take the torch of this "
        "cache's last `invoke build` instead." in report["plan"]["decisions"]
    )
