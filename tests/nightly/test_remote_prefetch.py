"""A nightly asks each repository once, before its entries run, whether their refs moved.

Real git throughout: the repositories are real (mini torch), the clones are real `git clone`s in
the nightly's source folder, and the number of `ls-remote` and `check-ref-format` processes is
git's own record (GIT_TRACE), not a counter inside the code. The expected commits come from
`git rev-parse` in the repository itself.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from nightly_support import commit_all, git, make_repo, write_matrix

from pytorch_winbuild.facts.model import load_facts
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.nightly.entry import SOURCES_FOLDER, RunContext, prefetch_remote_commits
from pytorch_winbuild.nightly.matrix import load_matrix
from pytorch_winbuild.nightly.state import LastSuccess, NightlyState


def rev_parse(repo: Path, ref: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", f"{ref}^{{commit}}"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def traced(trace: Path, command: str) -> int:
    """How many `git COMMAND` processes git's trace recorded."""
    if not trace.exists():
        return 0
    return sum(1 for line in trace.read_text(encoding="utf-8").splitlines() if f"git {command}" in line)


def context_for(tmp_path: Path, entries: list[dict[str, str]], clones: dict[str, tuple[Path, str]]) -> RunContext:
    """A nightly's shared state: the last success of each entry in `clones` is its clone's commit."""
    output, cache = tmp_path / "out", tmp_path / "cache"
    knowledge = load_knowledge()
    matrix = load_matrix(write_matrix(tmp_path / "matrix.toml", entries, output_dir=output), knowledge)
    state = NightlyState(output)
    for name, (repo, ref) in clones.items():
        clone = cache / SOURCES_FOLDER / name
        clone.parent.mkdir(parents=True, exist_ok=True)
        git(clone.parent, "clone", "-q", str(repo), clone.name)
        commit = rev_parse(repo, ref)
        git(clone, "checkout", "-q", "--detach", commit)  # as the nightly leaves its clones
        state.record(name, LastSuccess(commit, "hash", "wheel.whl", "2026-11-22", "2026-11-22T03:00"))
    return RunContext(
        matrix=matrix,
        facts=load_facts("build_config/hosts/cpu-only.json"),
        knowledge=knowledge,
        cache_dir=cache,
        run_dir=output / "2026-11-23",
        date="2026-11-23",
        state=state,
        force=False,
        mirror=None,
        mirror_label="--mirror",
    )


def test_one_ls_remote_per_repository_for_every_entry_that_may_be_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = make_repo(tmp_path / "first"), make_repo(tmp_path / "second")
    git(second, "tag", "-a", "v1.0", "-m", "a release", "broken")
    entries = [
        {"name": "a-main", "repo": str(first), "ref": "main", "cuda": "cpu"},
        {"name": "a-broken", "repo": str(first), "ref": "broken", "cuda": "cpu"},
        {"name": "a-main-again", "repo": str(first), "ref": "main", "cuda": "cpu"},
        {"name": "b-tag", "repo": str(second), "ref": "v1.0", "cuda": "cpu"},
        {"name": "b-default", "repo": str(second), "cuda": "cpu"},
        {"name": "never-built", "repo": str(second), "ref": "broken", "cuda": "cpu"},
    ]
    clones = {
        "a-main": (first, "main"),
        "a-broken": (first, "broken"),
        "a-main-again": (first, "main"),
        "b-tag": (second, "v1.0"),
        "b-default": (second, "main"),
    }
    context = context_for(tmp_path, entries, clones)
    trace = tmp_path / "git-trace.txt"
    monkeypatch.setenv("GIT_TRACE", str(trace))

    prefetch_remote_commits(context.matrix.entries, context)

    assert traced(trace, "ls-remote") == 2  # one per repository, not one per entry
    assert context.remote == {
        (str(first), "main"): rev_parse(first, "main"),
        (str(first), "broken"): rev_parse(first, "broken"),
        (str(second), "v1.0"): rev_parse(second, "v1.0"),  # the annotated tag's commit, not the tag object
        (str(second), None): rev_parse(second, "HEAD"),
    }  # "never-built" has no last success: nothing to ask for it


def test_a_moved_ref_is_seen_and_a_missing_repository_is_left_to_the_full_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, gone = make_repo(tmp_path / "repo"), make_repo(tmp_path / "gone")
    entries = [
        {"name": "moved", "repo": str(repo), "ref": "main", "cuda": "cpu"},
        {"name": "gone", "repo": str(gone), "ref": "main", "cuda": "cpu"},
    ]
    context = context_for(tmp_path, entries, {"moved": (repo, "main"), "gone": (gone, "main")})
    (repo / "csrc" / "ops.cpp").write_text("// moved on\n", encoding="utf-8")
    commit_all(repo, "moved on")
    shutil.rmtree(gone)

    prefetch_remote_commits(context.matrix.entries, context)

    assert context.remote[(str(repo), "main")] == rev_parse(repo, "main")
    assert context.remote[(str(gone), "main")] is None  # ls-remote failed: the entry goes the full way


def test_git_is_asked_once_per_ref_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """check-ref-format's answer depends only on the name: 6 entries on 2 refs start it twice."""
    from pytorch_winbuild.builder import source

    source._git_accepts_ref.cache_clear()
    trace = tmp_path / "git-trace.txt"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    for _ in range(3):
        source.check_ref("main")
        source.check_ref("release/2.6")
    assert traced(trace, "check-ref-format") == 2
    with pytest.raises(Exception, match="not a branch, tag or commit name"):
        source.check_ref("two..dots")
