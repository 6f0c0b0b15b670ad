"""What the tool says agrees with what it does (issue 38, point 7): each test ran the command a user would and
failed before its fix."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support import HOSTS_DIR, REPO_ROOT, run_invoke


def test_a_plan_without_a_tree_is_for_the_release_pytorch_version_names(tmp_path: Path) -> None:
    """It said "this plan is for the newest era that fits" under "(from --pytorch-version) → era 1.0"."""
    result = run_invoke("build", "--cuda", "cpu", "--pytorch-version", "1.0.1", "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "PyTorch 1.0.1 (from --pytorch-version) → era 1.0." in text
    assert "so this plan is for PyTorch 1.0.1, which --pytorch-version names" in text
    assert "newest era that fits" not in text
    unpinned = " ".join(run_invoke("build", "--cuda", "cpu", "--dry-run", cwd=tmp_path).stdout.split())
    assert "so this plan is for the newest era that fits" in unpinned


def test_an_arch_list_a_cpu_build_does_not_use_is_said(tmp_path: Path) -> None:
    """--arch-list with --cuda cpu was dropped without a word."""
    result = run_invoke("build", "--cuda", "cpu", "--arch-list", "6.1", "--dry-run", "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "--arch-list 6.1 is not used: this is a CPU-only build" in result.stdout
    assert "TORCH_CUDA_ARCH_LIST" not in result.stdout.split('"env"')[1].split('"changes"')[0]


@pytest.mark.parametrize("given", ["BAT", "Json", " PS1 "])
def test_format_reads_any_case_as_cuda_does(tmp_path: Path, given: str) -> None:
    """--format BAT was refused while --cuda CPU was accepted (planned from a facts file: the live memory moves)."""
    host = tmp_path / "host.json"
    facts = json.loads((HOSTS_DIR / "vs2019-vs2022-cuda12.json").read_text(encoding="utf-8"))
    host.write_text(json.dumps(facts), encoding="utf-8")
    flags = ("--host", str(host), "--dry-run", "--format")
    result = run_invoke("build", "--cuda", "CPU", *flags, given, cwd=tmp_path)
    same = run_invoke("build", "--cuda", "cpu", *flags, given.strip().lower(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == same.stdout


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["--list"], ["build", "--help"]])
def test_a_reader_that_goes_away_ends_the_console_script_quietly(args: list[str]) -> None:
    """`pytorch-winbuild --help | head` printed a BrokenPipeError traceback (the console script, run from this
    checkout: the installed one may be another's)."""
    script = "import sys; sys.argv[0] = 'pytorch-winbuild'; from pytorch_winbuild.faces.program import main; main()"
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader is gone before the first line is written
    assert child.wait(timeout=60) == 0
    assert child.stderr.read() == b""


def test_fetch_deps_help_names_the_mkl_each_era_fetches() -> None:
    """`fetch-deps --help` said 2020.0.166 for PyTorch 1.7-1.13; eras.toml (each era's Windows CI, cited there)
    gives 1.11-1.13 2020.2.254. Every era's MKL and its first and last release are in the help's text."""
    from pytorch_winbuild.faces.help import FETCH_DEPS_HELP
    from pytorch_winbuild.knowledge.model import load_knowledge

    text = FETCH_DEPS_HELP["mkl_version"]
    spans: dict[str, list[str]] = {}
    for era in load_knowledge().eras:
        spans.setdefault(era.mkl, []).append(era.name)
    shown = re.findall(r"(\d{4}\.\d+\.\d+) \(([^)]*)\)", text)
    assert [mkl for mkl, _ in shown] == list(spans), shown
    for (mkl, releases), names in zip(shown, spans.values(), strict=True):
        first = names[0].split("-")[0]
        assert releases.removeprefix("PyTorch ").startswith(first), (mkl, releases, names)
        last = names[-1].split("-")[-1].rstrip("+")
        assert last in releases or releases.endswith("and newer"), (mkl, releases, names)


def _doctor_on_a_small_drive(tmp_path: Path, size: str) -> subprocess.CompletedProcess[str]:
    """`invoke doctor` with the cache (winbuild.cache_dir) on a tmpfs of `size`, in a private mount namespace."""
    cache = tmp_path / "cache"
    cache.mkdir(parents=True)
    doctor = [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), "doctor"]
    script = f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(cache))} || exit 90\n{shlex.join(doctor)}"
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        cwd=tmp_path,
        env={**os.environ, "INVOKE_WINBUILD_CACHE_DIR": str(cache), "PYTHONIOENCODING": "utf-8"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_doctor_checks_the_drives_the_plan_writes_to(tmp_path: Path) -> None:
    """The README said doctor checks for about 40 GB free, and it did not: it now weighs the drives of the source's
    build folder and the cache against what its plan writes there (the build's own preflight and figures)."""
    small = _doctor_on_a_small_drive(tmp_path / "small", "1m")
    assert small.returncode == 3, small.stdout + small.stderr
    text = " ".join(small.stdout.split())
    assert f"the drive of {tmp_path / 'small' / 'cache'} has 0.0 GiB free, and this build needs at least" in text
    assert "this machine's default plan fails" in small.stderr
    large = _doctor_on_a_small_drive(tmp_path / "large", "4t")
    assert large.returncode == 0 and "GiB free" not in large.stdout, large.stdout + large.stderr


@pytest.mark.parametrize(("minor", "said"), [("3.6", True), ("3.5", True), ("3.7", False)])
def test_fetch_deps_says_when_a_nuget_python_cannot_make_a_build_venv(tmp_path: Path, minor: str, said: bool) -> None:
    """fetch-deps --python 3.6 fetched a Python that plans refuse (no venv in NuGet's package before 3.7.4), and
    reference.md offered it as the way to get an era's Python: the fetch now says plans do not use it."""
    result = run_invoke("fetch-deps", "--python", minor, "--dry-run", "--cache-dir", str(tmp_path / "c"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert ("has no venv module" in result.stdout and "plans do not use it" in result.stdout) is said, result.stdout
