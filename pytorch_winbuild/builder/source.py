"""The PyTorch source: an existing checkout, or a clone made and kept up to date with git.

A clone is checked out at the ref's exact commit with every submodule synced recursively, and never overwritten when
it has local changes. Repository and ref are checked and always follow `--`; a URL's credentials reach git only
through its environment (`_credential_env`). Design notes: docs/architecture.md.
"""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
import sys
import time
from codecs import getincrementaldecoder
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path, PurePath
from typing import TypeVar
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit
from urllib.request import url2pathname

from pytorch_winbuild import child_processes
from pytorch_winbuild.errors import ConfigurationError, SourceError, ToolchainError
from pytorch_winbuild.knowledge.model import Era
from pytorch_winbuild.planning.plan_model import GitArgs
from pytorch_winbuild.text.redact import StreamRedactor, redact_text, remember_secrets

CLONES_FOLDER = "src"
CWRAP_SOURCE = Path("aten/src/ATen/common_with_cwrap.py")
CWRAP_TARGET = Path("tools/shared/cwrap_common.py")
_STUB_LIMIT = 4096  # a link target is a path, not a module
REF_FIX = "pass a branch (e.g. main or release/2.6), a tag (e.g. v2.6.0) or a full 40-character commit SHA."
# CSI (ESC [ ... final), OSC/DCS/PM/APC/SOS strings up to BEL or ST, two-character ESC sequences, and every
# other C0/C1 control but tab, newline and carriage return (git's progress redraws its line with \r).
_TERMINAL_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[]P^_X][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -~]?|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_HEADER_SCHEMES = ("http", "https")
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
_Folder = TypeVar("_Folder", bound=PurePath)


@dataclass(frozen=True)
class SourceCheckout:
    path: Path
    origin: str  # "existing checkout", "cloned", "fetched"
    repo: str | None
    ref: str | None
    commit: str | None
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "origin": self.origin,
            "repo": redact_text(self.repo) if self.repo else None,
            "ref": self.ref,
            "commit": self.commit,
            "seconds": round(self.seconds, 3),
        }


def printable(text: str) -> str:
    """`text` without terminal control sequences: a remote's messages must not retitle, clear or rewrite the console."""
    return _TERMINAL_CONTROL.sub("", text)


def _parsed(repo: str, key: str) -> SplitResult:
    try:
        return urlsplit(repo)
    except ValueError as error:  # e.g. an unclosed [IPv6] host
        raise ConfigurationError(
            f"{key}: {redact_text(repo)!r} is not a valid URL ({error}).",
            fix="pass the repository's URL or path as `git clone` takes it.",
        ) from None


def _split_userinfo(repo: str, key: str) -> tuple[str, str | None]:
    """(the URL without its userinfo, the userinfo) for http(s) URLs; any other repository as it is, with None."""
    parts = _parsed(repo, key)
    if parts.scheme.lower() not in _HEADER_SCHEMES or "@" not in parts.netloc:
        return repo, None
    userinfo, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=host)), userinfo


def carries_credential(repo: str, key: str = "--repo") -> bool:
    """An http(s) URL with a user (and password), which git gets through its environment only."""
    return _split_userinfo(repo, key)[1] is not None


def remote_url(repo: str, key: str = "--repo") -> str:
    """The URL git stores as origin and messages show: an http(s) URL loses its user and password."""
    return _split_userinfo(repo, key)[0]


def _credential_env(repo: str, key: str) -> dict[str, str]:
    """The environment that gives git the URL's user and password as an HTTP header for that scheme and host only.

    Config from GIT_CONFIG_COUNT/KEY_n/VALUE_n (git 2.31+) is not on git's command line (which every
    user can list), is not written anywhere (unlike an askpass script), needs no shell (unlike a
    `!` credential helper) and is never handed to a credential helper that could store it. git's URL
    matching sends it to the repository's host alone, so its submodules on that host get it too.
    """
    url, userinfo = _split_userinfo(repo, key)
    if userinfo is None:
        return {}
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    parts = urlsplit(url)
    count = os.environ.get("GIT_CONFIG_COUNT", "0")
    index = int(count) if count.isascii() and count.isdigit() else 0
    return {
        "GIT_CONFIG_COUNT": str(index + 1),
        f"GIT_CONFIG_KEY_{index}": f"http.{parts.scheme}://{parts.netloc}/.extraHeader",
        f"GIT_CONFIG_VALUE_{index}": f"Authorization: Basic {token}",
    }


def _git_executable(key: str) -> str:
    executable = shutil.which("git")
    if executable is None:
        raise ToolchainError(
            f"{key} needs git, and git is not installed.",
            fix="install Git for Windows (or `apt-get install git`), then run again; or pass --source with an "
            "existing checkout.",
        )
    return executable


def check_repo(repo: str, key: str = "--repo") -> None:
    """Refuse, before git sees it, a repository git would read as an option or that could not be stored safely."""
    shown = repr(redact_text(repo))
    if repo.startswith("-"):
        raise ConfigurationError(
            f"{key}: {shown} starts with '-', so git would read it as an option, not a repository.",
            fix="pass the repository's URL (https://..., ssh://..., git@host:path) or path; write a path that "
            "starts with '-' as ./-name.",
        )
    if _CONTROL_CHARACTER.search(repo):
        raise ConfigurationError(
            f"{key}: {shown} contains control characters, which no repository URL or path has.",
            fix="pass the repository's URL or path as plain text.",
        )
    parts = _parsed(repo, key)
    if parts.password is not None and parts.scheme.lower() not in _HEADER_SCHEMES:
        raise ConfigurationError(
            f"{key}: {shown} carries a password in a {parts.scheme} URL, which git cannot use and would "
            "store in the clone's .git/config.",
            fix="use an SSH key (ssh-agent) for ssh URLs, or an https URL, whose user and password "
            "pytorch-winbuild passes to git without storing them.",
        )


def check_ref(ref: str, key: str = "--ref") -> None:
    """Refuse, before git sees it, a ref git would read as an option or that cannot name a branch, tag or commit.

    A name is what `git check-ref-format --allow-onelevel` accepts (main, v2.6.0, release/2.6, and a
    full commit SHA, which is a valid one-level name); a leading '-' is refused first, since that
    command takes no `--` and would read the ref as its own option.
    """
    if ref.startswith("-"):
        raise ConfigurationError(
            f"{key}: {ref!r} starts with '-', so git would read it as an option, not a ref.", fix=REF_FIX
        )
    if not ref.isprintable():
        raise ConfigurationError(
            f"{key}: {ref!r} holds a control character, which no branch, tag or commit name has.", fix=REF_FIX
        )
    if not _git_accepts_ref(_git_executable(key), ref):
        raise ConfigurationError(
            f"{key}: {ref!r} is not a branch, tag or commit name git accepts (`git check-ref-format` refuses "
            "spaces, control characters, '..', '~', '^', ':', '?', '*', '[', '\\', '@{', and a leading '/' "
            "or a trailing '/', '.' or '.lock').",
            fix=REF_FIX,
        )


@lru_cache(maxsize=256)
def _git_accepts_ref(git: str, ref: str) -> bool:
    """git's own answer, asked once per name: a nightly of 20 entries on `main` checks it 40 times."""
    command = [git, "check-ref-format", "--allow-onelevel", ref]
    return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, check=False).returncode == 0


def _repo_name(repo: str) -> str:
    """https://github.com/pytorch/pytorch.git → pytorch; /srv/git/mini/ → mini."""
    tail = re.split(r"[/\\:]", repo.rstrip("/\\"))[-1]
    name = tail[:-4] if tail.endswith(".git") else tail
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "source"


def clone_destination(repo: str, source: _Folder | None, cache_dir: _Folder) -> _Folder:
    """Where a clone lives: --source when given, else <cache>/src/<name> (paths of the plan's machine)."""
    return source if source is not None else cache_dir / CLONES_FOLDER / _repo_name(repo)


def local_repo_path(repo: str) -> Path | None:
    """The path git reads `repo` as on this machine (a file:// URL or a path, by git's url_is_local_not_ssh), or None
    for a remote: a URL of another scheme or host, or host:path (a colon before any slash, but a Windows drive)."""
    if "://" in repo:
        try:
            parts = urlsplit(repo)
        except ValueError:
            return None
        if parts.scheme.lower() != "file" or parts.netloc.lower() not in ("", "localhost"):
            return None
        return Path(url2pathname(parts.path))
    colon, slash = repo.find(":"), repo.find("/")
    if colon >= 0 and not (0 <= slash < colon) and not (sys.platform == "win32" and _DRIVE.match(repo)):
        return None
    return Path(repo)


def _is_repository(path: Path) -> bool:
    """A folder git clones from: a clone (with .git) or a bare repository; or a file, which git reads as a bundle."""
    return path.is_file() or (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


def check_local_repo(repo: str, key: str = "--repo") -> None:
    """Refuse a repository on this machine that git could not clone from: a path (or file:// URL) with nothing there,
    or a folder that is not a repository. git looks for PATH, PATH.git and PATH.bundle; so does this check."""
    path = local_repo_path(repo)
    if path is None:
        return
    if any(_is_repository(Path(f"{path}{suffix}")) for suffix in ("", ".git", ".bundle")):
        return
    fix = (
        "pass the path (or file:// URL) of a git repository: a clone's folder, a bare repository or a bundle; or a "
        "remote repository's URL (https://..., ssh://..., git@host:path)."
    )
    if path.exists():
        raise ConfigurationError(
            f"{key} {redact_text(repo)}: {path.absolute()} is not a git repository (no .git in it, and not a bare "
            "repository), "
            "so git has nothing to clone.",
            fix=fix,
        )
    raise ConfigurationError(
        f"{key} {redact_text(repo)} is a path on this machine, and nothing is there: {path.absolute()} does not exist.",
        fix=fix,
    )


def clone_url(repo: str, key: str, *, here: bool = True) -> str:
    """The repository as git is given it: an http(s) URL without its user and password; a path made absolute (the
    clone runs from any folder, and git stores a local origin as an absolute path) when it is this machine's."""
    url = remote_url(repo, key)
    local = local_repo_path(url) if here and "://" not in url else None
    return str(local.absolute()) if local is not None else url


def _same_repo(a: str, b: str) -> bool:
    def normal(url: str) -> str:
        local = local_repo_path(url)
        if local is not None:
            url = os.path.normcase(os.path.abspath(local))
        url = url.rstrip("/\\")
        return url[:-4] if url.endswith(".git") else url

    return normal(a) == normal(b)


# The git commands of getting the source, shared by acquire_source (which runs them) and planned_checkout (which
# lists them for a dry run). `progress` is ("--progress",) when git's output goes to a terminal through a pipe.
def clone_args(url: str, destination: PurePath, progress: tuple[str, ...] = ()) -> GitArgs:
    return ("clone", "--no-checkout", *progress, "--", url, str(destination))


def fetch_args(progress: tuple[str, ...] = ()) -> GitArgs:
    return ("fetch", "--tags", "--force", *progress, "--", "origin")


def fetch_ref_args(ref: str) -> GitArgs:
    """A commit no fetched branch or tag contains (a pull request's head), asked for by name."""
    return ("fetch", "--quiet", "--", "origin", ref)


def checkout_args(target: str) -> GitArgs:
    # checkout reads what follows `--` as paths, so the target (a SHA, a full ref name, a checked ref) comes first.
    return ("checkout", "--quiet", "--force", "--detach", target, "--")


def ref_candidates(ref: str | None) -> list[str]:
    """What a ref may name, in the order that decides: its branch, its tag, itself (a commit); None: the default."""
    return [f"refs/remotes/origin/{ref}", f"refs/tags/{ref}", ref] if ref else ["refs/remotes/origin/HEAD"]


SYNC_ARGS: GitArgs = ("submodule", "sync", "--recursive")


def update_args(progress: tuple[str, ...] = ()) -> GitArgs:
    return ("submodule", "update", "--init", "--recursive", *progress)


def set_url_args(url: str) -> GitArgs:
    return ("remote", "set-url", "--", "origin", url)


class _Git:
    """git in one folder, with its remote's credential environment; network steps stream git's output,
    queries capture it."""

    def __init__(self, folder: Path | None, *, key: str = "--repo", env: dict[str, str] | None = None) -> None:
        self.git = _git_executable(key)
        self.folder = folder  # None: git runs in the current folder (a clone, whose paths are absolute)
        self.where = ("-C", str(folder)) if folder is not None else ()
        self.env = {**os.environ, **env} if env else None
        if env:
            remember_secrets(env)  # the --repo credential reaches git only through GIT_CONFIG_VALUE_n, not os.environ
        # git shows progress only on a terminal, and its output now comes through a pipe: ask for it when ours is one.
        self.progress = ("--progress",) if sys.stderr.isatty() else ()

    def show(self, *args: str) -> None:
        """Run a step with git's output on stderr as it comes, less control sequences (a remote's messages
        are not trusted)."""
        command = [self.git, *self.where, *args]
        with child_processes.started(  # in the tool's tree: a stop signal ends the clone with the tool
            command,
            terminal=True,  # git and ssh may ask for a password on the terminal
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self.env,
        ) as process:
            stream = process.stdout
            assert isinstance(stream, io.BufferedIOBase)  # a buffered pipe (bufsize -1), so read1 is there
            decoder = getincrementaldecoder("utf-8")(errors="replace")
            masker = StreamRedactor()
            for chunk in iter(partial(stream.read1, 65536), b""):
                sys.stderr.write(masker.feed(printable(decoder.decode(chunk))))
                sys.stderr.flush()
            sys.stderr.write(masker.flush())
            status = process.wait()
        if status != 0:
            where = f" in {self.folder}" if self.folder is not None else ""
            raise SourceError(
                f"`git {' '.join(redact_text(a) for a in args)}`{where} failed with exit status {status} (git's "
                "message is above).",
                fix="check the URL, the network and your access to the repository, then run again.",
            )

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return child_processes.run(
            [self.git, *self.where, *args],
            terminal=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self.env,
        )

    def query(self, *args: str) -> str | None:
        completed = self.run(*args)
        return completed.stdout.strip() if completed.returncode == 0 else None


def _resolve(git: _Git, ref: str | None, key: str) -> str:
    """The commit a branch, tag or SHA names after a fetch (the remote's default branch for None)."""
    for candidate in ref_candidates(ref):
        commit = git.query("rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}")
        if commit:
            return commit
    said = ""
    if ref:
        # A commit no branch or tag of the fetched ones contains (a pull request's head): ask for it.
        fetched = git.run(*fetch_ref_args(ref))
        commit = (
            git.query("rev-parse", "--verify", "--quiet", "FETCH_HEAD^{commit}") if fetched.returncode == 0 else None
        )
        if commit:
            return commit
        lines = fetched.stderr.strip().splitlines()
        said = f" (git: {printable(redact_text(lines[-1]))})" if lines else ""
    raise ConfigurationError(
        f"{key} {ref} names no branch, tag or commit of the repository{said}.",
        fix="pass an existing branch (e.g. main), tag (e.g. v2.4.0) or full commit SHA.",
    )


def _check_existing(git: _Git, url: str, folder: Path) -> bool:
    """The clone is of `url` (a credential-free URL) and has no local changes; True when its .git/config holds a
    user and password an earlier version stored, which the build removes (set_url_args). Changes nothing."""
    stored = git.query("remote", "get-url", "--", "origin")
    origin = remote_url(stored) if stored is not None else None
    if origin is None or not _same_repo(origin, url):
        raise ConfigurationError(
            f"{folder} is a clone of {printable(redact_text(origin or 'an unknown remote'))}, not of "
            f"{redact_text(url)}.",
            fix="pass --source with another folder for this repository, or leave --repo out to build that clone "
            "as it is.",
        )
    changes = git.query("status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all")
    if changes:
        first = printable(changes.splitlines()[0].strip())
        raise ConfigurationError(
            f"the clone {folder} has local changes (e.g. {first}); checking out another ref would overwrite them.",
            fix="commit or stash them (git stash), or build that clone as it is with --source and without --repo.",
        )
    return stored != origin


def _check_empty(destination: Path, url: str) -> None:
    """A clone goes into a new or empty folder."""
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise ConfigurationError(
            f"{destination} exists, is not empty and is not a git clone, so it cannot receive a clone of "
            f"{redact_text(url)}.",
            fix="pass --source with an empty or new folder, or remove that one.",
        )


def look_at_destination(destination: Path, url: str, key: str = "--repo") -> tuple[bool, bool]:
    """(an existing clone there, which is fetched rather than cloned; its .git/config holds a user and password to
    remove) for a clone of `url` (credential-free) into `destination`, after the refusals: a clone of another
    remote or with local changes, a folder that is neither empty nor a clone. Changes nothing."""
    if (destination / ".git").exists():
        return True, _check_existing(_Git(destination, key=key), url, destination)
    _check_empty(destination, url)
    return False, False


def acquire_source(
    *, repo: str, ref: str | None, destination: Path, repo_key: str = "--repo", ref_key: str = "--ref"
) -> SourceCheckout:
    """Clone `repo` into `destination`, or fetch an existing clone there; check out `ref` with its submodules.

    repo_key and ref_key say where the values came from (the flags, or a nightly entry's keys) in errors. A dry run
    lists these git commands (builder/source_plan.py); the ref is resolved here with rev-parse, in the order of the
    checkout's tries there.
    """
    check_repo(repo, repo_key)
    if ref:
        check_ref(ref, ref_key)
    url, env = clone_url(repo, repo_key), _credential_env(repo, repo_key)
    destination = destination.absolute()
    started = time.monotonic()
    fetch, stored_credential = look_at_destination(destination, url, repo_key)
    check_local_repo(repo, repo_key)
    if fetch:
        git = _Git(destination, key=repo_key, env=env)
        if stored_credential:
            git.show(*set_url_args(url))
            print(
                f"Removed the user and password stored in {destination / '.git' / 'config'}: git now gets them from "
                "its environment only.",
                file=sys.stderr,
                flush=True,
            )
        git.show(*fetch_args(git.progress))
        origin = "fetched"
    else:
        here = _Git(None, key=repo_key, env=env)  # git clone makes the folders the destination needs
        here.show(*clone_args(url, destination, here.progress))
        git = _Git(destination, key=repo_key, env=env)
        origin = "cloned"
    commit = _resolve(git, ref, ref_key)
    git.show(*checkout_args(commit))  # a SHA from rev-parse
    git.show(*SYNC_ARGS)
    git.show(*update_args(git.progress))
    return SourceCheckout(destination, origin, url, ref, commit, time.monotonic() - started)


_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def remote_commit(
    repo: str, ref: str | None, where: Path, *, repo_key: str = "--repo", ref_key: str = "--ref"
) -> str | None:
    """The commit `ref` names on the remote now, from one `git ls-remote` (no clone, fetch or checkout):
    the default branch for None, a branch or tag (an annotated tag's commit), or a full SHA as given.

    A branch wins over a tag of the same name, as in the checkout (_resolve). `where` is a folder to run
    git in. None when ls-remote cannot say (a short SHA, an unknown ref, no network): the caller then
    fetches, which reports the real error."""
    return remote_commits(repo, [ref], where, repo_key=repo_key, ref_key=ref_key)[ref]


def _ref_patterns(ref: str | None) -> list[str]:
    """What ls-remote is asked for a ref, in the order that decides: branch, peeled tag, tag."""
    return [f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}"] if ref else ["HEAD"]


def remote_commits(
    repo: str, refs: Sequence[str | None], where: Path, *, repo_key: str = "--repo", ref_key: str = "--ref"
) -> dict[str | None, str | None]:
    """`remote_commit` for several refs of one repository with a single `git ls-remote` (a nightly
    builds one repository in many configurations)."""
    check_repo(repo, repo_key)
    answers: dict[str | None, str | None] = {}
    asked: list[str | None] = []
    for ref in dict.fromkeys(refs):
        if ref:
            check_ref(ref, ref_key)
        if ref and _FULL_SHA.fullmatch(ref):
            answers[ref] = ref
        else:
            asked.append(ref)
    if not asked:
        return answers
    patterns = list(dict.fromkeys(pattern for ref in asked for pattern in _ref_patterns(ref)))
    url, env = remote_url(repo, repo_key), _credential_env(repo, repo_key)
    listed = _Git(where, key=repo_key, env=env).run("ls-remote", "--", url, *patterns)
    found: dict[str, str] = {}
    if listed.returncode == 0:
        for line in listed.stdout.splitlines():
            commit, _, name = line.partition("\t")
            found[name] = commit
    for ref in asked:
        answers[ref] = next(
            (found[name] for name in _ref_patterns(ref) if _FULL_SHA.fullmatch(found.get(name, ""))), None
        )
    return answers


def checked_out_commit(folder: Path) -> str | None:
    """The commit a clone has checked out, read from .git/HEAD without starting git: our checkouts are
    detached (`checkout --detach`), so HEAD holds the SHA itself. None for anything else (no clone, a
    branch checked out, a linked worktree): the caller then takes the full way."""
    try:
        head = (folder / ".git" / "HEAD").read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return head if _FULL_SHA.fullmatch(head) else None


def existing_checkout(path: Path) -> SourceCheckout:
    """A checkout the user pointed at: used as it is, its commit recorded when it is a git clone."""
    commit = None
    if (path / ".git").exists() and shutil.which("git"):
        commit = _Git(path).query("rev-parse", "HEAD")
    return SourceCheckout(path, "existing checkout", None, None, commit, 0.0)


def _link_stub_target(stub: Path, source_dir: Path) -> Path | None:
    """The file a symbolic link that git checked out as text names: with core.symlinks=false (Git for
    Windows' default) the file holds the link's target and nothing else, no line end. Only a
    common_with_cwrap.py inside the (resolved) source tree counts."""
    try:
        if stub.is_symlink() or not stub.is_file() or stub.stat().st_size > _STUB_LIMIT:
            return None
        text = stub.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text or any(character in text for character in "\r\n\0"):
        return None
    named = (stub.parent / text).resolve()
    if named.name != CWRAP_SOURCE.name or not named.is_relative_to(source_dir) or not named.is_file():
        return None
    return named


def old_era_prep(source_dir: Path, era: Era) -> str | None:
    """The seeds' prep step (seed 002: `xcopy /Y aten\\src\\ATen\\common_with_cwrap.py tools\\shared\\cwrap_common.py`).

    Before v0.4.0 tools/shared/cwrap_common.py is a symbolic link (to torch/lib/ATen/... in 0.3.x,
    to aten/src/ATen/... in early-2018 trees), which a checkout without symlinks leaves as a text
    stub; v0.4.0's setup.py writes the file itself (PR #6396), and a missing one gets the same copy.
    A real file or a working link is left alone."""
    if not era.cwrap_prep:
        return None
    root = source_dir.resolve()
    target = source_dir / CWRAP_TARGET
    if target.is_symlink() or not target.parent.resolve().is_relative_to(root):
        return None  # a working link; or tools/shared leads out of the tree, where nothing is written
    if target.exists():
        named = _link_stub_target(target, root)
    else:
        named = (root / CWRAP_SOURCE) if (root / CWRAP_SOURCE).is_file() else None
    if named is None:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(named, target)
    return (
        f"Copied {named.relative_to(root).as_posix()} to {CWRAP_TARGET.as_posix()} (PyTorch {era.name} sources "
        "need it there, the seeds' prep step)."
    )
