"""Helpers for the fleet tests: a "PyTorch repo" with one branch per entry, runners as processes, the plan and the
merge run as the workflow runs them, and a channel reduced to what must not depend on who built it.

Each entry builds mini torch from its own branch, whose version.txt differs (2.13.0a1, a2, a3), so each wheel
has its own file name and the combined index lists all three, as different PyTorch builds would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from nightly_support import REPO_ROOT, commit_all, git, make_repo, write_matrix

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"  # pip installs the wheels into a venv of it
ENTRIES = ("cpu-a", "cpu-b", "cpu-c")
FLEET_SECRET = "fleet-secret-9d2b7e51c4"  # a runner's secret: must appear nowhere a part or the channel holds
RUN_TIMEOUT = 600


def make_fleet_repo(folder: Path) -> Path:
    """mini torch with a branch per entry (fleet-a, fleet-b, fleet-c), each of its own version."""
    make_repo(folder)
    for number, name in enumerate(ENTRIES, 1):
        git(folder, "checkout", "-q", "-b", f"fleet-{name[-1]}", "main")
        (folder / "version.txt").write_text(f"2.13.0a{number}\n", encoding="utf-8")
        commit_all(folder, f"version 2.13.0a{number}")
    git(folder, "checkout", "-q", "main")
    return folder


def fleet_entries(repo: Path) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "repo": str(repo),
            "ref": f"fleet-{name[-1]}",
            "cuda": "cpu",
            "compiler_cache": "none",
            "python": PYTHON,
        }
        for name in ENTRIES
    ]


def fleet_matrix(path: Path, repo: Path, output_dir: Path, keep_days: int = 14) -> Path:
    return write_matrix(path, fleet_entries(repo), output_dir=output_dir, keep_days=keep_days)


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", **(extra or {})}
    for name in ("CI", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"):
        if name not in (extra or {}):
            env.pop(name, None)
    return env


def invoke_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), *args]


def start_runner(matrix: Path, folder: Path, *only: str) -> subprocess.Popen[str]:
    """A runner as its build job runs it: `invoke nightly --only NAME --output-dir PART` with its own cache,
    a secret in its environment (as the workflow's), output to <folder>/runner.log."""
    folder.mkdir(parents=True, exist_ok=True)
    selection = [word for name in only for word in ("--only", name)]
    command = invoke_command(
        "nightly",
        "--matrix",
        str(matrix),
        *selection,
        "--cache-dir",
        str(folder / "cache"),
        "--output-dir",
        str(folder / "part"),
    )
    log = (folder / "runner.log").open("w", encoding="utf-8")
    env = _env({"SCCACHE_REDIS_PASSWORD": FLEET_SECRET, "AWS_SECRET_ACCESS_KEY": FLEET_SECRET})
    return subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def wait_all(runners: dict[str, subprocess.Popen[str]], folders: dict[str, Path]) -> None:
    for name, process in runners.items():
        code = process.wait(timeout=RUN_TIMEOUT)
        log = (folders[name] / "runner.log").read_text(encoding="utf-8", errors="replace")
        assert code == 0, f"runner {name} exited {code}:\n{log[-4000:]}"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        invoke_command(*args),
        cwd=REPO_ROOT,
        env=_env(env),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=RUN_TIMEOUT,
    )


def plan_night(matrix: Path, plan_file: Path, *extra: str) -> dict[str, Any]:
    """`invoke nightly --matrix-json --plan-file FILE ...`: the matrix it printed (stdout is only the JSON)."""
    done = run("nightly", "--matrix", str(matrix), "--matrix-json", "--plan-file", str(plan_file), *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def merge(
    output: Path,
    *parts: Path,
    previous: Path | None = None,
    plan: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    args = ["nightly-merge", "--output-dir", str(output)]
    args += [word for part in parts for word in ("--part", str(part))]
    if previous is not None:
        args += ["--previous", str(previous)]
    if plan is not None:
        args += ["--plan", str(plan)]
    return run(*args, env=env)


# --------------------------------------------------------------------------------------------
# A channel, as far as it must not depend on how many runners built it
# --------------------------------------------------------------------------------------------

HASH = re.compile(r"sha256=[0-9a-f]{64}|\"sha256\": \"[0-9a-f]{64}\"")
# The summary's fields that record where and when, not what: a night of three runners differs there.
PLACE_AND_TIME = {"seconds", "stages", "log", "report", "config_hash", "hit_rate", "compiler_cache"}


def newest_summary(output: Path) -> dict[str, Any]:
    [*_, path] = sorted(output.glob("*/nightly-*.json"), key=lambda p: json.loads(p.read_text())["started"])
    return json.loads(path.read_text(encoding="utf-8"))


def comparable_entries(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary's entries without times, durations and the runner's own paths (the wheel: its file name and
    its place in the channel, relative to the night's folder's parent)."""
    root = Path(summary["run_dir"]).parent
    entries = []
    for entry in summary["entries"]:
        kept = {key: value for key, value in entry.items() if key not in PLACE_AND_TIME}
        kept["wheel"] = Path(entry["wheel"]).relative_to(root).as_posix() if entry.get("wheel") else None
        kept["stage_names"] = sorted(entry.get("stages") or {})
        kept["has_log"] = bool(entry.get("log")) and Path(entry["log"]).is_file()
        kept["has_report"] = bool(entry.get("report")) and Path(entry["report"]).is_file()
        entries.append(kept)
    return entries


def index_pages(output: Path) -> dict[str, str]:
    """Every page of the pip indexes (simple/, entries/*/simple/), hashes, sizes and upload times masked: the
    wheels' bytes differ by their timestamps."""
    pages = {}
    for path in sorted([*output.glob("simple/**/index.*"), *output.glob("entries/**/index.*")]):
        text = HASH.sub("sha256=…", path.read_text(encoding="utf-8"))
        text = re.sub(r'"(size|upload-time)": [^,\n]+', r'"\1": …', text)
        pages[path.relative_to(output).as_posix()] = text
    return pages


class _Rows(HTMLParser):
    """The dashboard's entry sections and their table rows' cells (text only)."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[tuple[str, str, list[list[str]]]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._badge: list[str] | None = None
        self.badges: dict[int, str] = {}  # id(row) → the text of its result badge (not the notes after it)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section" and found.get("data-entry") is not None:
            self.sections.append((str(found["data-entry"]), str(found.get("data-result")), []))
        elif tag == "tr" and self.sections and "detail" not in str(found.get("class")):
            self._row = []
            self.sections[-1][2].append(self._row)
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "span" and self._cell is not None and "badge" in str(found.get("class")):
            self._badge = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self._badge is not None and self._row is not None:
            self.badges[id(self._row)] = "".join(self._badge)
            self._badge = None
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag in ("tr", "section"):
            self._row = None if tag == "tr" else self._row

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._badge is not None:
            self._badge.append(data)


ROW_CELLS = {"revision": 2, "python": 3, "wheel": 8}


def dashboard_rows(output: Path) -> list[tuple[str, str, list[dict[str, str]]]]:
    """Per entry section: its name, its result, and each night's row: its result badge, revision, Python and the
    wheel's name (not the night's time, durations or sizes)."""
    parser = _Rows()
    parser.feed((output / "index.html").read_text(encoding="utf-8"))
    return [
        (
            name,
            result,
            [
                {"result": parser.badges.get(id(row), ""), **{key: row[index] for key, index in ROW_CELLS.items()}}
                for row in rows
                if len(row) > max(ROW_CELLS.values())
            ],
        )
        for name, result, rows in parser.sections
    ]


def all_text(*folders: Path) -> str:
    """Every file under the folders, as text (the secret must be in none of them)."""
    return "\n".join(
        path.read_bytes().decode("utf-8", errors="replace")
        for folder in folders
        for path in folder.rglob("*")
        if path.is_file()
    )


# --------------------------------------------------------------------------------------------
# A published channel of earlier nights, written by the nightly's own summary writer
# --------------------------------------------------------------------------------------------


def past_night(output: Path, day: str, entries: list[Any]) -> None:
    """A night of `entries` (EntryResult, their wheel paths inside `output`) in `output`'s date folder `day`."""
    from pytorch_winbuild.nightly.summary import NightlySummary

    NightlySummary(
        started=f"{day}T02:00:00+00:00",
        date=day,
        host="build-old",
        matrix="matrix.toml",
        run_dir=output / day,
        stamp=f"{day.replace('-', '')}-020000",
        forced=False,
        entries=entries,
        seconds=sum(entry.seconds for entry in entries),
    ).write()


def past_entry(
    output: Path,
    day: str,
    entry: Any,
    *,
    revision: str,
    seconds: float,
    wheel: Path | None = None,
    table_hash: str | None = None,
    result: str = "success",
) -> Any:
    """An entry's record of an earlier night (the matrix Entry `entry`), its wheel (a copy of `wheel`, or a few
    bytes under a wheel's name) in that night's folder."""
    from pytorch_winbuild.nightly.entry import EntryResult

    record = EntryResult.for_entry(entry)
    record.result, record.revision, record.seconds, record.python = result, revision, seconds, "3.11.7"
    record.table_hash = table_hash or entry.table_hash()
    record.stages = {"source": 1.0, "build": seconds - 1.0}
    if result == "success":
        name = wheel.name if wheel else f"mini_torch-2.12.0+{entry.name.replace('-', '')}-py3-none-any.whl"
        target = output / day / entry.name / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(wheel.read_bytes() if wheel else b"an earlier night's wheel")
        record.wheel = str(target)
    return record
