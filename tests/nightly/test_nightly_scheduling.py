"""The scheduling files: the GitHub Actions workflow (parsed as YAML) and the PowerShell scripts (as text).

What matters most here is safety: a self-hosted runner must never run on pull requests (it would
execute a fork's code next to the cache credentials), the token must be read-only, and
credentials must come from secrets, never be written into the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from nightly_support import REPO_ROOT

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "nightly.yml"
REGISTER = REPO_ROOT / "scripts" / "register_nightly_task.ps1"
BOOTSTRAP = REPO_ROOT / "scripts" / "bootstrap_runner.ps1"


def _workflow() -> dict[Any, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    return workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on:` key as True


def test_triggers_are_exactly_schedule_and_manual_dispatch() -> None:
    triggers = _triggers(_workflow())
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    [cron] = [item["cron"] for item in triggers["schedule"]]
    assert len(cron.split()) == 5 and cron.split()[2:] == ["*", "*", "*"]  # every day
    assert set(triggers["workflow_dispatch"]["inputs"]) == {"only", "force"}
    assert not re.search(
        r"^\s*(pull_request|pull_request_target|push|issue_comment)\s*:", WORKFLOW.read_text(), re.MULTILINE
    )


def test_least_privilege_and_one_run_at_a_time() -> None:
    workflow = _workflow()
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["concurrency"]["cancel-in-progress"] is False and workflow["concurrency"]["group"]
    jobs = workflow["jobs"]
    assert list(jobs) == ["plan", "build", "publish"]
    # The self-hosted jobs cannot widen the token; the plan may also read artifacts (last night's channel); the
    # publish job may deploy Pages and nothing else (not even read the repository: it checks nothing out).
    assert "permissions" not in jobs["build"]
    assert jobs["plan"]["permissions"] == {"contents": "read", "actions": "read"}
    assert jobs["publish"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert jobs["plan"]["runs-on"] == jobs["publish"]["runs-on"] == "ubuntu-latest"  # GitHub-hosted
    assert jobs["build"]["runs-on"] == "${{ matrix.runs-on }}"  # self-hosted: the labels the plan asks for
    for name in ("plan", "build"):
        checkout = next(s for s in jobs[name]["steps"] if str(s.get("uses", "")).startswith("actions/checkout@"))
        assert checkout["with"]["persist-credentials"] is False
    assert not [s for s in jobs["publish"]["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]


def test_credentials_come_from_secrets_only() -> None:
    jobs = _workflow()["jobs"]
    job = jobs["build"]
    secret_names = [name for name in job["env"] if re.search(r"PASSWORD|TOKEN|SECRET|KEY|CONNECTION", name)]
    assert secret_names == ["SCCACHE_REDIS_PASSWORD"]
    for name in secret_names:
        assert job["env"][name] == "${{ secrets." + name + " }}"
    assert job["env"]["SCCACHE_REDIS_ENDPOINT"].startswith("${{ secrets.")
    text = WORKFLOW.read_text(encoding="utf-8")
    assert not re.search(r"://[^/\s:@]*:[^@\s]+@", text)  # no password in a URL
    assert "secrets." not in yaml.safe_dump({"plan": jobs["plan"], "publish": jobs["publish"]})  # hosted jobs: none
    # Dispatch inputs and matrix values reach the shell through the environment, never pasted into a script.
    for each in jobs.values():
        for step in each["steps"]:
            assert "${{" not in step.get("run", ""), step.get("name")


def test_the_plan_feeds_the_build_matrix_and_the_publish_job_always_merges() -> None:
    """Issue 31: plan (GitHub-hosted, --matrix-json) → build (one self-hosted job per entry, fail-fast off) →
    publish (always, once the plan ran: the parts and last night's channel merged, Pages deployed)."""
    jobs = _workflow()["jobs"]
    plan, build, publish = jobs["plan"], jobs["build"], jobs["publish"]
    assert plan["outputs"] == {
        "matrix": "${{ steps.plan.outputs.matrix }}",
        "builds": "${{ steps.plan.outputs.builds }}",
    }
    step = next(s for s in plan["steps"] if s.get("id") == "plan")
    assert '-m invoke nightly "${args[@]}"' in step["run"] and "--matrix-json --plan-file" in step["run"]
    assert build["needs"] == "plan" and build["if"] == "${{ needs.plan.outputs.builds != '0' }}"
    assert build["strategy"] == {"fail-fast": False, "matrix": "${{ fromJSON(needs.plan.outputs.matrix) }}"}
    assert publish["needs"] == ["plan", "build"]
    assert publish["if"] == "${{ always() && needs.plan.result == 'success' }}"
    uploads = {
        s["with"]["name"]: s
        for s in plan["steps"] + build["steps"] + publish["steps"]
        if "upload-artifact" in str(s.get("uses"))
    }
    assert set(uploads) == {"nightly-plan", "nightly-previous", "nightly-part-${{ matrix.entry }}", "nightly-channel"}
    downloads = [s["with"] for s in publish["steps"] if "download-artifact" in str(s.get("uses"))]
    assert [d.get("name") or d.get("pattern") for d in downloads] == [
        "nightly-plan",
        "nightly-part-*",
        "nightly-previous",
    ]
    merge = next(s for s in publish["steps"] if "nightly-merge" in s.get("run", ""))
    assert "--plan" in merge["run"] and "--part" in merge["run"] and "--previous" in merge["run"]
    assert "nightly-site" in merge["run"] and "--stage" in merge["run"] and "--wheels newest" in merge["run"]
    # Last night's channel is this workflow's newest nightly-channel artifact of the default branch.
    download = next(s for s in plan["steps"] if "gh run download" in s.get("run", ""))
    assert (
        download["env"]["GH_TOKEN"] == "${{ github.token }}" and "head_branch == env.DEFAULT_BRANCH" in download["run"]
    )
    assert uploads["nightly-channel"]["with"]["retention-days"] == 90


def test_pages_are_deployed_by_the_publish_job_that_may_only_deploy_them() -> None:
    """Issue 29 point 11: no workflow_run trigger (zizmor's dangerous-triggers); the site is deployed by a job of
    the same run, on a GitHub-hosted runner, with pages and id-token only."""
    workflows = sorted((REPO_ROOT / ".github" / "workflows").glob("*.y*ml"))
    assert workflows == [WORKFLOW]
    assert "workflow_run" not in _triggers(_workflow())
    publish = _workflow()["jobs"]["publish"]
    assert publish["environment"]["name"] == "github-pages"
    deploy = [s for s in publish["steps"] if "pages" in str(s.get("uses", ""))]
    assert [s["uses"].split("@")[0] for s in deploy] == ["actions/upload-pages-artifact", "actions/deploy-pages"]
    assert all(s["if"] == "${{ vars.NIGHTLY_PAGES == 'true' }}" for s in deploy)


def test_every_action_is_pinned_to_a_commit_with_its_release_named() -> None:
    """zizmor's unpinned-uses: a tag can be moved to other code; a commit cannot."""
    uses = re.findall(r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$", WORKFLOW.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(uses) == 11
    for action, comment in uses:
        assert re.fullmatch(r"actions/[a-z-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", comment), (action, comment)
    assert len({action for action, _ in uses}) == 5  # one commit per action, everywhere it is used


def test_each_build_job_builds_its_entry_into_a_part_and_uploads_it() -> None:
    steps = _workflow()["jobs"]["build"]["steps"]
    bootstrap = next(step for step in steps if "bootstrap_runner.ps1" in step.get("run", ""))
    nightly = next(step for step in steps if "-m invoke nightly" in step.get("run", ""))
    upload = next(step for step in steps if str(step.get("uses", "")).startswith("actions/upload-artifact@"))
    assert steps.index(bootstrap) < steps.index(nightly) < steps.index(upload)
    assert (
        nightly["id"] == "nightly" and nightly["shell"] == "pwsh" and nightly["env"] == {"ENTRY": "${{ matrix.entry }}"}
    )
    assert "@('--only', $env:ENTRY, '--cache-dir'" in nightly["run"] and "'--output-dir', $part" in nightly["run"]
    assert "exit $LASTEXITCODE" in nightly["run"]
    # The nightly names its run folder as a step output (GITHUB_OUTPUT); the part is uploaded even when the
    # entry failed, named after the entry.
    assert upload["with"]["path"] == "${{ runner.temp }}/nightly-part" and "!cancelled()" in upload["if"]
    assert upload["with"]["name"] == "nightly-part-${{ matrix.entry }}"


def test_scheduled_task_script_registers_a_daily_task_running_the_nightly_from_the_repo() -> None:
    text = REGISTER.read_text(encoding="utf-8")
    assert re.search(r"New-ScheduledTaskTrigger -Daily -At \$At", text)
    assert re.search(r"\[string\] \$At = '\d\d:\d\d'", text)
    action = re.search(r"New-ScheduledTaskAction -Execute 'cmd.exe' -Argument (.+) -WorkingDirectory \$RepoRoot", text)
    assert action, "the action runs in the repo"
    assert "$RepoRoot = Split-Path -Parent $PSScriptRoot" in text
    assert re.search(r"\$nightly = @\(.*\$python.*'-m', 'invoke', 'nightly'\)", text)
    assert "$python = Join-Path $Venv 'Scripts\\python.exe'" in text
    assert re.search(
        r"Register-ScheduledTask -TaskName \$TaskName .*-Action \$action -Trigger \$trigger .*-Force", text
    )
    assert "-MultipleInstances IgnoreNew" in text  # a night still running is not started twice
    assert "-LogonType S4U" in text  # no stored password


def test_scheduled_task_script_unregisters_with_a_switch() -> None:
    text = REGISTER.read_text(encoding="utf-8")
    assert re.search(
        r"\[Parameter\(ParameterSetName = 'Unregister', Mandatory = \$true\)\]\s*\[switch\] \$Unregister", text
    )
    branch = text[text.index("if ($Unregister) {") :]
    branch = branch[: branch.index("\n}\n")]
    assert "Unregister-ScheduledTask -TaskName $TaskName -Confirm:$false" in branch and "return" in branch
    assert text.index("if ($Unregister) {") < text.index("Register-ScheduledTask -TaskName")


def test_bootstrap_script_makes_the_venv_installs_the_repo_and_checks() -> None:
    text = BOOTSTRAP.read_text(encoding="utf-8")
    assert '& py "-$PythonVersion"' in text and "struct.calcsize('P') * 8" in text and "if ($bits -ne '64')" in text
    assert "@('-m', 'venv', $Venv)" in text
    assert "'--editable', \"$RepoRoot[windows-cache]\"" in text
    assert "'--no-deps', 'clcache', 'pymemcache'" in text
    assert "'invoke', '--search-root', $RepoRoot, 'doctor'" in text
    assert "if ($LASTEXITCODE -ne 0) { throw" in text  # native failures stop the script
    assert "$ErrorActionPreference = 'Stop'" in text


def test_bootstrap_script_registers_the_runner_with_its_labels_from_doctor() -> None:
    """Issue 31: the labels come from the machine's own `invoke doctor` facts (`invoke nightly --runner-labels`),
    and the registration token never reaches a message or the log."""
    text = BOOTSTRAP.read_text(encoding="utf-8")
    assert "$labels = & $python -m invoke --search-root $RepoRoot nightly --runner-labels" in text
    assert text.index("'doctor'") < text.index("nightly --runner-labels\n")
    register = text[text.index("if ($RunnerDir) {") :]
    assert "Join-Path $RunnerDir 'config.cmd'" in register and "'--labels', $labels" in register
    assert "'--unattended', '--url', $RunnerUrl, '--token', $RunnerToken" in register
    # Run directly, not through Invoke-Checked, whose message repeats the arguments (the token among them).
    assert "& (Join-Path $RunnerDir 'config.cmd') @config" in register
    code = [line for line in register.splitlines() if not line.strip().startswith("#")]
    assert not [line for line in code if "Invoke-Checked" in line]
    assert re.search(r"\[string\] \$RunnerToken", text)
    assert not [line for line in text.splitlines() if re.search(r"Write-|throw", line) and "$RunnerToken" in line]


def test_the_workflow_and_the_task_use_the_same_bootstrap_venv_layout() -> None:
    workflow = WORKFLOW.read_text(encoding="utf-8")
    assert (
        '-Venv "$env:NIGHTLY_HOME\\venv"' in workflow
        and '"$env:NIGHTLY_HOME\\venv\\Scripts\\python.exe" -m invoke nightly' in workflow
    )
    for script in (REGISTER, BOOTSTRAP):
        assert "[string] $Venv = (Join-Path (Split-Path -Parent $PSScriptRoot) '.venv')" in script.read_text(
            encoding="utf-8"
        )
    assert Path(REGISTER).read_text(encoding="utf-8").count("bootstrap_runner.ps1") >= 1
