"""The fleet's plan (`invoke nightly --matrix-json`) and its runner labels, on real things: a real git repository
asked with git ls-remote, a channel written by the nightly's own writers, the command run as the workflow's plan
job runs it, its output checked against GitHub's workflow schema (SchemaStore's, as check-jsonschema ships it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from fleet_support import (
    fleet_entries,
    fleet_matrix,
    invoke_command,
    make_fleet_repo,
    past_entry,
    past_night,
    plan_night,
    run,
)
from nightly_support import REPO_ROOT, commit_all, git

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import load_facts
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.nightly.fleet_plan import MAX_JOBS, load_plan, plan_fleet
from pytorch_winbuild.nightly.matrix import load_matrix, parse_matrix
from pytorch_winbuild.nightly.runner_labels import (
    entry_labels,
    load_label_rules,
    registration_labels,
    runner_labels,
)

KNOWLEDGE = load_knowledge()
RULES = load_label_rules()
WORKFLOW = REPO_ROOT / ".github" / "workflows" / "nightly.yml"
HOSTS = REPO_ROOT / "build_config" / "hosts"
BASE = ["self-hosted", "windows", "x64"]


def _matrix(entries: list[dict[str, Any]], **settings: Any) -> Any:
    data = {"settings": {"output_dir": "out", "keep_days": 14, "min_free_gb": 1, **settings}, "entry": entries}
    return parse_matrix(data, "fleet.toml", KNOWLEDGE)


def _days(count: int) -> list[str]:
    today = datetime.now(UTC).date()
    return [(today - timedelta(days=count - index)).isoformat() for index in range(count)]


def check_matrix_schema(matrix: dict[str, Any], folder: Path) -> None:
    """The plan's output as the workflow uses it (strategy.matrix of a job) is valid for GitHub: SchemaStore's
    workflow schema accepts it, it has include objects only, and at most 256 jobs."""
    assert set(matrix) == {"include"} and 0 < len(matrix["include"]) <= MAX_JOBS
    for job in matrix["include"]:
        assert set(job) == {"entry", "runs-on"} and isinstance(job["entry"], str)
        assert job["runs-on"] and all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", label) for label in job["runs-on"])
    workflow = {
        "on": {"workflow_dispatch": {}},
        "jobs": {
            "build": {
                "runs-on": "${{ matrix.runs-on }}",
                "strategy": {"matrix": matrix},
                "steps": [{"run": "echo ${{ matrix.entry }}"}],
            }
        },
    }
    document = folder / "matrix-workflow.json"
    document.write_text(json.dumps(workflow), encoding="utf-8")
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(document)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "No module named check_jsonschema" in checked.stderr:
        pytest.fail(
            "check-jsonschema is not installed (pip install check-jsonschema: GitHub's workflow schema).", pytrace=False
        )
    assert checked.returncode == 0, checked.stdout + checked.stderr


# --------------------------------------------------------------------------------------------
# What is built, and in which order
# --------------------------------------------------------------------------------------------


def test_unchanged_entries_are_left_out_and_the_longest_come_first(tmp_path: Path) -> None:
    repo = make_fleet_repo(tmp_path / "repo")
    entries = [*fleet_entries(repo), {**fleet_entries(repo)[0], "name": "cpu-new", "ref": "main"}]
    entries.append({**fleet_entries(repo)[0], "name": "cpu-gone"})
    matrix = _matrix(entries)
    a, b, c, _new, gone = matrix.entries
    channel = tmp_path / "channel"
    head = {entry.name: git(repo, "rev-parse", entry.ref) for entry in matrix.entries}
    days = _days(3)
    for day in days:
        past_night(
            channel,
            day,
            [
                past_entry(channel, day, a, revision=head["cpu-a"], seconds=3 * 3600),
                past_entry(channel, day, b, revision="0" * 40, seconds=2 * 3600),  # b's branch moved since
                past_entry(channel, day, c, revision=head["cpu-c"], seconds=4 * 3600, table_hash="an older table"),
                past_entry(channel, day, gone, revision=head["cpu-gone"], seconds=5 * 3600),
            ],
        )
    for wheel in channel.glob("*/cpu-gone/*.whl"):
        wheel.unlink()  # its build is recorded, but its wheel is no longer in the channel

    plan = plan_fleet(matrix, matrix.entries, previous=channel, force=False, rules=RULES, work_dir=tmp_path)

    decided = {entry.name: (entry.build, entry.reason) for entry in plan.entries}
    assert decided["cpu-a"] == (
        False,
        f"unchanged since {days[-1]} 02:00: fleet-a is still {head['cpu-a'][:12]} and its matrix table is the same",
    )
    assert decided["cpu-b"] == (True, f"fleet-b is now {head['cpu-b'][:12]} (was 000000000000 on {days[-1]} 02:00)")
    assert decided["cpu-c"] == (True, f"its matrix table changed since the build of {days[-1]} 02:00")
    assert decided["cpu-new"] == decided["cpu-gone"] == (True, "no good build of it in the published channel")
    # Never built first (they may be the longest), then by the last successful build's duration.
    assert [job["entry"] for job in plan.matrix_json()["include"]] == ["cpu-new", "cpu-gone", "cpu-c", "cpu-b"]
    assert [entry.seconds for entry in plan.builds()] == [None, 5 * 3600, 4 * 3600, 2 * 3600]
    check_matrix_schema(plan.matrix_json(), tmp_path)

    forced = plan_fleet(matrix, matrix.entries, previous=channel, force=True, rules=RULES, work_dir=tmp_path)
    assert [job["entry"] for job in forced.matrix_json()["include"]] == [
        "cpu-new",
        "cpu-gone",
        "cpu-c",
        "cpu-a",
        "cpu-b",
    ]
    assert {entry.reason for entry in forced.entries} == {"forced (--force)"}
    only = plan_fleet(
        matrix, matrix.select(("cpu-a", "cpu-b")), previous=channel, force=False, rules=RULES, work_dir=tmp_path
    )
    assert [entry.name for entry in only.entries] == ["cpu-a", "cpu-b"] and len(only.builds()) == 1

    # The branch moves: the entry is built again.
    git(repo, "checkout", "-q", "fleet-a")
    (repo / "csrc" / "extra.cpp").write_text("int extra() { return 1; }\n", encoding="utf-8")
    moved = commit_all(repo, "a new commit on fleet-a")
    again = plan_fleet(matrix, matrix.entries, previous=channel, force=False, rules=RULES, work_dir=tmp_path)
    assert dict((e.name, e.reason) for e in again.entries)["cpu-a"].startswith(f"fleet-a is now {moved[:12]}")


def test_labels_come_from_what_an_entry_needs_and_runs_on_overrides_them(tmp_path: Path) -> None:
    repo = make_fleet_repo(tmp_path / "repo")
    entry = fleet_entries(repo)[0]
    matrix = _matrix(
        [
            {**entry, "name": "cpu"},
            {**entry, "name": "cu124", "cuda": "12.4"},
            {**entry, "name": "cu128-vs2019", "cuda": "12.8", "vs": "2019"},
            {**entry, "name": "pinned", "cuda": "12.8", "runs_on": ["self-hosted", "gpu-box-3"]},
            {**entry, "name": "hosted", "runs_on": "windows-2022"},
        ]
    )
    plan = plan_fleet(matrix, matrix.entries, previous=None, force=False, rules=RULES, work_dir=tmp_path)
    assert {job["entry"]: job["runs-on"] for job in plan.matrix_json()["include"]} == {
        "cpu": BASE,
        "cu124": [*BASE, "cuda-12.4"],
        "cu128-vs2019": [*BASE, "vs2019", "cuda-12.8"],
        "pinned": ["self-hosted", "gpu-box-3"],
        "hosted": ["windows-2022"],
    }
    check_matrix_schema(plan.matrix_json(), tmp_path)
    # Which runner builds an entry does not change its wheel: runs_on is not part of what "unchanged" compares.
    assert (
        matrix.entries[3].table_hash() == _matrix([{**entry, "name": "pinned", "cuda": "12.8"}]).entries[0].table_hash()
    )
    for bad, message in (
        ([], "expected a runner label or a list"),
        (["a,b"], "'a,b' is not a runner label"),
        ([1], "expected a runner label or a list"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            _matrix([{**entry, "runs_on": bad}])


def test_a_runner_registers_the_labels_of_what_doctor_finds() -> None:
    """Every shipped facts file (an `invoke doctor --json` of a real machine) gives its labels; a runner with an
    entry's Visual Studio and CUDA has every label the entry's job asks for."""
    big = load_facts(HOSTS / "vs2019-vs2022-cuda12.json")
    assert runner_labels(big, RULES) == (*BASE, "vs2019", "vs2022", "cuda-12.4", "cuda-12.8")
    assert registration_labels(big, RULES) == ("vs2019", "vs2022", "cuda-12.4", "cuda-12.8")
    assert registration_labels(load_facts(HOSTS / "cpu-only.json"), RULES) == ("vs2022",)
    old = load_facts(HOSTS / "vs2015-vs2017-cuda80-cuda90.json")
    assert registration_labels(old, RULES) == ("vs2015", "vs2017", "cuda-8.0", "cuda-9.0")
    shipped = load_matrix(None, KNOWLEDGE)
    for entry in shipped.entries:  # the shipped matrix's jobs run on the VS 2019/2022 + CUDA 12 machine
        assert set(entry_labels(entry, RULES)) <= set(runner_labels(big, RULES)), entry.name
    assert not set(entry_labels(shipped.entries[1], RULES)) <= set(runner_labels(old, RULES))  # no CUDA 12.4 there


def test_runner_labels_command_prints_this_machine_s(tmp_path: Path) -> None:
    """`invoke nightly --runner-labels` (what bootstrap_runner.ps1 runs): one line, config.cmd's --labels form,
    without the labels GitHub gives every runner."""
    done = run("nightly", "--runner-labels")
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines() or [""]
    labels = line.split(",") if line else []
    assert all(re.fullmatch(r"(vs\d{4}|cuda-\d+\.\d+)", label) for label in labels), line
    assert not set(labels) & {"self-hosted", "linux", "windows", "x64"}
    refused = run("nightly", "--runner-labels", "--matrix-json")
    assert refused.returncode == 2 and "--runner-labels and --matrix-json print different things" in refused.stderr


def test_label_rules_are_checked(tmp_path: Path) -> None:
    rules = tmp_path / "labels.toml"
    rules.write_text('[base]\nwindows = ["self-hosted"]\n[needs]\nvisual_studio = "vs"\ncuda = "cuda-{version}"\n')
    with pytest.raises(ConfigurationError, match=r"needs\.visual_studio: 'vs' must hold \{line\} once"):
        load_label_rules(str(rules))


def test_more_jobs_than_github_runs_are_refused(tmp_path: Path) -> None:
    entry = {"repo": "https://github.com/pytorch/pytorch.git", "cuda": "cpu"}
    matrix = _matrix([{**entry, "name": f"e{number}"} for number in range(MAX_JOBS + 1)])
    with pytest.raises(ConfigurationError, match=r"257 entries of fleet\.toml are to be built tonight, and GitHub"):
        plan_fleet(matrix, matrix.entries, previous=None, force=False, rules=RULES, work_dir=tmp_path)
    fits = plan_fleet(matrix, matrix.entries[:MAX_JOBS], previous=None, force=False, rules=RULES, work_dir=tmp_path)
    check_matrix_schema(fits.matrix_json(), tmp_path)


def test_the_plan_file_round_trips_and_a_broken_one_is_refused(tmp_path: Path) -> None:
    repo = make_fleet_repo(tmp_path / "repo")
    matrix = fleet_matrix(tmp_path / "matrix.toml", repo, tmp_path / "out", keep_days=9)
    plan_file = tmp_path / "plans" / "plan.json"
    printed = plan_night(matrix, plan_file, "--only", "cpu-b", "--force")
    assert printed == {"include": [{"entry": "cpu-b", "runs-on": BASE}]}
    plan = load_plan(plan_file)
    assert (plan.keep_days, plan.forced, plan.matrix) == (9, True, str(matrix))
    assert [(entry.name, entry.build) for entry in plan.entries] == [("cpu-b", True)]
    assert datetime.fromisoformat(plan.planned).date() == datetime.now(UTC).date()
    data = json.loads(plan_file.read_text())
    for broken, problem in (
        ("{", "is not a plan (line 1 column 2"),
        (json.dumps({**data, "format": 9}), "is not a plan of format 1"),
        (json.dumps({**data, "keep_days": 0}), "has no keep_days from 1 to"),
        (json.dumps({**data, "entries": data["entries"] * 2}), "lists an entry twice"),
        (json.dumps({**data, "entries": [{**data["entries"][0], "entry": "../x"}]}), "has no valid name"),
        (json.dumps({**data, "planned": "tonight"}), "has no valid time"),
    ):
        plan_file.write_text(broken)
        with pytest.raises(ConfigurationError, match=re.escape(problem)):
            load_plan(plan_file)


def test_plan_flags_are_checked(tmp_path: Path) -> None:
    repo = make_fleet_repo(tmp_path / "repo")
    matrix = str(fleet_matrix(tmp_path / "matrix.toml", repo, tmp_path / "out"))
    cases = [
        (["--matrix-json", "--previous", str(tmp_path / "none")], f"--previous {tmp_path / 'none'} is not a folder"),
        (["--plan-file", str(tmp_path / "p.json")], "--plan-file plans a fleet's night, and this command builds"),
        (["--previous", str(tmp_path)], "--previous plans a fleet's night"),
        (["--matrix-json", "--plan-file", str(tmp_path)], "is not a regular file"),
        (["--matrix-json", "--only", "cpu-z"], "--only cpu-z: no such entry"),
    ]
    for args, message in cases:
        done = run("nightly", "--matrix", matrix, *args)
        assert done.returncode == 2 and message in done.stderr and done.stdout == "", (args, done.stderr)
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------
# The plan job, as the workflow runs it
# --------------------------------------------------------------------------------------------


def _plan_step() -> dict[str, Any]:
    jobs = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]
    return next(step for step in jobs["plan"]["steps"] if step.get("id") == "plan")


def _run_plan_step(tmp_path: Path, only: str, force: str, status: int = 0) -> dict[str, str]:
    """The plan step's script under bash as GitHub runs `run:` (bash --noprofile --norc -eo pipefail), in the
    repository's root, with the step's environment; what it wrote to GITHUB_OUTPUT."""
    runner_temp = tmp_path / f"runner-temp-{len(list(tmp_path.iterdir()))}"
    runner_temp.mkdir()
    script = runner_temp / "step.sh"
    script.write_text(_plan_step()["run"], encoding="utf-8")
    output = runner_temp / "github-output"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_OUTPUT": str(output),
        "ONLY": only,
        "FORCE": force,
        "PYTHON": sys.executable,  # the step's ${{ runner.temp }}/venv/bin/python: the tool installed
    }
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == status, done.stdout + done.stderr
    if status:
        assert not output.exists() and "--only *: no such entry" in done.stderr
        return {}
    assert load_plan(runner_temp / "plan" / "plan.json").entries  # the plan file the publish job merges with
    return dict(line.split("=", 1) for line in output.read_text(encoding="utf-8").splitlines())


def test_the_plan_job_s_command_as_the_workflow_runs_it(tmp_path: Path) -> None:
    step = _plan_step()
    assert set(step["env"]) == {"ONLY", "FORCE", "PYTHON"}
    assert step["env"]["ONLY"] == "${{ inputs.only }}" and step["env"]["FORCE"] == "${{ inputs.force }}"

    scheduled = _run_plan_step(tmp_path, only="", force="")  # a scheduled run: no inputs
    matrix = json.loads(scheduled["matrix"])
    assert matrix == {
        "include": [
            {"entry": "cpu-py311", "runs-on": BASE},
            {"entry": "cu124-py311", "runs-on": [*BASE, "cuda-12.4"]},
        ]
    }
    assert scheduled["builds"] == "2"
    check_matrix_schema(matrix, tmp_path)

    dispatched = _run_plan_step(tmp_path, only="  cu124-py311 ", force="true")  # a dispatch with both inputs
    assert json.loads(dispatched["matrix"]) == {"include": [{"entry": "cu124-py311", "runs-on": [*BASE, "cuda-12.4"]}]}
    assert dispatched["builds"] == "1"
    # A dispatch input is never a shell pattern: '*' reaches the plan as it is, an unknown entry (exit 2).
    _run_plan_step(tmp_path, only="*", force="false", status=2)


def test_the_matrix_json_command_writes_only_json_to_stdout(tmp_path: Path) -> None:
    done = subprocess.run(
        invoke_command("nightly", "--matrix-json"), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["include"][0]["entry"] == "cpu-py311" and len(done.stdout.splitlines()) == 1
    assert done.stderr.startswith("-- nightly plan: 2 of 2 entries to build\n")


def test_the_workflow_matches_github_s_workflow_schema() -> None:
    """actionlint cannot be installed here (its PyPI package downloads its binary from GitHub when built); the
    workflow is checked against SchemaStore's schema of GitHub workflows instead (zizmor runs in pre-commit)."""
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "No module named check_jsonschema" in checked.stderr:
        pytest.fail("check-jsonschema is not installed (pip install check-jsonschema).", pytrace=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
