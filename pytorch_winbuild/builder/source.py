"""The PyTorch source: an existing checkout, or a clone made and kept up to date with git.

A clone is checked out at the exact commit the ref names (detached), with every submodule
synced and updated recursively: PyTorch's third_party folders are submodules, and a stale one
is a classic source of baffling build errors. A clone with local changes is never overwritten.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigurationError, DependencyError, ToolchainError
from ..knowledge import Era
from ..redact import redact_text

CLONES_FOLDER = "src"
CWRAP_SOURCE = Path("aten/src/ATen/common_with_cwrap.py")
CWRAP_TARGET = Path("tools/shared/cwrap_common.py")


@dataclass(frozen=True)
class SourceCheckout:
    path: Path
    origin: str  # "existing checkout", "cloned", "fetched"
    repo: str | None
    ref: str | None
    commit: str | None
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "origin": self.origin, "repo": redact_text(self.repo) if self.repo else None, "ref": self.ref, "commit": self.commit, "seconds": round(self.seconds, 3)}


def _repo_name(repo: str) -> str:
    """https://github.com/pytorch/pytorch.git → pytorch; /srv/git/mini/ → mini."""
    tail = re.split(r"[/\\:]", repo.rstrip("/\\"))[-1]
    name = tail[:-4] if tail.endswith(".git") else tail
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "source"


def clone_destination(repo: str, source: Path | None, cache_dir: Path) -> Path:
    """Where a clone lives: --source when given, else <cache>/src/<name>."""
    return source if source is not None else cache_dir / CLONES_FOLDER / _repo_name(repo)


def _same_repo(a: str, b: str) -> bool:
    def normal(url: str) -> str:
        url = url.rstrip("/\\")
        return url[:-4] if url.endswith(".git") else url

    return normal(a) == normal(b)


class _Git:
    """git in one folder; network steps show git's own progress, queries are captured."""

    def __init__(self, folder: Path) -> None:
        executable = shutil.which("git")
        if executable is None:
            raise ToolchainError("--repo needs git, and git is not installed.", fix="install Git for Windows (or `apt-get install git`), then run again; or pass --source with an existing checkout.")
        self.git = executable
        self.folder = folder

    def show(self, *args: str) -> None:
        command = [self.git, "-C", str(self.folder), *args]
        status = subprocess.run(command, stdin=subprocess.DEVNULL, check=False).returncode
        if status != 0:
            raise DependencyError(
                f"`git {' '.join(redact_text(a) for a in args)}` in {self.folder} failed with exit status {status} (git's message is above).",
                fix="check the URL, the network and your access to the repository, then run again.",
            )

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.git, "-C", str(self.folder), *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)

    def query(self, *args: str) -> str | None:
        completed = self.run(*args)
        return completed.stdout.strip() if completed.returncode == 0 else None


def _resolve(git: _Git, ref: str | None) -> str:
    """The commit a branch, tag or SHA names after a fetch (the remote's default branch for None)."""
    candidates = [f"refs/remotes/origin/{ref}", f"refs/tags/{ref}", ref] if ref else ["refs/remotes/origin/HEAD"]
    for candidate in candidates:
        commit = git.query("rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}")
        if commit:
            return commit
    said = ""
    if ref:
        # A commit no branch or tag of the fetched ones contains (a pull request's head): ask for it.
        fetched = git.run("fetch", "--quiet", "origin", ref)
        commit = git.query("rev-parse", "--verify", "--quiet", "FETCH_HEAD^{commit}") if fetched.returncode == 0 else None
        if commit:
            return commit
        lines = fetched.stderr.strip().splitlines()
        said = f" (git: {redact_text(lines[-1])})" if lines else ""
    raise ConfigurationError(f"--ref {ref} names no branch, tag or commit of the repository{said}.", fix="pass an existing branch (e.g. main), tag (e.g. v2.4.0) or full commit SHA.")


def _check_existing(git: _Git, repo: str, folder: Path) -> None:
    origin = git.query("remote", "get-url", "origin")
    if origin is None or not _same_repo(origin, repo):
        raise ConfigurationError(
            f"{folder} is a clone of {redact_text(origin or 'an unknown remote')}, not of {redact_text(repo)}.",
            fix="pass --source with another folder for this repository, or leave --repo out to build that clone as it is.",
        )
    changes = git.query("status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all")
    if changes:
        first = changes.splitlines()[0].strip()
        raise ConfigurationError(
            f"the clone {folder} has local changes (e.g. {first}); checking out another ref would overwrite them.",
            fix="commit or stash them (git stash), or build that clone as it is with --source and without --repo.",
        )


def acquire_source(*, repo: str, ref: str | None, destination: Path) -> SourceCheckout:
    """Clone `repo` into `destination`, or fetch an existing clone there; check out `ref` with its submodules."""
    started = time.monotonic()
    if (destination / ".git").exists():
        git = _Git(destination)
        _check_existing(git, repo, destination)
        git.show("fetch", "--tags", "--force", "origin")
        origin = "fetched"
    else:
        if destination.exists() and any(destination.iterdir()):
            raise ConfigurationError(f"{destination} exists, is not empty and is not a git clone, so it cannot receive a clone of {redact_text(repo)}.", fix="pass --source with an empty or new folder, or remove that one.")
        destination.parent.mkdir(parents=True, exist_ok=True)
        _Git(destination.parent).show("clone", "--no-checkout", repo, str(destination))
        git = _Git(destination)
        origin = "cloned"
    commit = _resolve(git, ref)
    git.show("checkout", "--quiet", "--force", "--detach", commit)
    git.show("submodule", "sync", "--recursive")
    git.show("submodule", "update", "--init", "--recursive")
    return SourceCheckout(destination, origin, repo, ref, commit, time.monotonic() - started)


def existing_checkout(path: Path) -> SourceCheckout:
    """A checkout the user pointed at: used as it is, its commit recorded when it is a git clone."""
    commit = None
    if (path / ".git").exists() and shutil.which("git"):
        commit = _Git(path).query("rev-parse", "HEAD")
    return SourceCheckout(path, "existing checkout", None, None, commit, 0.0)


def old_era_prep(source_dir: Path, era: Era) -> str | None:
    """The seeds' prep step for 0.3/0.4 sources: copy common_with_cwrap.py where tools/ expects it."""
    if not era.cwrap_prep:
        return None
    source, target = source_dir / CWRAP_SOURCE, source_dir / CWRAP_TARGET
    if not source.is_file() or target.exists():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return f"Copied {CWRAP_SOURCE.as_posix()} to {CWRAP_TARGET.as_posix()} (PyTorch {era.name} sources need it there, the seeds' prep step)."
