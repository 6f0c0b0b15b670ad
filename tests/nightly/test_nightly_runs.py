"""`invoke nightly` over a matrix of real builds of mini torch from a real git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from nightly_support import commit_all, entries_by_name, git, run_nightly, summaries, write_matrix

pytestmark = pytest.mark.build


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


def _old_folder(output: Path, days_ago: int) -> Path:
    return output / (date.fromisoformat(_today()) - timedelta(days=days_ago)).isoformat()


def test_one_failing_entry_never_stops_the_others(mini_repo: Path, tmp_path: Path) -> None:
    output, cache = tmp_path / "dist" / "nightly", tmp_path / "cache"
    # Outputs of earlier nights: a folder that retention removes, and the only wheel of an
    # entry that has since left the matrix, which it must keep however old.
    expired = _old_folder(output, 10) / "cpu"
    expired.mkdir(parents=True)
    (expired / "build-old.log").write_text("an old log\n")
    retired = _old_folder(output, 30) / "retired-entry"
    retired.mkdir(parents=True)
    (retired / "old-0.1-py3-none-any.whl").write_bytes(b"an old wheel")
    (retired / "old-0.1-py3-none-any.whl.nightly.json").write_text("{}\n")
    (retired / "build-old.log").write_text("its old log\n")
    matrix = write_matrix(
        tmp_path / "matrix.toml",
        [
            {
                "name": "cpu",
                "repo": str(mini_repo),
                "ref": "main",
                "cuda": "cpu",
                "python": "current",
                "compiler_cache": "ccache",
                "env": {"MAX_JOBS": "2"},
            },
            {"name": "cpu-broken", "repo": str(mini_repo), "ref": "broken", "cuda": "cpu", "compiler_cache": "none"},
            {"name": "cpu-no-room", "repo": str(mini_repo), "ref": "main", "cuda": "cpu", "min_free_gb": 10_000_000},
            {
                "name": "cpu-py",
                "repo": str(mini_repo),
                "cuda": "cpu",
                "python": f"{sys.version_info.major}.{sys.version_info.minor}",
                "compiler_cache": "none",
            },
        ],
        output_dir=output,
        keep_days=3,
    )
    step_summary, step_output = tmp_path / "step-summary.md", tmp_path / "step-output.txt"
    step_summary.write_text("## Earlier step\n", encoding="utf-8")

    done = run_nightly(
        "--matrix",
        str(matrix),
        "--cache-dir",
        str(cache),
        env={"GITHUB_STEP_SUMMARY": str(step_summary), "GITHUB_OUTPUT": str(step_output)},
    )

    assert done.returncode == 5, done.stdout[-3000:] + done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "build failed: 2 of 4 nightly entries failed: cpu-broken (at build), cpu-no-room (at disk). Fix: read the "
        "failures in "
    )
    [summary] = summaries(output)
    assert summary["result"] == "failed" and summary["counts"] == {
        "success": 2,
        "failed": 2,
        "skipped": 0,
        "interrupted": 0,
        "not run": 0,
    }
    entries = entries_by_name(summary)
    revision = git(mini_repo, "rev-parse", "main")
    run_dir = output / _today()

    for name in ("cpu", "cpu-py"):
        entry = entries[name]
        assert (
            entry["result"] == "success"
            and entry["revision"] == revision
            and entry["python"] == ".".join(map(str, sys.version_info[:3]))
        )
        wheel = Path(entry["wheel"])
        assert (
            wheel.parent == run_dir / name
            and wheel.name.startswith("mini_torch-2.13.0a0+mini-")
            and wheel.suffix == ".whl"
        )
        record = json.loads(wheel.with_name(wheel.name + ".nightly.json").read_text())
        assert (
            record["revision"] == revision
            and record["entry"] == name
            and record["report"] == Path(entry["report"]).name
        )
        report = json.loads(Path(entry["report"]).read_text())
        assert (
            report["result"] == "success"
            and report["verification"]["ok"] is True
            and report["command"][1:]
            == ["-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", "dist", "."]
        )  # 2.5+ eras: pip, not setup.py (eras.toml)
        assert Path(entry["log"]).parent == run_dir / name
        assert {"disk", "source", "plan", "deps", "cache", "build", "compile", "collect"} <= set(entry["stages"])
    # The entry's own variables reached its build, after the plan's.
    cpu_report = json.loads(Path(entries["cpu"]["report"]).read_text())
    assert cpu_report["environment"]["MAX_JOBS"] == "2"
    assert {"name": "MAX_JOBS", "value": "2", "action": "set", "reason": f"entry 'cpu' of {matrix}"} in cpu_report[
        "plan"
    ]["changes"]
    assert entries["cpu"]["compiler_cache"]["engine"] == "ccache" and entries["cpu"]["compiler_cache"]["misses"] > 0

    broken = entries["cpu-broken"]
    assert (
        broken["result"] == "failed"
        and broken["stage"] == "build"
        and broken["exit_code"] == 5
        and broken["wheel"] is None
    )
    assert broken["revision"] == git(mini_repo, "rev-parse", "broken")
    assert (
        "broken.cpp" in broken["first_error"]["summary"]["text"] and "error" in broken["first_error"]["summary"]["text"]
    )
    assert Path(broken["log"]).is_file() and json.loads(Path(broken["report"]).read_text())["result"] == "failed"
    assert not list((run_dir / "cpu-broken").glob("*.whl"))

    no_room = entries["cpu-no-room"]
    assert no_room["result"] == "failed" and no_room["stage"] == "disk" and no_room["exit_code"] == 3
    assert (
        "needs 1e+07 GB free" in no_room["error"] and no_room["revision"] is None
    )  # failed before touching the source

    # Markdown: in the run folder, and appended to the job summary after the earlier step's text.
    [markdown_file] = list(run_dir.glob("nightly-*.md"))
    text = markdown_file.read_text(encoding="utf-8")
    assert text.startswith(f"## PyTorch nightly {_today()}: 2 of 4 built, 2 failed")
    assert (
        "| cpu-broken | ❌ failed at build |" in text
        and "### ❌ cpu-broken: failed at build" in text
        and "broken.cpp" in text
    )
    assert "| cpu | ✅ success |" in text and f"`{revision[:12]}`" in text
    assert step_summary.read_text(encoding="utf-8") == "## Earlier step\n" + text
    outputs = dict(line.split("=", 1) for line in step_output.read_text().splitlines())
    assert outputs == {
        "run-dir": str(run_dir),
        "summary-json": str(markdown_file.with_suffix(".json")),
        "summary-md": str(markdown_file),
    }

    # Retention (3 days): the expired folder is gone, the retired entry's only wheel stays.
    assert not expired.parent.exists()
    assert (retired / "old-0.1-py3-none-any.whl").is_file() and (
        retired / "old-0.1-py3-none-any.whl.nightly.json"
    ).is_file()
    assert not (retired / "build-old.log").exists()
    assert summary["retention"]["removed_folders"] == [str(expired.parent)]
    assert summary["retention"]["kept_wheels"] == [str(retired / "old-0.1-py3-none-any.whl")]
    assert not (cache / "nightly" / "nightly.lock").exists()


def test_unchanged_entries_are_skipped_until_source_or_configuration_change(mini_repo: Path, tmp_path: Path) -> None:
    output, cache = tmp_path / "out", tmp_path / "cache"
    entry = {"name": "cpu", "repo": str(mini_repo), "ref": "main", "cuda": "cpu", "compiler_cache": "none"}
    matrix = write_matrix(tmp_path / "matrix.toml", [entry], output_dir=output)
    args = ("--matrix", str(matrix), "--cache-dir", str(cache))

    def night(*extra: str) -> dict:
        done = run_nightly(*args, *extra)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr
        time.sleep(1.01 - time.time() % 1.0)  # summaries are named by the second: the next night starts in a new one
        return entries_by_name(summaries(output)[-1])["cpu"]

    first = night()
    assert first["result"] == "success"
    clone_git = cache / "nightly" / "src" / "cpu" / ".git"
    before = {path: path.stat().st_mtime_ns for path in clone_git.rglob("*")}
    second = night()
    assert (
        second["result"] == "skipped" and second["wheel"] == first["wheel"] and second["revision"] == first["revision"]
    )
    # Decided from `git ls-remote` and the plan alone: no fetch, checkout or submodule work touched the clone.
    assert {path: path.stat().st_mtime_ns for path in clone_git.rglob("*")} == before
    assert second["config_hash"] == first["config_hash"] and "build" not in second["stages"]
    assert any("unchanged since the success of" in note for note in second["notes"])

    forced = night("--force")
    assert forced["result"] == "success" and "build" in forced["stages"]
    assert summaries(output)[-1]["forced"] is True

    (mini_repo / "csrc" / "ops.cpp").write_text((mini_repo / "csrc" / "ops.cpp").read_text() + "// a new revision\n")
    new_revision = commit_all(mini_repo, "a new revision")
    moved = night()
    assert moved["result"] == "success" and moved["revision"] == new_revision != first["revision"]

    write_matrix(tmp_path / "matrix.toml", [{**entry, "env": {"BUILD_TEST": "0"}}], output_dir=output)
    reconfigured = night()
    assert reconfigured["result"] == "success" and reconfigured["config_hash"] != moved["config_hash"]
    assert night()["result"] == "skipped"

    state = json.loads((output / "state.json").read_text())
    assert (
        state["entries"]["cpu"]["revision"] == new_revision
        and state["entries"]["cpu"]["config_hash"] == reconfigured["config_hash"]
    )

    # The recorded wheel is gone (someone cleaned the folder): build again rather than skip.
    Path(reconfigured["wheel"]).unlink()
    rebuilt = night()
    assert rebuilt["result"] == "success" and Path(rebuilt["wheel"]).is_file()
    assert any("is gone: building again" in note for note in rebuilt["notes"])


def test_a_dead_holder_s_lock_is_taken_over(mini_repo: Path, tmp_path: Path) -> None:
    cache, output = tmp_path / "cache", tmp_path / "out"
    matrix = write_matrix(
        tmp_path / "matrix.toml",
        [{"name": "cpu", "repo": str(mini_repo), "cuda": "cpu", "compiler_cache": "none"}],
        output_dir=output,
    )
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead_pid = int(gone.stdout)
    lock = cache / "nightly" / "nightly.lock"
    lock.parent.mkdir(parents=True)
    stale = {
        "pid": dead_pid,
        "started": "2026-01-01T03:00:00+00:00",
        "created": time.time() - 3600,
        "host": os.uname().nodename,
        "command": "invoke nightly",
    }
    lock.write_text(json.dumps(stale))

    done = run_nightly("--matrix", str(matrix), "--cache-dir", str(cache))

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert (
        f"-- Taking over the nightly lock {lock}: its holder, PID {dead_pid} on {os.uname().nodename}, started "
        "2026-01-01T03:00:00+00:00 (invoke nightly), is no longer running." in done.stdout
    )
    assert entries_by_name(summaries(output)[-1])["cpu"]["result"] == "success"
    assert not lock.exists()
