"""The nightly's own files made hostile, through `invoke nightly` and `invoke nightly-site`
as the scheduler runs them (issue 29 point 4): a lock, state or summary nested 100,000 deep, a lock whose PID
or time is no number a process has, keep_days past a date's range, min_free_gb = nan. Each ends in a clear
message and its documented exit code, never a traceback; the tool's own files are taken over or rebuilt.

The matrix's one entry names a repository that does not exist, so it fails in its first second (exit 5)
and a night costs about one process start; what is checked is what happens around it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nightly_support import REPO_ROOT, run_nightly, summaries, write_matrix

DEEP = "[" * 100_000 + "]" * 100_000
ENTRY = {"name": "cpu", "cuda": "cpu"}


def _matrix(tmp_path: Path, **settings: object) -> Path:
    entry = {**ENTRY, "repo": str(tmp_path / "no-such-repo")}
    return write_matrix(tmp_path / "matrix.toml", [entry], output_dir=tmp_path / "out", **settings)  # type: ignore[arg-type]


def _lock(pid: str | None = None, created: str | None = None) -> str:
    """A lock file as the nightly writes it, with `pid` and `created` as raw JSON number text."""
    pid = pid or str(os.getpid())  # this test's process: alive on this host
    created = created or repr(time.time() - 60)
    host = json.dumps(socket.gethostname())
    return (
        f'{{"pid": {pid}, "started": "2026-01-01T03:00:00+00:00", "created": {created}, "host": {host}, '
        '"command": "invoke nightly"}'
    )


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr and "internal error" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(DEEP, id="nested 100,000 deep"),
        pytest.param(_lock(pid="-5"), id="pid -5"),
        pytest.param(_lock(pid="1e999"), id="pid 1e999"),
        pytest.param(_lock(created="1e999"), id="created 1e999"),
        # a live PID (this test's) with a time far ahead: it would be "alive" every night, and every night busy
        pytest.param(_lock(created="1e300"), id="created far in the future"),
    ],
)
def test_a_damaged_lock_is_taken_over_and_the_night_runs(tmp_path: Path, content: str) -> None:
    lock = tmp_path / "cache" / "nightly" / "nightly.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(content, encoding="utf-8")
    done = run_nightly("--matrix", str(_matrix(tmp_path)), "--cache-dir", str(tmp_path / "cache"))
    _no_traceback(done)
    assert done.returncode == 5, done.stdout + done.stderr  # the entry's own failure: the night ran
    assert f"-- The nightly lock {lock} is unreadable (" in done.stdout and "; taking it over." in done.stdout
    assert len(summaries(tmp_path / "out")) == 1 and not lock.exists()  # the summary written, the lock released


def test_a_state_file_nested_deep_costs_a_rebuild_not_the_night(tmp_path: Path) -> None:
    state = tmp_path / "out" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text(DEEP, encoding="utf-8")
    done = run_nightly("--matrix", str(_matrix(tmp_path)), "--cache-dir", str(tmp_path / "cache"))
    _no_traceback(done)
    assert done.returncode == 5, done.stdout + done.stderr
    assert f"-- {state} is unreadable (nested too deeply" in done.stdout
    assert "every entry is built this time." in done.stdout and len(summaries(tmp_path / "out")) == 1


@pytest.mark.parametrize(
    ("args", "settings", "message"),
    [
        pytest.param(
            ["--keep-days", "1000000"], {}, "--keep-days 1000000: expected 1 to 36500 days.", id="--keep-days 1000000"
        ),
        pytest.param(
            [],
            {"keep_days": 9223372036854775807},
            "settings.keep_days: expected a whole number of days from 1 to 36500 (100 years), got 9223372036854775807.",
            id="keep_days 2**63-1",
        ),
        pytest.param(
            [],
            {"min_free_gb": "nan"},
            "settings.min_free_gb: expected a number of GB, 0 or more, got nan.",
            id="min_free_gb nan",
        ),
        pytest.param(
            [],
            {"min_free_gb": "inf"},
            "settings.min_free_gb: expected a number of GB, 0 or more, got inf.",
            id="min_free_gb inf",
        ),
    ],
)
def test_a_number_out_of_range_is_refused_before_the_night(
    tmp_path: Path, args: list[str], settings: dict[str, object], message: str
) -> None:
    """keep_days past a date's range used to pass and crash retention after every entry had built; nan made the
    disk check always pass."""
    matrix = _matrix(tmp_path)
    text = matrix.read_text(encoding="utf-8")
    for key, value in settings.items():
        text = "\n".join(f"{key} = {value}" if line.startswith(f"{key} = ") else line for line in text.splitlines())
    matrix.write_text(text, encoding="utf-8")
    done = run_nightly("--matrix", str(matrix), "--cache-dir", str(tmp_path / "cache"), *args)
    _no_traceback(done)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in " ".join(done.stderr.split())
    assert not (tmp_path / "out").exists()  # refused before the lock, the clone or any build


def test_an_entry_s_min_free_gb_nan_is_refused(tmp_path: Path) -> None:
    matrix = _matrix(tmp_path)
    matrix.write_text(matrix.read_text(encoding="utf-8") + "min_free_gb = nan\n", encoding="utf-8")
    done = run_nightly("--matrix", str(matrix), "--cache-dir", str(tmp_path / "cache"))
    _no_traceback(done)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "entry 'cpu'.min_free_gb: expected a number of GB, 0 or more, got nan." in " ".join(done.stderr.split())


def _site(out: Path) -> subprocess.CompletedProcess[str]:
    """`invoke nightly-site OUT`, as nightly.yml runs it."""
    return subprocess.run(
        [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), "nightly-site", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_the_site_lists_a_deep_summary_and_rebuilds_a_deep_hash_cache(tmp_path: Path) -> None:
    """`invoke nightly-site`: a summary nested 100,000 deep is named on the dashboard as
    unreadable, the wheel hash cache (the site's own) is written again, and the index lists the wheel."""
    out = tmp_path / "out"
    wheel = out / "2026-01-02" / "cpu" / "torch-2.0.0-cp311-cp311-linux_x86_64.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"a wheel's bytes")
    (out / "2026-01-02" / "nightly-20260102-030000.json").write_text(DEEP, encoding="utf-8")
    (out / ".wheel-hashes.json").write_text(DEEP, encoding="utf-8")
    done = _site(out)
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert "(1 wheel(s): torch (1))" in done.stdout
    dashboard = (out / "index.html").read_text(encoding="utf-8")
    assert "2026-01-02/nightly-20260102-030000.json: unreadable (nested too deeply" in dashboard
    hashes = json.loads((out / ".wheel-hashes.json").read_text(encoding="utf-8"))
    assert list(hashes["wheels"]) == ["2026-01-02/cpu/torch-2.0.0-cp311-cp311-linux_x86_64.whl"]
    assert wheel.read_bytes() == b"a wheel's bytes"


def test_the_site_shows_a_summary_s_number_beyond_a_float_as_unknown(tmp_path: Path) -> None:
    """A summary's seconds, stage times or cache counts of 10**400 stopped the whole site (OverflowError)."""
    out = tmp_path / "out"
    (out / "2026-01-02").mkdir(parents=True)
    huge = 10**400
    summary = {
        "started": "2026-01-02T03:00:00+00:00",
        "entries": [
            {
                "name": "cpu",
                "result": "failed",
                "seconds": huge,
                "stages": {"source": huge},
                "compiler_cache": {"hits": huge, "misses": 1},
            }
        ],
    }
    (out / "2026-01-02" / "nightly-20260102-030000.json").write_text(json.dumps(summary), encoding="utf-8")
    done = _site(out)
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    dashboard = (out / "index.html").read_text(encoding="utf-8")
    assert 'data-entry="cpu"' in dashboard and "1000000000000000" not in dashboard
