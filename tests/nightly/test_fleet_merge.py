"""A night across a fleet, real: three runners are three processes (`invoke nightly --only NAME --output-dir PART`,
each with its own cache), building mini torch from a real git repository; `invoke nightly-merge` joins their parts,
and the channel it makes is the one a single runner makes of the same entries. Then: a runner that sent no part,
the merge run twice, two parts of one entry, fourteen nights of history, pip from the merged index over HTTP into a
fresh venv, and the dashboard in headless Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from channel_support import (
    assert_links_resolve,
    check_dashboard,
    chromium,
    fresh_venv,
    http_server,
    pip_install,
    run_in,
)
from fleet_support import (
    ENTRIES,
    FLEET_SECRET,
    all_text,
    comparable_entries,
    dashboard_rows,
    fleet_matrix,
    index_pages,
    make_fleet_repo,
    merge,
    newest_summary,
    past_entry,
    past_night,
    plan_night,
    start_runner,
    wait_all,
)
from nightly_support import REPO_ROOT, git

from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.nightly.matrix import load_matrix

pytestmark = [pytest.mark.build, pytest.mark.xdist_group("nightly-fleet")]  # one night, built once, for the module


@dataclass(frozen=True)
class FleetNight:
    base: Path
    repo: Path
    matrix: Path
    plan: Path
    one: Path  # the one-runner night's output folder
    parts: dict[str, Path]  # entry → its runner's part
    merged: Path

    def part(self, name: str) -> Path:
        return self.parts[name]


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> FleetNight:
    """One runner builds the three entries, and at the same time three runners build one each; the plan the
    workflow makes is merged with their parts."""
    base = tmp_path_factory.mktemp("fleet")
    repo = make_fleet_repo(base / "pytorch-repo")
    matrix = fleet_matrix(base / "matrix.toml", repo, base / "one-runner")
    plan = base / "plan.json"
    assert plan_night(matrix, plan)["include"] == [
        {"entry": name, "runs-on": ["self-hosted", "windows", "x64"]} for name in ENTRIES
    ]
    folders = {name: base / f"runner-{name}" for name in ENTRIES}
    runners = {name: start_runner(matrix, folders[name], name) for name in ENTRIES}
    folders["one"] = base / "runner-one"
    runners["one"] = start_runner(matrix, folders["one"], *ENTRIES)  # all three, one after the other
    wait_all(runners, folders)
    parts = {name: folders[name] / "part" for name in ENTRIES}
    merged = base / "merged"
    done = merge(merged, *parts.values(), plan=plan)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"== nightly merge {newest_summary(merged)['date']}: 3 of 3 built ==" in done.stdout
    return FleetNight(base, repo, matrix, plan, folders["one"] / "part", parts, merged)


def _tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        path.relative_to(folder).as_posix(): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_three_runners_merge_into_the_channel_of_one_runner(night: FleetNight) -> None:
    one, merged = newest_summary(night.one), newest_summary(night.merged)
    assert comparable_entries(merged) == comparable_entries(one)
    assert [entry["result"] for entry in merged["entries"]] == ["success"] * 3
    assert (merged["counts"], merged["result"], merged["date"]) == (one["counts"], one["result"], one["date"])
    assert merged["retention"]["keep_days"] == one["retention"]["keep_days"] == 14
    assert [part["entries"] for part in merged["parts"]] == [[name] for name in ENTRIES]
    assert index_pages(night.merged) == index_pages(night.one)
    assert set(index_pages(night.merged)) >= {
        "simple/index.html",
        "simple/mini-torch/index.html",
        "simple/mini-torch/index.json",
        *(f"entries/{name}/simple/mini-torch/index.html" for name in ENTRIES),
    }
    assert dashboard_rows(night.merged) == dashboard_rows(night.one)
    assert [(name, result, len(rows)) for name, result, rows in dashboard_rows(night.merged)] == [
        (name, "success", 1) for name in ENTRIES
    ]
    # The wheels sit where one runner puts them: <date>/<entry>/, with their record beside them.
    for entry in merged["entries"]:
        wheel = Path(entry["wheel"])
        assert wheel.parent == night.merged / merged["date"] / entry["name"]
        assert json.loads(wheel.with_name(wheel.name + ".nightly.json").read_text())["entry"] == entry["name"]
    # The runners' secret reached their builds (the reports list the variable) and is nowhere written.
    report = json.loads(Path(merged["entries"][0]["report"]).read_text())
    assert report["environment"]["SCCACHE_REDIS_PASSWORD"] == "***"
    assert FLEET_SECRET not in all_text(night.merged, *night.parts.values(), night.one)
    for name in ENTRIES:
        assert FLEET_SECRET not in (night.part(name).parent / "runner.log").read_text()


def test_the_merge_run_again_writes_the_same_channel(night: FleetNight) -> None:
    before = _tree(night.merged)
    done = merge(night.merged, *night.parts.values(), plan=night.plan)
    assert done.returncode == 0, done.stderr
    assert _tree(night.merged) == before  # every file: the same bytes and the same time
    assert not [path for path in night.merged.rglob("*") if path.name.endswith(".tmp")]


def test_two_parts_of_one_entry_are_refused(night: FleetNight) -> None:
    again = night.base / "cpu-b-again"
    shutil.copytree(night.part("cpu-b"), again)
    output = night.base / "refused"
    done = merge(output, night.part("cpu-a"), night.part("cpu-b"), again, plan=night.plan)
    assert done.returncode == 2 and done.stdout == ""
    [paragraph] = done.stderr.splitlines()
    assert paragraph.startswith(
        f"configuration error: entry 'cpu-b' is in {night.part('cpu-b')} and {again}; a night builds each entry once"
    )
    assert "Fix: pass each entry's part once" in paragraph
    assert not output.exists()  # refused before anything was written


@pytest.fixture(scope="module")
def missing_night(night: FleetNight) -> Path:
    """The next night: the plan sends all three entries to runners (forced), cpu-c's runner sends nothing back."""
    plan = night.base / "plan-2.json"
    assert len(plan_night(night.matrix, plan, "--previous", str(night.merged), "--force")["include"]) == 3
    output = night.base / "night-2"
    done = merge(output, night.part("cpu-a"), night.part("cpu-b"), previous=night.merged, plan=plan)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 of 3 built, 1 missing" in done.stdout
    return output


def test_a_missing_part_shows_the_entry_missing_on_its_last_good_wheel(night: FleetNight, missing_night: Path) -> None:
    summary = newest_summary(missing_night)
    entries = {entry["name"]: entry for entry in summary["entries"]}
    assert [entry["result"] for entry in summary["entries"]] == ["success", "success", "missing"]
    assert summary["result"] == "failed" and summary["counts"]["missing"] == 1
    missing = entries["cpu-c"]
    last_good = newest_summary(night.merged)["entries"][2]
    assert Path(missing["wheel"]).relative_to(missing_night) == Path(last_good["wheel"]).relative_to(night.merged)
    assert missing["error"].startswith("no part came back for this entry: its runner stopped before uploading it")
    assert missing["notes"][0].startswith(
        "missing: planned for a runner (forced (--force)), which sent no part; its last good wheel, from "
    )
    # The index still offers it; the dashboard shows it failing, its last success below the missing night.
    wheel = Path(missing["wheel"]).name
    page = (missing_night / "entries" / "cpu-c" / "simple" / "mini-torch" / "index.html").read_text()
    assert quote(wheel) in page and quote(wheel) in (missing_night / "simple" / "mini-torch" / "index.html").read_text()
    rows = {name: (result, rows) for name, result, rows in dashboard_rows(missing_night)}
    assert rows["cpu-c"][0] == "missing"
    assert [row["result"] for row in rows["cpu-c"][1]] == ["missing", "success"]
    assert rows["cpu-c"][1][0]["wheel"].startswith(wheel)  # the missing night links the wheel it stands on
    stamp = datetime.fromisoformat(summary["started"]).strftime("%Y%m%d-%H%M%S")
    markdown = (Path(summary["run_dir"]) / f"nightly-{stamp}.md").read_text(encoding="utf-8")
    assert "| cpu-c | 🚫 missing |" in markdown and "### 🚫 cpu-c: missing" in markdown


def test_fourteen_nights_of_history(night: FleetNight) -> None:
    """The previous channel holds 14 nights; tonight cpu-a is unchanged (left out by the plan, shown skipped on its
    wheel), cpu-b's branch moved and cpu-c's table changed (both built, the longer first); retention keeps 14 days."""
    entries = {entry.name: entry for entry in load_matrix(night.matrix, load_knowledge()).entries}
    built = {entry["name"]: Path(entry["wheel"]) for entry in newest_summary(night.merged)["entries"]}
    head = git(night.repo, "rev-parse", "fleet-a")
    previous = night.base / "previous-14"
    today = datetime.now(UTC).date()
    days = [(today - timedelta(days=14 - index)).isoformat() for index in range(14)]  # today-14 … today-1
    for day in days:
        past_night(
            previous,
            day,
            [
                past_entry(previous, day, entries["cpu-a"], revision=head, seconds=3 * 3600, wheel=built["cpu-a"]),
                past_entry(previous, day, entries["cpu-b"], revision="1" * 40, seconds=2 * 3600),
                past_entry(previous, day, entries["cpu-c"], revision="2" * 40, seconds=4 * 3600, table_hash="older"),
            ],
        )
    plan = night.base / "plan-14.json"
    matrix = plan_night(night.matrix, plan, "--previous", str(previous))
    assert [job["entry"] for job in matrix["include"]] == ["cpu-c", "cpu-b"]  # longest first (4 h, then 2 h)

    output = night.base / "night-14"
    done = merge(output, night.part("cpu-c"), night.part("cpu-b"), previous=previous, plan=plan)
    assert done.returncode == 0, done.stdout + done.stderr

    summary = newest_summary(output)
    assert [(e["name"], e["result"]) for e in summary["entries"]] == [
        ("cpu-a", "skipped"),
        ("cpu-b", "success"),
        ("cpu-c", "success"),
    ]
    skipped = summary["entries"][0]
    assert skipped["revision"] == head and skipped["notes"] == [
        f"skipped: unchanged since {days[-1]} 02:00: fleet-a is still {head[:12]} and its matrix table is the same "
        "(the plan left it out)."
    ]
    assert Path(skipped["wheel"]) == output / days[-1] / "cpu-a" / built["cpu-a"].name
    # Retention (14 days, today counted): the oldest night goes, its wheels were not any entry's newest.
    assert summary["retention"]["removed_folders"] == [str(output / days[0])] and not (output / days[0]).exists()
    assert all((output / day).is_dir() for day in days[1:])
    page = (output / "index.html").read_text(encoding="utf-8")
    assert "14 night(s) shown of 14 kept" in page
    rows = {name: rows for name, _, rows in dashboard_rows(output)}
    assert [len(rows[name]) for name in ENTRIES] == [14, 14, 14]
    assert [row["result"] for row in rows["cpu-a"][:2]] == ["skipped", "success"]
    assert page.count('<g class="night ') == 3 * 14  # each entry's chart: a bar per night
    # The carried wheel is the one the index offers for cpu-a (one file name, the newest night's copy).
    entry_page = (output / "entries" / "cpu-a" / "simple" / "mini-torch" / "index.html").read_text()
    assert f"../../../../{days[-1]}/cpu-a/{quote(built['cpu-a'].name)}#sha256=" in entry_page


@pytest.mark.network
def test_pip_installs_from_the_merged_index(night: FleetNight) -> None:
    code = "import sys, torch; print(torch.__version__, torch.__file__.startswith(sys.prefix), torch.add(2, 3))"
    with http_server(night.merged) as served:
        for index, requirement, version in (
            ("simple/", "mini_torch==2.13.0a2+mini", "2.13.0a2+mini"),
            ("entries/cpu-c/simple/", "mini_torch", "2.13.0a3+mini"),
        ):
            venv = fresh_venv(night.base / f"venv-{version}")
            installed = pip_install(venv, f"{served.url}{index}", requirement)
            assert installed.returncode == 0, installed.stdout + installed.stderr
            assert run_in(venv, code) == f"{version} True 5"
        assert "/cpu-b/mini_torch-2.13.0a2%2Bmini-" in served.log()


@pytest.mark.browser
def test_chromium_renders_the_merged_dashboard(night: FleetNight, missing_night: Path) -> None:
    with chromium() as browser, http_server(missing_night) as served:
        for url in ((missing_night / "index.html").as_uri(), served.url):
            hrefs = check_dashboard(browser, url, list(ENTRIES), "cpu-c", "no part came back for this entry")
            assert_links_resolve(browser, hrefs)
            assert any(
                href.endswith(f"/cpu-c/{quote(Path(newest_summary(missing_night)['entries'][2]['wheel']).name)}")
                for href in hrefs
            )


def _workflow_step(job: str, name: str) -> str:
    import yaml

    steps = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "nightly.yml").read_text())["jobs"][job]["steps"]
    return next(step["run"] for step in steps if step.get("name") == name)


def _run_step(script: str, runner_temp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A `run:` step under bash as GitHub runs it, in the repository's root (the plan job's checkout)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "VIRTUAL_ENV"))}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=REPO_ROOT,
        env={**clean, "RUNNER_TEMP": str(runner_temp), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.pypi
def test_the_publish_job_merges_as_the_workflow_runs_it(night: FleetNight) -> None:
    """The plan job's install step builds the tool wheel; the publish job's merge step, on a machine with no
    checkout, installs it and merges the downloaded parts (one folder per artifact) into the staged channel."""
    plan_temp, publish_temp = night.base / "plan-runner-temp", night.base / "publish-runner-temp"
    plan_temp.mkdir()
    installed = _run_step(_workflow_step("plan", "Install pytorch-winbuild"), plan_temp)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    [wheel] = (plan_temp / "plan").glob("pytorch_winbuild-*.whl")
    # What the publish job downloads: the plan artifact (tool + plan), and nightly-part-* each in its folder.
    shutil.copytree(plan_temp / "plan", publish_temp / "plan")
    shutil.copy2(night.plan, publish_temp / "plan" / "plan.json")
    for name in ENTRIES:
        shutil.copytree(night.part(name), publish_temp / "parts" / f"nightly-part-{name}")
    summary = publish_temp / "step-summary.md"
    done = _run_step(
        _workflow_step("publish", "Merge"), publish_temp, GITHUB_STEP_SUMMARY=str(summary), GITHUB_OUTPUT=os.devnull
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert wheel.name and "== nightly merge " in done.stdout and ": 3 of 3 built ==" in done.stdout
    site = publish_temp / "site"
    assert comparable_entries(newest_summary(site)) == comparable_entries(newest_summary(night.merged))
    assert index_pages(site) == index_pages(night.merged) and dashboard_rows(site) == dashboard_rows(night.merged)
    assert "## PyTorch nightly " in summary.read_text(encoding="utf-8")
    assert not (site / "state.json").exists() and len(list(site.rglob("*.whl"))) == 3
