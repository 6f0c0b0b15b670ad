"""A dry run of --repo shows how the build gets the source (issue 38, point 6 and two items of point 7), against real
git and real local repositories (no network):

- the git commands it prints (clone, or fetch of the clone already there; the checkout of the ref; the submodules
  synced and updated), run as printed in bash, and its `--format sh` script, sourced, make the checkout that the
  build's own clone (builder/source.py acquire_source) makes, in the folder the plan names, where the build runs;
- a local --repo with no repository there is refused by the dry run as by the build, exit 2;
- a clone git cannot make exits 4, which the README's exit-code table documents for the --repo source.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
from pathlib import Path

import pytest
from support import REPO_ROOT, run_invoke

from pytorch_winbuild.builder.source import acquire_source
from pytorch_winbuild.errors import SourceError

IDENTITY = ["-c", "user.name=dry run test", "-c", "user.email=dry@example.invalid"]
# git 2.38.1+ clones submodules over file:// only when allowed (CVE-2022-39253); the build passes the user's config.
FILE_SUBMODULES = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow", "GIT_CONFIG_VALUE_0": "always"}


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *IDENTITY, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def commit_all(folder: Path, message: str) -> str:
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", message)
    return git(folder, "rev-parse", "HEAD")


@pytest.fixture
def file_submodules(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in FILE_SUBMODULES.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **FILE_SUBMODULES}


@pytest.fixture
def upstream(tmp_path: Path, file_submodules: dict[str, str]) -> dict[str, str]:
    """A bare repository (in a folder whose name has a space and a quote) with a submodule: tag v1.0 (annotated) on
    the first commit, main, release/2.6, a branch and a tag both named `twin` (the branch wins, as in the build), and
    a pull request head that no branch holds."""
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    (library / "library.h").write_text("int one(void);\n")
    first_library = commit_all(library, "library one")
    (library / "library.h").write_text("int two(void);\n")
    commit_all(library, "library two")
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "version.txt").write_text("1.0.0\n")
    git(work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "third_party/library")
    git(work / "third_party" / "library", "checkout", "-q", first_library)
    v1 = commit_all(work, "one")
    git(work, "tag", "-a", "-m", "release 1.0", "v1.0")
    git(work, "branch", "release/2.6")
    git(work, "tag", "twin")
    (work / "version.txt").write_text("2.0.0\n")
    git(work / "third_party" / "library", "checkout", "-q", "main")
    main = commit_all(work, "two")
    git(work, "branch", "twin")
    git(work, "checkout", "-q", "-b", "pr")
    (work / "version.txt").write_text("2.1.0a0\n")
    pull = commit_all(work, "pull request")
    git(work, "checkout", "-q", "main")
    bare = tmp_path / "repos it's" / "up.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    git(bare, "update-ref", "refs/pull/1/head", pull)
    git(bare, "branch", "-D", "pr")
    return {"path": str(bare), "v1": v1, "main": main, "pull": pull}


def dry_run(upstream: str, ref: str | None, cache: Path, env: dict[str, str], *, fmt: str = "json") -> str:
    done = run_invoke(
        "build",
        "--dry-run",
        "--cuda",
        "cpu",
        "--format",
        fmt,
        "--repo",
        upstream,
        *(("--ref", ref) if ref else ()),
        "--cache-dir",
        str(cache),
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def checkout_state(folder: Path) -> dict[str, object]:
    """What a build sees of a clone: the commit, a clean tree, each submodule's commit, the files."""
    return {
        "head": git(folder, "rev-parse", "HEAD"),
        "detached": git(folder, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD",
        "changes": git(folder, "status", "--porcelain"),
        "submodules": git(folder, "submodule", "status", "--recursive"),
        "files": {
            str(path.relative_to(folder)): path.read_text()
            for path in sorted(folder.rglob("*.*"))
            if ".git" not in path.relative_to(folder).parts
        },
    }


def printed_run(plan: dict, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The plan's git commands and its `cd`, pasted into bash one after the other, then where that leaves bash."""
    steps = len(plan["checkout"]["steps"])
    lines = [command["command"] for command in plan["commands"][:steps]]
    lines += [command["command"] for command in plan["commands"] if command["command"].startswith("cd ")]
    script = "set -e\n" + "\n".join(lines) + "\npwd\n"
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True)


REFS = [("v1.0", "v1"), ("main", "main"), ("release/2.6", "v1"), ("twin", "main"), ("sha", "v1"), ("pull", "pull")]


@pytest.mark.parametrize(("ref", "expected"), [*REFS, (None, "main")], ids=[*(r for r, _ in REFS), "default-branch"])
def test_the_printed_clone_makes_the_checkout_the_build_makes(
    upstream: dict[str, str], file_submodules: dict[str, str], tmp_path: Path, ref: str | None, expected: str
) -> None:
    name = {"sha": upstream["v1"], "pull": upstream["pull"]}.get(ref or "", ref)
    cache = tmp_path / "cache (x86) & co"
    plan = json.loads(dry_run(upstream["path"], name, cache, file_submodules))
    folder = cache / "src" / "up"
    checkout = plan["checkout"]
    assert (checkout["folder"], checkout["build_folder"], checkout["action"]) == (str(folder), str(folder), "clone")
    assert not folder.exists()  # a dry run clones nothing
    assert plan["commands"][0]["command"].startswith("git clone --no-checkout -- ")
    ran = printed_run(plan, tmp_path, file_submodules)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == str(folder)  # the folder the build runs in
    built = acquire_source(repo=upstream["path"], ref=name, destination=tmp_path / "built" / "up")
    assert built.commit == upstream[expected]
    assert checkout_state(folder) == checkout_state(built.path)


@pytest.mark.parametrize("ref", ["main", "v1.0", None])
def test_an_existing_clone_is_fetched_as_printed(
    upstream: dict[str, str], file_submodules: dict[str, str], tmp_path: Path, ref: str | None
) -> None:
    """The clone is there (at v1.0) and upstream moved on: the plan fetches it, as the build does."""
    cache = tmp_path / "cache"
    folder, built = cache / "src" / "up", tmp_path / "built"
    for destination in (folder, built):
        acquire_source(repo=upstream["path"], ref="v1.0", destination=destination)
    work = tmp_path / "work"
    (work / "version.txt").write_text("3.0.0\n")
    newer = commit_all(work, "three")
    git(work, "push", "-q", upstream["path"], "main")
    plan = json.loads(dry_run(upstream["path"], ref, cache, file_submodules))
    assert plan["checkout"]["action"] == "fetch"
    assert plan["commands"][0]["command"] == f"git -C {folder} fetch --tags --force -- origin"
    assert printed_run(plan, tmp_path, file_submodules).returncode == 0
    assert acquire_source(repo=upstream["path"], ref=ref, destination=built).origin == "fetched"
    assert checkout_state(folder) == checkout_state(built)
    assert git(folder, "rev-parse", "HEAD") == (upstream["v1"] if ref == "v1.0" else newer)


def test_the_sh_script_gets_the_source_and_leaves_the_shell_in_the_clone(
    upstream: dict[str, str], file_submodules: dict[str, str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    script = tmp_path / "build_env.sh"
    script.write_text(dry_run(upstream["path"], "release/2.6", cache, file_submodules, fmt="sh"))
    sourced = subprocess.run(
        ["bash", "-c", '. ./build_env.sh && pwd && printf "%s\\n" "$USE_CUDA"'],
        cwd=tmp_path,
        env=file_submodules,
        capture_output=True,
        text=True,
    )
    assert sourced.returncode == 0, sourced.stderr
    assert sourced.stdout.splitlines()[-2:] == [str(cache / "src" / "up"), "0"]
    built = acquire_source(repo=upstream["path"], ref="release/2.6", destination=tmp_path / "built")
    assert checkout_state(cache / "src" / "up") == checkout_state(built.path)
    again = subprocess.run(
        ["bash", "-c", ". ./build_env.sh; echo after $?"], cwd=tmp_path, capture_output=True, text=True
    )
    assert "pytorch-winbuild: git failed" in again.stderr and "after 1" in again.stdout  # stops, keeps the shell


def test_the_table_names_the_clone_and_the_folder_the_build_runs_in(
    upstream: dict[str, str], file_submodules: dict[str, str], tmp_path: Path
) -> None:
    table = dry_run(upstream["path"], "v1.0", tmp_path / "cache", file_submodules, fmt="table")
    folder = tmp_path / "cache" / "src" / "up"
    row = next(line for line in table.splitlines() if line.startswith("  Checkout"))
    assert f"{folder} (a new clone; v1.0 checked out with its submodules: Commands 1–4); the build runs in" in row
    numbered = re.findall(r"^  (\d+)\. (.*)$", table, re.MULTILINE)
    assert numbered[0] == ("1", f"git clone --no-checkout -- {shlex.quote(upstream['path'])} {folder}")
    cd = next(int(number) for number, line in numbered if line.startswith("cd "))
    assert numbered[cd - 1][1] == f"cd -- {folder}"
    assert numbered[cd][1].endswith("-m pip install --no-build-isolation -v .")  # the build command follows


@pytest.mark.parametrize("form", ["path", "relative", "file-url"])
def test_a_local_repo_with_nothing_there_is_refused_by_the_dry_run_as_by_the_build(tmp_path: Path, form: str) -> None:
    missing = tmp_path / "no such repo"
    repo = {"path": str(missing), "relative": "no such repo", "file-url": missing.as_uri()}[form]
    common = ("--cuda", "cpu", "--repo", repo, "--cache-dir", str(tmp_path / "cache"))
    planned = run_invoke("build", "--dry-run", *common, cwd=tmp_path)
    built = run_invoke("build", *common, cwd=tmp_path)
    for done in (planned, built):
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.startswith(
            f"configuration error: --repo {repo} is a path on this machine, and nothing is there: {missing} does not "
            "exist."
        ), done.stderr
    assert planned.stdout == "" and not (tmp_path / "cache" / "src").exists()


def test_a_folder_that_is_no_repository_is_refused_before_git_runs(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = run_invoke("build", "--dry-run", "--cuda", "cpu", "--repo", str(tmp_path / "empty"), cwd=tmp_path)
    assert done.returncode == 2
    assert f"{tmp_path / 'empty'} is not a git repository" in done.stderr


def test_a_failed_clone_exits_with_the_code_the_readme_gives_it(tmp_path: Path) -> None:
    """A server that does not answer (a port nothing listens on): git's clone fails, exit 4, a source error, which
    the README's table documents under 4."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    repo = f"http://127.0.0.1:{port}/up.git"
    done = run_invoke(
        "build",
        "--cuda",
        "cpu",
        "--repo",
        repo,
        "--cache-dir",
        str(tmp_path / "cache"),
        env={"GIT_TERMINAL_PROMPT": "0"},
    )
    assert done.returncode == SourceError.exit_code == 4, done.stdout + done.stderr
    assert f"source error: `git clone --no-checkout -- {repo} " in done.stderr
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    row = re.search(r"^\| 4 \| (.+) \|$", readme, re.MULTILINE)
    assert row is not None and "`source error`" in row.group(1) and "clone" in row.group(1)
    assert "`--repo`" in row.group(1)


def test_relative_repo_and_folder_are_the_users_not_gits(
    upstream: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--repo ../x.git --source clones/x` name folders from where the user is: the clone, a second run (the fetch)
    and the printed commands, pasted anywhere, agree."""
    monkeypatch.chdir(Path(upstream["path"]).parent)
    first = acquire_source(repo="up.git", ref="v1.0", destination=Path("clones") / "up")
    again = acquire_source(repo="./up.git/", ref="main", destination=Path("clones") / "up")
    assert (first.path, first.commit, again.origin, again.commit) == (
        Path(upstream["path"]).parent / "clones" / "up",
        upstream["v1"],
        "fetched",
        upstream["main"],
    )
    done = run_invoke(
        "build",
        "--dry-run",
        "--cuda",
        "cpu",
        "--format",
        "json",
        "--repo",
        "up.git",
        "--source",
        "other",
        cwd=Path.cwd(),
    )
    assert done.returncode == 0, done.stderr
    checkout = json.loads(done.stdout)["checkout"]
    assert checkout["repo"] == upstream["path"] and checkout["folder"] == str(Path.cwd() / "other")


def test_every_format_of_a_windows_plan_holds_the_git_commands_quoted_for_its_shell(tmp_path: Path) -> None:
    """A --host plan for the seeds' Windows machine: the clone goes to that machine's cache; cmd's line (the table,
    JSON and the .bat) double-quotes what cmd would split, PowerShell's doubles the quote inside its verbatim string."""
    repo = "https://example.invalid/it's (x86)/pytorch.git"
    folder = "C:\\Users\\builder\\AppData\\Local\\pytorch-winbuild\\src\\pytorch"
    host = REPO_ROOT / "build_config" / "hosts" / "vs2017-cuda90-cuda100.json"

    def printed(fmt: str) -> str:
        common = ("--cuda", "10.0", "--repo", repo, "--ref", "v1.0.1", "--host", str(host), "--format", fmt)
        done = run_invoke("build", "--dry-run", *common, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    cmd_line = f'git clone --no-checkout -- "{repo}" {folder}'
    assert f"  1. {cmd_line}\n" in printed("table")
    assert f"\n{cmd_line}\nif errorlevel 1 (\n" in printed("bat")  # text mode reads \r\n as \n
    plan = json.loads(printed("json"))
    assert plan["commands"][0]["command"] == cmd_line and plan["checkout"]["folder"] == folder
    assert [c["command"] for c in plan["commands"]][-2] == f"cd /d {folder}"
    ps1 = printed("ps1")
    assert "\ngit clone --no-checkout '--' 'https://example.invalid/it''s (x86)/pytorch.git' " + folder in ps1
    assert ps1.rstrip().endswith(f"Set-Location -LiteralPath '{folder}'")
    percent = run_invoke(
        "build", "--dry-run", "--cuda", "cpu", "--repo", repo, "--source", "C:\\src\\100%", "--host", str(host)
    )
    assert percent.returncode == 2 and "C:\\src\\100% holds a percent sign" in percent.stderr
