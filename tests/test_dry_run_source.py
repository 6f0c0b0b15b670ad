"""A dry run says which tree it plans for (issue 27, points 2 and 3): the checkout, the --repo/--ref it would
check out (a release tag pins that release's era before any clone), or none, which it says first.

Expected values come from outside the code: PyTorch 1.0.1's Windows CI used MKL 2018.2.185 (build_config/eras.toml
cites v1.0.1's .jenkins scripts), and mini torch's version.txt says 2.13.0a0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support import REPO_ROOT, run_invoke

HOST = REPO_ROOT / "build_config" / "hosts" / "vs2017-cuda90-cuda100.json"
REPO = "https://github.com/pytorch/pytorch"


def dry_run(*args: str, cwd: Path) -> dict:
    done = run_invoke("build", "--dry-run", "--format", "json", *args, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_a_release_tag_ref_plans_that_release_before_any_clone(tmp_path: Path) -> None:
    plan = dry_run("--cuda", "10.0", "--repo", REPO, "--ref", "v1.0.1", "--host", str(HOST), cwd=tmp_path)
    assert plan["pytorch_version"] == "1.0.1" and plan["era"] == "1.0"
    assert plan["pytorch_version_source"] == "--ref v1.0.1, a release tag"
    assert [a["version"] for a in plan["archives"] if a["name"] == "mkl"] == ["2018.2.185"]
    assert plan["source"].startswith(f"{REPO} at v1.0.1, not checked out yet")
    assert not any("not a release tag" in w for w in plan["warnings"])


def test_a_branch_ref_says_the_era_is_decided_after_the_checkout(tmp_path: Path) -> None:
    plan = dry_run("--cuda", "cpu", "--repo", REPO, "--ref", "main", "--host", str(HOST), cwd=tmp_path)
    warning = next(w for w in plan["warnings"] if "not a release tag" in w)
    assert warning.startswith(f"{REPO} at main is not checked out yet")
    assert "the build decides the era from the checkout's version" in warning


def test_no_source_is_said_first(tmp_path: Path) -> None:
    done = run_invoke("build", "--dry-run", "--cuda", "cpu", "--host", str(HOST), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    assert rows[1].startswith("Source") and "none: not in a PyTorch checkout" in rows[1]
    text = " ".join(done.stdout.split())
    assert f"No PyTorch source: {tmp_path} is not a PyTorch checkout" in text
    real = run_invoke("build", "--cuda", "cpu", cwd=tmp_path)  # what the warning says the real build does
    assert real.returncode == 2 and "is not a PyTorch checkout" in real.stderr


def test_a_checkout_is_named_with_its_version(tmp_path: Path) -> None:
    tree = tmp_path / "pytorch"
    shutil.copytree(REPO_ROOT / "tests" / "build" / "fixtures" / "mini_torch", tree)
    plan = dry_run("--cuda", "cpu", "--cache-dir", str(tmp_path / "cache"), cwd=tree)  # this machine
    assert plan["source"] == f"{tree} (PyTorch 2.13.0a0, from {tree / 'version.txt'})"
    assert plan["pytorch_version"] == "2.13.0a0"
    assert not any("No PyTorch source" in w for w in plan["warnings"])


def test_a_flag_of_other_tasks_names_them_not_a_look_alike(tmp_path: Path) -> None:
    """Issue 27, point 6: `fetch-deps --host X` said "did you mean --jobs?". --host plans for another machine; the
    tasks that take it are named (and build --dry-run --host prints that machine's exact fetch-deps line)."""
    done = run_invoke("fetch-deps", "--host", str(HOST), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(
        "configuration error: `invoke fetch-deps` has no flag --host; build, doctor, env have it."
    )
    assert "--jobs" not in done.stderr and "Traceback" not in done.stderr
    typo = run_invoke("fetch-deps", "--jbos", "2", cwd=tmp_path)
    assert typo.returncode == 2 and "did you mean --jobs?" in typo.stderr


def test_a_script_names_the_file_it_was_written_to_and_that_line_runs(tmp_path: Path) -> None:
    """Issue 27, point 8: `env --format sh --output X` said "Use it with: . ./build_env.sh" whatever X was. The
    script's "Run it" line, pasted into bash from the folder the user is in, sources the very file."""
    import subprocess

    script = tmp_path / "my env" / "linux build.sh"
    script.parent.mkdir()
    done = run_invoke("env", "--cuda", "cpu", "--format", "sh", "--output", str(script), "--cache-dir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    hint = script.read_text().splitlines()[1]
    assert hint.startswith("# Run it:  . ")
    line = hint.removeprefix("# Run it:  ")
    ran = subprocess.run(
        ["bash", "-c", f'{line} && printf %s "$MAX_JOBS"'], cwd=tmp_path, capture_output=True, text=True
    )
    assert ran.returncode == 0 and ran.stdout.isdigit(), ran.stderr
    printed = run_invoke("env", "--cuda", "9.0", "--format", "bat", "--host", str(HOST), cwd=tmp_path)
    assert 'rem Save it with --output build_env.bat, then run it:  call "build_env.bat"' in printed.stdout


def test_cuda_words_are_read_alike_by_every_task(tmp_path: Path) -> None:
    """Issue 27, point 10: fetch-deps took --cuda CPU while build refused it. Both read cpu/auto in any case."""
    upper = dry_run("--cuda", "CPU", "--host", str(HOST), cwd=tmp_path)
    lower = dry_run("--cuda", "cpu", "--host", str(HOST), cwd=tmp_path)
    assert upper["cuda"] is None and upper["changes"] == lower["changes"]
    fetched = run_invoke("fetch-deps", "--cuda", "CPU", "--dry-run", cwd=tmp_path)
    assert fetched.returncode == 0 and "MAGMA" not in fetched.stdout.split("\n", 1)[1]
