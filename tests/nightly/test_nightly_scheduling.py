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
    job = workflow["jobs"]["nightly"]
    assert "permissions" not in job  # the job cannot widen the token
    assert job["runs-on"] == ["self-hosted", "windows", "x64"]
    checkout = next(step for step in job["steps"] if str(step.get("uses", "")).startswith("actions/checkout@"))
    assert checkout["with"]["persist-credentials"] is False


def test_credentials_come_from_secrets_only() -> None:
    job = _workflow()["jobs"]["nightly"]
    secret_names = [name for name in job["env"] if re.search(r"PASSWORD|TOKEN|SECRET|KEY|CONNECTION", name)]
    assert secret_names == ["SCCACHE_REDIS_PASSWORD"]
    for name in secret_names:
        assert job["env"][name] == "${{ secrets." + name + " }}"
    assert job["env"]["SCCACHE_REDIS_ENDPOINT"].startswith("${{ secrets.")
    text = WORKFLOW.read_text(encoding="utf-8")
    assert not re.search(r"://[^/\s:@]*:[^@\s]+@", text)  # no password in a URL
    # Dispatch inputs reach the shell through the environment, never pasted into the script.
    for step in job["steps"]:
        assert "${{ inputs." not in step.get("run", "")


def test_pages_are_deployed_by_a_later_job_that_may_only_deploy_them() -> None:
    """Issue 29 point 11: no workflow_run trigger (zizmor's dangerous-triggers); the site is deployed by a job of
    the same run, on a GitHub-hosted runner, running no code of the repository, with pages and id-token only."""
    workflows = sorted((REPO_ROOT / ".github" / "workflows").glob("*.y*ml"))
    assert workflows == [WORKFLOW]
    assert "workflow_run" not in _triggers(_workflow())
    jobs = _workflow()["jobs"]
    assert set(jobs) == {"nightly", "pages"}
    pages = jobs["pages"]
    assert pages["needs"] == "nightly" and pages["runs-on"] == "ubuntu-latest"
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}
    assert "vars.NIGHTLY_PAGES == 'true'" in pages["if"] and "!cancelled()" in pages["if"]
    assert [step["uses"].split("@")[0] for step in pages["steps"]] == [
        "actions/download-artifact",
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    ]
    assert pages["steps"][0]["with"]["name"] == "nightly-site"
    assert jobs["nightly"]["outputs"]["site"] == "${{ steps.site.outputs.dir != '' }}"


def test_every_action_is_pinned_to_a_commit_with_its_release_named() -> None:
    """zizmor's unpinned-uses: a tag can be moved to other code; a commit cannot."""
    uses = re.findall(r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$", WORKFLOW.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(uses) == 6
    for action, comment in uses:
        assert re.fullmatch(r"actions/[a-z-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", comment), (action, comment)


def test_runs_invoke_nightly_and_uploads_the_run_folder() -> None:
    job = _workflow()["jobs"]["nightly"]
    steps = job["steps"]
    bootstrap = next(step for step in steps if "bootstrap_runner.ps1" in step.get("run", ""))
    nightly = next(step for step in steps if "-m invoke nightly" in step.get("run", ""))
    upload = next(step for step in steps if str(step.get("uses", "")).startswith("actions/upload-artifact@"))
    assert steps.index(bootstrap) < steps.index(nightly) < steps.index(upload)
    assert nightly["id"] == "nightly" and nightly["shell"] == "pwsh"
    assert (
        "--cache-dir" in nightly["run"] and "--output-dir" in nightly["run"] and "exit $LASTEXITCODE" in nightly["run"]
    )
    # The nightly names its run folder as a step output (GITHUB_OUTPUT); the wheels, logs, reports
    # and summary in it are uploaded even when an entry failed.
    assert upload["with"]["path"] == "${{ steps.nightly.outputs.run-dir }}"
    assert "!cancelled()" in upload["if"]


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
