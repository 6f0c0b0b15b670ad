"""Where each era's build looks for NvToolsExt, as its own files say (build_config/eras.toml `nvtoolsext_fixed`).

v1.1.0 torch/CMakeLists.txt sets NVTOOLEXT_HOME to "C:/Program Files/NVIDIA Corporation/NvToolsExt" and tests
`$ENV{NVTOOLEXT_HOME}` in a way that is never true, so no variable moves it; 1.0 (tools/setup_helpers/nvtoolext.py)
and 1.2 on (cmake/public/cuda.cmake, v1.13.1 lines 258-271) read NVTOOLSEXT_PATH. A 1.1 plan must not claim a
variable it does not read, and must stop before an hour of compiling when NvToolsExt is elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import HOSTS_DIR, run_invoke

DEFAULT = "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"
ELSEWHERE = "D:\\CUDA tools\\NvToolsExt"


@pytest.fixture
def moved_nvtx(tmp_path: Path) -> Path:
    """The README's machine with NvToolsExt installed in another folder (NVTOOLSEXT_PATH names it there)."""
    facts = json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))
    facts["nvtoolsext"] = ELSEWHERE
    for cuda in facts["cuda"]:
        cuda["nvtx"] = ELSEWHERE
    path = tmp_path / "moved-nvtx.json"
    path.write_text(json.dumps(facts), encoding="utf-8")
    return path


def _env(host: Path, *flags: str) -> dict[str, str]:
    result = run_invoke("build", "--dry-run", "--host", str(host), "--format", "json", *flags)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["env"]


def test_a_11_plan_sets_no_variable_its_build_does_not_read():
    host = HOSTS_DIR / "vs2017-cuda90-cuda100.json"
    assert "NVTOOLSEXT_PATH" not in _env(host, "--cuda", "9.0", "--pytorch-version", "1.1.0")
    plan = run_invoke("build", "--dry-run", "--host", str(host), "--cuda", "9.0", "--pytorch-version", "1.1.0")
    assert f"NvToolsExt: {DEFAULT}, the one folder PyTorch 1.1 links it" in plan.stdout.replace("\n    ", " ")


@pytest.mark.parametrize(("version", "cuda"), [("1.0.1", "9.0"), ("1.2.0", "10.0")])
def test_the_eras_around_it_read_nvtoolsext_path(moved_nvtx: Path, version: str, cuda: str):
    assert _env(moved_nvtx, "--cuda", cuda, "--pytorch-version", version)["NVTOOLSEXT_PATH"] == ELSEWHERE


def test_nvtoolsext_elsewhere_stops_a_11_plan_with_the_junction_that_fixes_it(moved_nvtx: Path):
    result = run_invoke("build", "--dry-run", "--host", str(moved_nvtx), "--cuda", "9.0", "--pytorch-version", "1.1.0")
    assert result.returncode == 3 and result.stderr.count("\n") == 1, result.stderr
    assert f"PyTorch 1.1 links NvToolsExt only from {DEFAULT}" in result.stderr
    assert f"and this machine's is {ELSEWHERE}" in result.stderr
    assert f'a junction there works: `mklink /J "{DEFAULT}" "{ELSEWHERE}"`' in result.stderr
    assert "pass --pytorch-version 1.0.1 (PyTorch 1.0)" in result.stderr


def test_an_unpinned_plan_passes_over_11_when_its_nvtoolsext_is_elsewhere(moved_nvtx: Path):
    """CUDA 9.0 with VS 2017 plans 1.1 by default (the newest era that builds it); with NvToolsExt elsewhere
    the newest that can link it is 1.0."""
    result = run_invoke("build", "--dry-run", "--host", str(moved_nvtx), "--cuda", "9.0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Plan for PyTorch 1.0.1 (era 1.0)")
