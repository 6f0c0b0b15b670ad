"""Hostile --repo/--ref values and remotes, against real git and real local repositories.

A ref or repository git could read as an option is refused (exit 2) before git runs, so
`--upload-pack=<command>` never runs; names git accepts are checked out; a user and password
in an http(s) URL reach git only through its environment, never its command line or .git/config
(checked against a local HTTP server that demands them); git's output reaches the console
without terminal control sequences.
"""

from __future__ import annotations

import base64
import functools
import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from support import run_invoke

from pytorch_winbuild.builder.source import acquire_source, printable
from pytorch_winbuild.errors import ConfigurationError, DependencyError

IDENTITY = ["-c", "user.name=hostile test", "-c", "user.email=hostile@example.invalid"]
SECRET = "s3cret-Pa55word"
TOKEN = "tok3n0nlyAsUser"


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *IDENTITY, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path) -> dict[str, str]:
    """A bare repository: main (two commits, tag v1.0 on the first), release/2.6, and a pull request head
    no branch holds."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "file.txt").write_text("one\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "one")
    git(work, "tag", "v1.0")
    v1 = git(work, "rev-parse", "HEAD")
    git(work, "branch", "release/2.6")
    (work / "file.txt").write_text("two\n")
    git(work, "commit", "-q", "-am", "two")
    main = git(work, "rev-parse", "HEAD")
    git(work, "checkout", "-q", "-b", "pr")
    (work / "file.txt").write_text("pull request\n")
    git(work, "commit", "-q", "-am", "pull request")
    pull = git(work, "rev-parse", "HEAD")
    git(work, "checkout", "-q", "main")
    bare = tmp_path / "up.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    git(bare, "update-ref", "refs/pull/1/head", pull)
    git(bare, "branch", "-D", "pr")
    git(bare, "update-server-info")  # for the dumb HTTP server
    return {"path": str(bare), "v1": v1, "main": main, "pull": pull}


def test_printable_drops_terminal_control_sequences() -> None:
    hostile = (
        "a\x1b[31mred\x1b[0m \x1b]0;title\x07\x1bPdcs\x1b\\ \x1bc\x9b2J\x00\x08 progress 50%\rprogress 100%\n\tend"
    )
    assert printable(hostile) == "ared  2J progress 50%\rprogress 100%\n\tend"


@pytest.mark.parametrize("existing", [False, True], ids=["fresh", "existing-clone"])
def test_cli_refuses_an_option_as_ref_and_never_runs_it(
    upstream: dict[str, str], tmp_path: Path, existing: bool
) -> None:
    cache = tmp_path / "cache"
    if existing:
        acquire_source(repo=upstream["path"], ref="v1.0", destination=cache / "src" / "up")
    marker = tmp_path / "x"
    done = run_invoke(
        "build",
        "--repo",
        upstream["path"],
        "--ref",
        f"--upload-pack=touch {marker};",
        "--cache-dir",
        str(cache),
        "--cuda",
        "cpu",
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        f"configuration error: --ref: '--upload-pack=touch {marker};' starts with '-', so git would read it as an "
        "option"
    )
    assert (
        "Fix: pass a branch (e.g. main or release/2.6), a tag (e.g. v2.6.0) or a full 40-character commit SHA."
        in done.stderr
    )
    assert not marker.exists()
    assert (cache / "src").exists() == existing  # refused before anything was cloned


def test_cli_refuses_an_option_as_repo(tmp_path: Path) -> None:
    marker = tmp_path / "x"
    done = run_invoke(
        "build", "--repo", f"--upload-pack=touch {marker};", "--cache-dir", str(tmp_path / "cache"), "--cuda", "cpu"
    )
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.startswith("configuration error: --repo: '--upload-pack=touch ")
        and "so git would read it as an option, not a repository" in done.stderr
    )
    assert not marker.exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "ref",
    [
        "-x",
        "--upload-pack=touch x;",
        "a..b",
        "ref with space",
        "v1.0\x1b[2J",
        "v1.0\x07",
        "tab\there",
        "a~1",
        "HEAD^",
        "x:y",
        "a@{1}",
        "x.lock",
        "/x",
        "x/",
    ],
)
def test_refs_git_would_misread_are_refused_before_git_runs(upstream: dict[str, str], tmp_path: Path, ref: str) -> None:
    destination = tmp_path / "clone"
    with pytest.raises(ConfigurationError) as raised:
        acquire_source(repo=upstream["path"], ref=ref, destination=destination)
    assert raised.value.exit_code == 2
    assert raised.value.message.startswith(f"--ref: {ref!r} ")
    assert "\x1b" not in raised.value.paragraph() and "\x07" not in raised.value.paragraph()
    assert not destination.exists()


@pytest.mark.parametrize(
    "repo", ["-u", "--config=core.sshCommand=touch x", "/srv/git/x\n[core]", "ssh://git:hunter2@host/pytorch.git"]
)
def test_repositories_git_would_misread_or_store_badly_are_refused(tmp_path: Path, repo: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        acquire_source(repo=repo, ref=None, destination=tmp_path / "clone")
    assert raised.value.exit_code == 2 and raised.value.message.startswith("--repo: ")
    assert "hunter2" not in raised.value.paragraph()
    assert not (tmp_path / "clone").exists()


@pytest.mark.parametrize(
    ("ref", "expected"), [("v1.0", "v1"), ("main", "main"), ("release/2.6", "v1"), ("sha", "v1"), ("pull", "pull")]
)
def test_refs_git_accepts_are_checked_out(upstream: dict[str, str], tmp_path: Path, ref: str, expected: str) -> None:
    # "sha": a full SHA of the fetched history; "pull": a pull request's head, which only
    # `git fetch -- origin <sha>` gets.
    name = {"sha": upstream["v1"], "pull": upstream["pull"]}.get(ref, ref)
    destination = tmp_path / "clone"
    checkout = acquire_source(repo=upstream["path"], ref=name, destination=destination)
    assert checkout.commit == upstream[expected] == git(destination, "rev-parse", "HEAD")


def test_git_output_reaches_the_console_without_control_sequences(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A repository's .gitmodules is the remote's text: git prints its URL as it is ("Submodule 'lib'
    (URL) registered")."""
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    git(library, "commit", "-q", "--allow-empty", "-m", "library")
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    git(work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    git(work, "config", "-f", ".gitmodules", "submodule.lib.url", f"{library}\x1b]0;owned\x07\x1b[2J")
    git(work, "commit", "-q", "-am", "a hostile submodule URL")
    capfd.readouterr()
    with pytest.raises(DependencyError):  # that URL names no repository
        acquire_source(repo=str(work), ref="main", destination=tmp_path / "clone")
    err = capfd.readouterr().err
    assert f"Submodule 'lib' ({library}) registered for path 'lib'" in err
    assert "\x1b" not in err and "\x07" not in err


# Credentials: a dumb HTTP git server (the bare repository's files) that demands Basic authentication.


class _AuthServer(http.server.SimpleHTTPRequestHandler):
    accepted: frozenset[str] = frozenset()

    def do_GET(self) -> None:
        if self.headers.get("Authorization") not in self.accepted:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def http_remote(upstream: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """http://127.0.0.1:PORT/up.git serving `upstream` to alice, bob and a token-as-user only; git never prompts."""
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    for name in ("GIT_ASKPASS", "SSH_ASKPASS", "GIT_CONFIG_COUNT"):
        monkeypatch.delenv(name, raising=False)
    handler = type(
        "Handler",
        (_AuthServer,),
        {"accepted": frozenset({_basic("alice", SECRET), _basic("bob", "p@ss/w:rd" + SECRET), _basic(TOKEN, "")})},
    )
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(Path(upstream["path"]).parent))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _files_holding(folder: Path, *secrets: str) -> list[str]:
    """Every file under `folder` that holds one of `secrets`."""
    return [
        str(path)
        for path in folder.rglob("*")
        if path.is_file() and any(secret.encode() in path.read_bytes() for secret in secrets)
    ]


@pytest.fixture
def git_argv_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that records its command line (what `ps` shows every user), then runs the real git.

    Not a double: a spy; every command still runs the real git against the real HTTP server.
    """
    real = shutil.which("git")
    assert real is not None
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "argv.log"
    wrapper = folder / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.mark.parametrize(
    ("userinfo", "secret", "header"),
    [
        (f"alice:{SECRET}", SECRET, _basic("alice", SECRET)),
        (f"bob:{quote('p@ss/w:rd' + SECRET, safe='')}", SECRET, _basic("bob", "p@ss/w:rd" + SECRET)),
        (TOKEN, TOKEN, _basic(TOKEN, "")),
    ],
    ids=["user-password", "percent-encoded", "token-as-user"],
)
def test_credentials_reach_git_only_through_its_environment(
    http_remote: str,
    git_argv_log: Path,
    upstream: dict[str, str],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    userinfo: str,
    secret: str,
    header: str,
) -> None:
    clean = f"http://{http_remote}/up.git"
    destination = tmp_path / "clone"
    token = header.removeprefix("Basic ")
    cloned = acquire_source(repo=f"http://{userinfo}@{http_remote}/up.git", ref="v1.0", destination=destination)
    fetched = acquire_source(
        repo=f"http://{userinfo}@{http_remote}/up.git", ref="main", destination=destination
    )  # the existing clone: fetch
    assert (cloned.origin, cloned.commit, fetched.origin, fetched.commit) == (
        "cloned",
        upstream["v1"],
        "fetched",
        upstream["main"],
    )
    assert cloned.repo == clean and cloned.to_dict()["repo"] == clean
    assert git(destination, "remote", "get-url", "origin") == clean
    assert _files_holding(destination / ".git", secret, token) == []
    argv = git_argv_log.read_text()
    assert "clone --no-checkout" in argv and secret not in argv and token not in argv
    output = capfd.readouterr()
    assert secret not in output.out + output.err
    with pytest.raises(DependencyError):  # the server does demand them: without, the clone fails
        acquire_source(repo=clean, ref="v1.0", destination=tmp_path / "anonymous")


def test_a_credential_an_earlier_clone_stored_is_removed(
    http_remote: str, upstream: dict[str, str], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    credentialed = f"http://alice:{SECRET}@{http_remote}/up.git"
    destination = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", credentialed, str(destination)], check=True
    )  # as versions before this one left it
    assert SECRET in (destination / ".git" / "config").read_text()
    checkout = acquire_source(repo=credentialed, ref="v1.0", destination=destination)
    assert checkout.commit == upstream["v1"]
    assert SECRET not in (destination / ".git" / "config").read_text()
    assert git(destination, "remote", "get-url", "origin") == f"http://{http_remote}/up.git"
    assert f"Removed the user and password stored in {destination / '.git' / 'config'}" in capfd.readouterr().err
