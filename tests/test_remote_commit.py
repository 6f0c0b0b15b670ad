"""`remote_commit` (what a ref names on the remote, from one `git ls-remote`) against a real git repo.

The nightly skips an unchanged entry on this answer alone, so it must agree with what the full
checkout would resolve (builder/source.py `_resolve`): the default branch, a branch before a tag of
the same name, an annotated tag's commit rather than the tag object, and a full SHA as given.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytorch_winbuild.builder.source import checked_out_commit, remote_commit

pytestmark = pytest.mark.build  # real git


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "--quiet", "--initial-branch=main")
    git(folder, "config", "user.email", "t@example.com")
    git(folder, "config", "user.name", "t")
    (folder / "a.txt").write_text("one\n")
    git(folder, "add", "a.txt")
    git(folder, "commit", "--quiet", "-m", "one")
    return folder


def commit(folder: Path, text: str) -> str:
    (folder / "a.txt").write_text(text)
    git(folder, "commit", "--quiet", "-am", text)
    return git(folder, "rev-parse", "HEAD")


def test_default_branch_branch_tags_and_full_sha(repo: Path, tmp_path: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "light")
    git(repo, "tag", "-a", "annotated", "-m", "an annotated tag")
    second = commit(repo, "two")
    assert remote_commit(str(repo), None, tmp_path) == second
    assert remote_commit(str(repo), "main", tmp_path) == second
    assert remote_commit(str(repo), "light", tmp_path) == first
    tag_object = git(repo, "rev-parse", "annotated")
    assert tag_object != first and remote_commit(str(repo), "annotated", tmp_path) == first
    assert remote_commit(str(repo), first, tmp_path) == first  # a full SHA needs no lookup


def test_a_branch_wins_over_a_tag_of_the_same_name(repo: Path, tmp_path: Path) -> None:
    tagged = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "release")
    git(repo, "branch", "release")
    git(repo, "checkout", "--quiet", "release")
    moved = commit(repo, "on the branch")
    assert moved != tagged and remote_commit(str(repo), "release", tmp_path) == moved


def test_what_ls_remote_cannot_say_is_none(repo: Path, tmp_path: Path) -> None:
    short = git(repo, "rev-parse", "--short", "HEAD")
    assert remote_commit(str(repo), short, tmp_path) is None  # the full fetch resolves (or rejects) it
    assert remote_commit(str(repo), "no-such-branch", tmp_path) is None
    assert remote_commit(str(tmp_path / "missing"), "main", tmp_path) is None


def test_checked_out_commit_reads_a_detached_head_only(repo: Path, tmp_path: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    assert checked_out_commit(repo) is None  # a branch is checked out: the nightly's clones are detached
    git(repo, "checkout", "--quiet", "--detach", head)
    assert checked_out_commit(repo) == head
    assert checked_out_commit(tmp_path / "nothing") is None
