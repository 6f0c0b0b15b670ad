"""The merge's handling of parts as they arrive from runners, without building: parts written by the nightly's own
summary writer on a "Windows runner" (its paths re-rooted), a part that names files outside itself, a night where
the plan built nothing, a merge without a plan, and the simulation of a fleet's wall time."""

from __future__ import annotations

import importlib.util
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from fleet_support import past_entry, past_night
from nightly_support import REPO_ROOT
from support import run_invoke

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.nightly.fleet_plan import FleetPlan, PlannedEntry
from pytorch_winbuild.nightly.matrix import parse_matrix
from pytorch_winbuild.nightly.merge import merge_night

DAY = "2026-03-03"
WINDOWS_PART = "C:\\actions-runner\\_work\\_temp\\nightly-part"
BASE = ("self-hosted", "windows", "x64")


def _entries() -> dict[str, Any]:
    data = {
        "settings": {"output_dir": "out", "keep_days": 14, "min_free_gb": 1},
        "entry": [
            {"name": name, "repo": "https://github.com/pytorch/pytorch.git", "ref": "main", "cuda": "cpu"}
            for name in ("cpu", "cu124", "cu128")
        ],
    }
    return {entry.name: entry for entry in parse_matrix(data, "fleet.toml", load_knowledge()).entries}


def _windows_part(folder: Path, name: str, *, revision: str = "a" * 40) -> Path:
    """A part as a Windows runner leaves it: files in <part>/<day>/<entry>/, the summary's paths C:\\ ones."""
    record = past_entry(folder, DAY, _entries()[name], revision=revision, seconds=7200.0)
    (folder / DAY / name / "build-020000.log").write_text(f"{name}'s log\n", encoding="utf-8")
    record.log = str(folder / DAY / name / "build-020000.log")
    past_night(folder, DAY, [record])
    [summary] = folder.glob(f"{DAY}/nightly-*.json")
    text = summary.read_text(encoding="utf-8")
    posix = json.dumps(str(folder))[1:-1]
    summary.write_text(
        text.replace(posix + "/", WINDOWS_PART.replace("\\", "\\\\") + "\\\\").replace(
            posix, WINDOWS_PART.replace("\\", "\\\\")
        ),
        encoding="utf-8",
    )
    data = json.loads(summary.read_text(encoding="utf-8"))
    assert data["run_dir"] == f"{WINDOWS_PART}\\{DAY}" and data["entries"][0]["wheel"].startswith("C:\\")
    return folder


def _plan(**build: bool) -> FleetPlan:
    return FleetPlan(
        planned=f"{DAY}T02:00:00+00:00",
        matrix="fleet.toml",
        keep_days=14,
        forced=False,
        entries=tuple(PlannedEntry(name, BASE, built, "the test says so", None) for name, built in build.items()),
    )


def test_a_windows_runner_s_part_is_re_rooted(tmp_path: Path) -> None:
    part = _windows_part(tmp_path / "part-cu124", "cu124")
    output = tmp_path / "channel"
    result = merge_night([part], output, plan=_plan(cu124=True))
    [entry] = result.summary.entries
    wheel = output / DAY / "cu124" / "mini_torch-2.12.0+cu124-py3-none-any.whl"
    assert (entry.result, entry.wheel, entry.log) == (
        "success",
        str(wheel),
        str(output / DAY / "cu124" / "build-020000.log"),
    )
    assert wheel.read_bytes() == b"an earlier night's wheel"
    page = (output / "entries" / "cu124" / "simple" / "mini-torch" / "index.html").read_text()
    assert f"../../../../{DAY}/cu124/mini_torch-2.12.0%2Bcu124-py3-none-any.whl#sha256=" in page
    assert "cu124's log" in (output / DAY / "cu124" / "build-020000.log").read_text()
    assert 'href="2026-03-03/cu124/build-020000.log"' in (output / "index.html").read_text()


def test_a_path_out_of_the_part_is_never_followed(tmp_path: Path) -> None:
    part = _windows_part(tmp_path / "part", "cpu")
    secret = tmp_path / "secret.whl"
    secret.write_bytes(b"not for the channel")
    [summary] = part.glob(f"{DAY}/nightly-*.json")
    data = json.loads(summary.read_text())
    data["entries"][0]["wheel"] = f"{WINDOWS_PART}\\{DAY}\\..\\..\\secret.whl"
    data["entries"][0]["log"] = str(secret)
    summary.write_text(json.dumps(data))
    result = merge_night([part], tmp_path / "channel", plan=_plan(cpu=True))
    [entry] = result.summary.entries
    assert entry.wheel is None and entry.log is None
    assert not list((tmp_path / "channel").rglob("secret*"))
    # The entry's own folder still came: its files are the night's, whatever the record says.
    assert (tmp_path / "channel" / DAY / "cpu" / "build-020000.log").is_file()


def test_a_night_that_built_nothing_stands_on_the_previous_channel(tmp_path: Path) -> None:
    """Everything unchanged: no part at all (the build job did not run), the plan and last night's channel."""
    previous = tmp_path / "previous"
    entries = _entries()
    past_night(
        previous,
        "2026-03-02",
        [
            past_entry(previous, "2026-03-02", entries["cpu"], revision="b" * 40, seconds=60.0),
            past_entry(previous, "2026-03-02", entries["cu124"], revision="c" * 40, seconds=60.0, result="failed"),
        ],
    )
    output = tmp_path / "channel"
    environ = {"GITHUB_STEP_SUMMARY": str(tmp_path / "step-summary.md")}
    from pytorch_winbuild.nightly.merge import run_merge

    plan_file = tmp_path / "plan.json"
    _plan(cpu=False, cu124=False).write(plan_file)
    result = run_merge([], output, previous=previous, plan_path=plan_file, keep_days=None, environ=environ)
    assert [(e.name, e.result) for e in result.summary.entries] == [("cpu", "skipped"), ("cu124", "not run")]
    cpu = result.summary.entries[0]
    assert cpu.revision == "b" * 40 and cpu.wheel == str(
        output / "2026-03-02" / "cpu" / "mini_torch-2.12.0+cpu-py3-none-any.whl"
    )
    assert result.summary.host == "no runner" and result.summary.headline() == "0 of 2 built, 1 skipped, 1 not run"
    assert (
        "## PyTorch nightly 2026-03-03: 0 of 2 built, 1 skipped, 1 not run"
        in Path(environ["GITHUB_STEP_SUMMARY"]).read_text()
    )
    assert json.loads(result.summary.json_path.read_text())["plan"] == str(plan_file)


def test_without_a_plan_the_night_is_its_parts(tmp_path: Path) -> None:
    one = _windows_part(tmp_path / "one", "cu128")
    two = _windows_part(tmp_path / "two", "cpu")
    result = merge_night([one, two], tmp_path / "channel")
    assert [entry.name for entry in result.summary.entries] == ["cu128", "cpu"]  # the parts' order
    assert result.summary.started == f"{DAY}T02:00:00+00:00" and result.summary.stamp == "20260303-020000"
    # Retention as the matrix file says, as the nightly's own.
    shipped = tomllib.loads((REPO_ROOT / "build_config" / "nightly.toml").read_text(encoding="utf-8"))
    assert result.summary.retention is not None
    assert result.summary.retention.keep_days == shipped["settings"]["keep_days"]
    with pytest.raises(ConfigurationError, match="there is nothing to merge: no part and no plan"):
        merge_night([], tmp_path / "empty")
    with pytest.raises(ConfigurationError, match=r"holds no nightly summary"):
        merge_night([tmp_path / "channel" / DAY / "cpu"], tmp_path / "other")


def test_the_task_refuses_two_parts_of_one_entry(tmp_path: Path) -> None:
    one = _windows_part(tmp_path / "one", "cpu")
    two = _windows_part(tmp_path / "two", "cpu")
    done = run_invoke("nightly-merge", "--part", str(one), "--part", str(two), "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"configuration error: entry 'cpu' is in {one} and {two}; ")
    assert not (tmp_path / "out").exists()


def _simulation() -> Any:
    spec = importlib.util.spec_from_file_location("simulate_fleet", REPO_ROOT / "scripts" / "simulate_fleet.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["simulate_fleet"] = module
    spec.loader.exec_module(module)
    return module


def test_the_fleet_simulation(capsys: pytest.CaptureFixture[str]) -> None:
    """scripts/simulate_fleet.py: 8 entries x 3 h on 1, 2, 4, 8 runners, and longest-first against matrix order."""
    simulation = _simulation()
    assert [simulation.wall_hours([3.0] * 8, runners) for runners in (1, 2, 4, 8)] == [24.0, 12.0, 6.0, 3.0]
    uneven = [1, 1, 2.5, 3, 3, 3.5, 4, 4]
    assert simulation.wall_hours(uneven, 2) == 11.0 and simulation.wall_hours(uneven, 2, longest_first=False) == 11.5
    assert simulation.wall_hours(uneven, 4) == 6.0 and simulation.wall_hours(uneven, 4, longest_first=False) == 7.0
    assert simulation.main([]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("SIMULATION, not a measurement: 8 entries of 3, 3, 3, 3, 3, 3, 3, 3 h")
    assert "       8      3.00h        3.00h   100%" in printed
