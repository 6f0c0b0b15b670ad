"""Secret masking the way CI systems do it: the exact values of secret variables and URL userinfo
never reach the console, the log, the JSON report or the nightly summary, whatever the build prints.

The streaming tests run real child processes through the real runner (builder/process.py) into a
real log file, and `invoke build-ext` end to end on a tiny setup.py that prints the secrets.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from support import run_invoke

from pytorch_winbuild.builder.process import run_streamed
from pytorch_winbuild.builder.progress import ProgressDisplay
from pytorch_winbuild.builder.settings import load_settings
from pytorch_winbuild.nightly.entry import EntryResult
from pytorch_winbuild.nightly.summary import NightlySummary, publish_to_github
from pytorch_winbuild.text import redact
from pytorch_winbuild.text.redact import (
    REDACTED,
    StreamRedactor,
    forget_secrets,
    is_secret_name,
    mask_values,
    redact_env,
    redact_text,
    remember_config,
    remember_secret,
    remember_secrets,
    secret_values,
)

# Realistic values, each one unique to this file.
TOKEN = "tok-7f3a9c2e1b5d4a60"  # MY_API_TOKEN
REDIS_PASSWORD = "p4ss/w0rd-9zq"  # a password with '/', in SCCACHE_REDIS's userinfo
REDIS_URL = f"redis://:{REDIS_PASSWORD}@cache.internal:6379/0"
MIRROR_TOKEN = "Gh7-mirror-tok-31"
MIRROR_URL = f"https://builder:{MIRROR_TOKEN}@mirror.example/deps/"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiWINBUILDKEY"
AZURE_KEY = "c2VjcmV0LWF6dXJlLWtleS0xMjM0NQ=="
AZURE = (
    f"DefaultEndpointsProtocol=https;AccountName=winbuildcache;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net"
)
WEBDAV_TOKEN = "dav+tok/with=signs&more"  # percent-encodes to something else
SHORT = "x9z"  # too short to mask: below redact.MIN_SECRET_LENGTH
LAYOUT = "de-nodeadkeys-layout"  # KEYBOARD_LAYOUT: KEY inside a word, not a secret
PREFIX = "winbuild-cache-prefix"  # SCCACHE_S3_KEY_PREFIX: the key prefix is not a secret

SECRET_ENV = {
    "MY_API_TOKEN": TOKEN,
    "SCCACHE_REDIS": REDIS_URL,
    "WINBUILD_MIRROR": MIRROR_URL,
    "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
    "SCCACHE_AZURE_CONNECTION_STRING": AZURE,
    "SCCACHE_WEBDAV_TOKEN": WEBDAV_TOKEN,
    "SHORT_TOKEN": SHORT,
    "KEYBOARD_LAYOUT": LAYOUT,
    "SCCACHE_S3_KEY_PREFIX": PREFIX,
}
# Every secret, and the forms it takes in text (percent-encoded in a URL, JSON-escaped).
SECRETS = [
    TOKEN,
    REDIS_PASSWORD,
    MIRROR_TOKEN,
    AWS_SECRET,
    AZURE_KEY,
    WEBDAV_TOKEN,
    quote(REDIS_PASSWORD, safe=""),
    quote(WEBDAV_TOKEN, safe=""),
]
# Fragments that must not survive either: half a secret is still a leak.
FRAGMENTS = ["7f3a9c2e1b5d4a60", "w0rd-9zq", "mirror-tok-31", "K7MDENG", "WINBUILDKEY", "tok/with=signs"]

# What the child build prints: each secret alone, inside URLs, split across writes, across the
# pipe's 64 KiB and the reader's 8 KiB buffers, on stderr, JSON-escaped and percent-encoded.
CHILD = r"""
import json, os, sys, time
from urllib.parse import quote
e = os.environ
print("token=" + e["MY_API_TOKEN"])
print("Authorization: Bearer " + e["MY_API_TOKEN"])
sys.stdout.write("split:" + e["MY_API_TOKEN"][:6]); sys.stdout.flush(); time.sleep(0.3)
sys.stdout.write(e["MY_API_TOKEN"][6:11]); sys.stdout.flush(); time.sleep(0.3)
sys.stdout.write(e["MY_API_TOKEN"][11:] + " end\n"); sys.stdout.flush()
print("-- cache " + e["SCCACHE_REDIS"])
print("redis password alone: " + e["SCCACHE_REDIS"].split("@")[0].split(":", 2)[2])
print("fetching " + e["WINBUILD_MIRROR"] + "mkl.7z")
print("mirror token alone: " + e["WINBUILD_MIRROR"].split("@")[0].split(":")[-1])
print("aws " + e["AWS_SECRET_ACCESS_KEY"])
print("azure " + e["SCCACHE_AZURE_CONNECTION_STRING"])
print("webdav " + e["SCCACHE_WEBDAV_TOKEN"] + " as url " + quote(e["SCCACHE_WEBDAV_TOKEN"], safe=""))
print("redis password in a url: " + quote(e["SCCACHE_REDIS"].split("@")[0].split(":", 2)[2], safe=""))
print(json.dumps({"token": e["MY_API_TOKEN"], "url": e["SCCACHE_REDIS"]}))
print("[3/10] Building CXX object demo.o")
print("x" * 8190 + e["MY_API_TOKEN"] + "y" * 100)
print("z" * 65530 + e["AWS_SECRET_ACCESS_KEY"] + "!")
print("short " + e["SHORT_TOKEN"] + " layout " + e["KEYBOARD_LAYOUT"] + " prefix " + e["SCCACHE_S3_KEY_PREFIX"])
sys.stderr.write("stderr token " + e["MY_API_TOKEN"] + "\n")
sys.stdout.write("no newline at the end " + e["MY_API_TOKEN"])
"""


@pytest.fixture(autouse=True)
def fresh_secrets():
    forget_secrets()
    yield
    forget_secrets()


def assert_clean(text: str, where: str) -> None:
    for secret in SECRETS + FRAGMENTS:
        assert secret not in text, f"{secret!r} reached {where}"


def assert_unmasked_kept(text: str, where: str) -> None:
    for kept in (f"short {SHORT}", LAYOUT, PREFIX):
        assert kept in text, f"{kept!r} was masked in {where}"


# ---------------------------------------------------------------------------------------------
# Real child processes through the real streaming code


def run_child(tmp_path: Path, env: dict[str, str]) -> tuple[str, str, int]:
    log_path = tmp_path / "build.log"
    console = io.StringIO()
    display = ProgressDisplay(load_settings().progress, console, interactive=False)
    with log_path.open("w", encoding="utf-8", newline="\n") as log:
        result = run_streamed(
            [sys.executable, "-c", CHILD], cwd=tmp_path, env=env, log=log, on_line=display.line, grace_seconds=5
        )
    display.close()
    return log_path.read_text(encoding="utf-8"), console.getvalue(), result.exit_code


def test_secrets_of_the_build_environment_never_reach_log_or_console(tmp_path: Path) -> None:
    """The secrets are only in the build's environment (as plan and runner variables are), not in ours."""
    assert not set(SECRET_ENV) & set(os.environ)
    log, console, exit_code = run_child(tmp_path, {**os.environ, **SECRET_ENV})
    assert exit_code == 0
    for text, where in ((log, "the log"), (console, "the console")):
        assert_clean(text, where)
        assert_unmasked_kept(text, where)
        assert f"token={REDACTED}" in text and f"split:{REDACTED} end" in text and f"stderr token {REDACTED}" in text
        assert "-- cache redis://:***@cache.internal:6379/0" in text, "the host stays readable"
        assert f"fetching https://builder:{REDACTED}@mirror.example/deps/mkl.7z" in text
        assert "AccountName=winbuildcache;AccountKey=***" in text or f"azure {REDACTED}" in text
        assert f"no newline at the end {REDACTED}" in text
    assert "x" * 8190 + REDACTED + "y" * 100 in log and "z" * 65530 + REDACTED + "!" in log
    assert "[3/10] Building CXX object demo.o" in log and "-- progress: 3/10 (30%)" in console, (
        "progress lines still drive the display"
    )


def test_secrets_of_this_process_environment_are_masked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    log, console, _ = run_child(tmp_path, dict(os.environ))
    assert_clean(log + console, "the log or the console")
    assert_unmasked_kept(log, "the log")


def test_build_ext_end_to_end_keeps_secrets_out_of_console_log_and_report(tmp_path: Path) -> None:
    """`invoke build-ext` on a setup.py that prints the secrets and then fails: console, triage, log, report."""
    extension = tmp_path / "leaky_ext"
    extension.mkdir()
    (extension / "setup.py").write_text(
        CHILD + "\n"
        "print()\n"
        'print("error: could not authenticate to " + e["SCCACHE_REDIS"] + " with " + e["MY_API_TOKEN"])\n'
        "sys.exit(1)\n",
        encoding="utf-8",
    )
    cache = tmp_path / "cache"
    done = run_invoke(
        "build-ext",
        str(extension),
        "--cuda",
        "cpu",
        "--compiler-cache",
        "none",
        "--cache-dir",
        str(cache),
        env={**SECRET_ENV, "CI": "true"},
    )
    assert done.returncode == 5, done.stdout[-3000:] + done.stderr
    console = done.stdout + done.stderr
    [report_path] = (cache / "logs").glob("build-ext-*.json")
    [log_path] = (cache / "logs").glob("build-ext-*.log")
    report_text = report_path.read_text(encoding="utf-8")
    report = json.loads(report_text)
    for text, where in (
        (console, "the console"),
        (log_path.read_text(encoding="utf-8"), "the log"),
        (report_text, "the JSON report"),
    ):
        assert_clean(text, where)
    assert "error: could not authenticate to redis://:***@cache.internal:6379/0 with ***" in console, (
        "the first error is shown, masked"
    )
    assert report["first_error"] is not None and "with ***" in json.dumps(report["first_error"])
    assert report["environment"]["MY_API_TOKEN"] == REDACTED
    assert report["environment"]["SCCACHE_REDIS"] == "redis://:***@cache.internal:6379/0"
    assert (
        report["environment"]["KEYBOARD_LAYOUT"] == LAYOUT and report["environment"]["SCCACHE_S3_KEY_PREFIX"] == PREFIX
    )
    assert report["environment"]["SHORT_TOKEN"] == REDACTED, (
        "a secret NAME is still shown as *** in the environment table"
    )
    assert_unmasked_kept(log_path.read_text(encoding="utf-8"), "the log")


def test_nightly_summary_json_markdown_and_step_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    entry = EntryResult("cpu-main", MIRROR_URL + "pytorch.git", "main", "cpu", result="failed", stage="build")
    entry.error = f"build failed: could not reach {REDIS_URL} with token {TOKEN} (password {REDIS_PASSWORD})."
    entry.first_error = {
        "summary": {"number": 7, "text": f"error: {TOKEN}"},
        "lines": [{"number": 7, "text": f"error: auth {AWS_SECRET}"}],
    }
    entry.notes.append(f"mirror {MIRROR_URL} token {MIRROR_TOKEN}")
    summary = NightlySummary(
        "2026-01-01T02:00:00", "2026-01-01", "builder", "nightly.toml", tmp_path / "run", "0200", False, [entry]
    )
    summary.write()
    step_summary, outputs = tmp_path / "step_summary.md", tmp_path / "outputs.txt"
    publish_to_github(summary, {"GITHUB_STEP_SUMMARY": str(step_summary), "GITHUB_OUTPUT": str(outputs)})
    for path in (summary.json_path, summary.markdown_path, step_summary, outputs):
        assert_clean(path.read_text(encoding="utf-8"), path.name)
    assert "could not reach redis://:***@cache.internal:6379/0 with token ***" in summary.markdown_path.read_text(
        encoding="utf-8"
    )


# ---------------------------------------------------------------------------------------------
# redact: names, exact values, URL userinfo of every shape, streams


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "MY_API_TOKEN",
        "NPM_AUTHTOKEN",
        "SCCACHE_REDIS_PASSWORD",
        "SCCACHE_MEMCACHED_PASSWORD",
        "SCCACHE_WEBDAV_PASSWORD",
        "SCCACHE_WEBDAV_TOKEN",
        "SCCACHE_GHA_RUNTIME_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "SCCACHE_AZURE_CONNECTION_STRING",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ACCESS_KEY_ID",
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
        "TENCENTCLOUD_SECRET_KEY",
        "MY_API_KEY",
        "APIKEY",
        "DB_PASSWD",
        "GPG_PASSPHRASE",
        "GOOGLE_CREDENTIALS",
        "client_secret",
        "BASIC_AUTH",
        "AZURE_DEVOPS_PAT",
        "ENCRYPTION_KEYS",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "KEYBOARD_LAYOUT",
        "MONKEY_PATCH",
        "GIT_AUTHOR_NAME",
        "TOKENIZERS_PARALLELISM",
        "SSH_AUTH_SOCK",
        "SCCACHE_S3_KEY_PREFIX",
        "SCCACHE_REDIS_KEY_PREFIX",
        "SCCACHE_GCS_KEY_PATH",
        "GIT_CONFIG_KEY_0",
        "SCCACHE_REDIS",
        "SCCACHE_REDIS_USERNAME",
        "CLCACHE_MEMCACHED",
        "PASSWORD_FILE",
        "PATH",
        "PWD",
        "CUDA_PATH",
        "SECRETARY",
    ],
)
def test_names_that_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis://:p4ss/w0rd@host:6379", "redis://:***@host:6379"),
        ("redis://:hunter2@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("https://user:tok@host/x", "https://user:***@host/x"),
        ("rediss://default:a/b/c==@redis.example:6380/0", "rediss://default:***@redis.example:6380/0"),
        (
            "https://user:p@ss@host/x",
            "https://user:***@host/x",
        ),  # an unescaped '@' in the password: the last '@' ends it
        ("https://u:p@host/path/x@y", "https://u:***@host/path/x@y"),
        ("postgres://app:p%2Fw%40rd@db/main", "postgres://app:***@db/main"),
        (
            "git clone https://0123456789abcdef0123456789abcdef01234567@dev.azure.com/org/repo",
            "git clone https://***@dev.azure.com/org/repo",
        ),
        ('{"url": "redis://:p4ss/w0rd@host"}', '{"url": "redis://:***@host"}'),
        ("memcached tcp://cache:pw-secret@10.0.0.5:11211 ok", "memcached tcp://cache:***@10.0.0.5:11211 ok"),
        # not userinfo: left alone
        ("ssh://git@github.com/pytorch/pytorch", "ssh://git@github.com/pytorch/pytorch"),
        ("git@github.com:pytorch/pytorch.git", "git@github.com:pytorch/pytorch.git"),
        ("git+https://github.com/x/y.git@v1.0", "git+https://github.com/x/y.git@v1.0"),
        ("https://mirror.example.com:8443/a/b@c", "https://mirror.example.com:8443/a/b@c"),
        ("https://registry.npmjs.org/@scope/pkg", "https://registry.npmjs.org/@scope/pkg"),
        ("mail builder@example.com", "mail builder@example.com"),
        # the pattern cases that were there before
        (
            "https://x.example/file.7z?sig=abc123&X-Amz-Signature=def",
            "https://x.example/file.7z?sig=***&X-Amz-Signature=***",
        ),
        ("Authorization: Bearer abcdefghijklmnop", "Authorization: Bearer ***"),
        ("AUTHORIZATION: basic dXNlcjpwYXNzd29yZA==", "AUTHORIZATION: basic ***"),
        ("token ghp_" + "a1" * 18 + " used", f"token {REDACTED} used"),
        ("key AKIAIOSFODNN7EXAMPLE here", f"key {REDACTED} here"),
        (
            "AccountName=a;AccountKey=abc/def==;EndpointSuffix=core.windows.net",
            "AccountName=a;AccountKey=***;EndpointSuffix=core.windows.net",
        ),
    ],
)
def test_url_userinfo_of_every_shape_and_patterns(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_exact_values_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_TOKEN", TOKEN)
    monkeypatch.setenv("SCCACHE_REDIS", REDIS_URL)
    monkeypatch.setenv(
        "WINBUILD_SIGNING_KEY",
        "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\nAQEFAASCBKcwggSjAgEAAoIB\n-----END KEY-----",
    )
    assert redact_text(f"echo {TOKEN}; curl -u x:{TOKEN}") == "echo ***; curl -u x:***"
    assert (
        redact_text(f"password is {REDIS_PASSWORD}, encoded {quote(REDIS_PASSWORD, safe='')}")
        == "password is ***, encoded ***"
    )
    assert redact_text(json.dumps({"a": 'say "' + TOKEN + '"'})) == '{"a": "say \\"***\\""}'
    assert redact_text("line 2 of the key: AQEFAASCBKcwggSjAgEAAoIB") == "line 2 of the key: ***", (
        "a multi-line secret is masked line by line"
    )
    monkeypatch.setenv("MY_API_TOKEN", "rotated-token-value")
    assert redact_text("rotated-token-value") == REDACTED, "a changed environment is read again"


def test_short_and_boolean_values_are_not_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHORT_TOKEN", SHORT)
    monkeypatch.setenv("USE_AUTH", "true")
    monkeypatch.setenv("EMPTY_PASSWORD", "")
    monkeypatch.setenv("BUILD_KEY", "1")
    assert redact_text(f"[1/100] {SHORT} true on 1") == f"[1/100] {SHORT} true on 1"
    before = redact.known_secret_count()
    remember_secret(SHORT)
    remember_secrets({"OTHER_TOKEN": "abc", "AUTH_MODE": "none"})
    assert redact_text(f"{SHORT} abc none") == f"{SHORT} abc none"
    assert redact.known_secret_count() == before


def test_values_of_names_that_are_not_secret_are_not_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEYBOARD_LAYOUT", LAYOUT)
    monkeypatch.setenv("SCCACHE_S3_KEY_PREFIX", PREFIX)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Builder Bot")
    text = f"layout {LAYOUT}, prefix {PREFIX}, by Builder Bot"
    assert redact_text(text) == text
    assert redact_env({"SCCACHE_S3_KEY_PREFIX": PREFIX, "MY_API_TOKEN": TOKEN}) == {
        "SCCACHE_S3_KEY_PREFIX": PREFIX,
        "MY_API_TOKEN": REDACTED,
    }


def test_what_an_environment_holds() -> None:
    found = secret_values(
        {
            **SECRET_ENV,
            "GIT_CONFIG_KEY_0": "http.https://github.com/.extraHeader",
            "GIT_CONFIG_VALUE_0": "Authorization: Basic eC1hY2Nlc3M6dG9rZW4=",
            "GIT_CONFIG_KEY_1": "protocol.file.allow",
            "GIT_CONFIG_VALUE_1": "always",
        }
    )
    assert {
        TOKEN,
        REDIS_PASSWORD,
        MIRROR_TOKEN,
        AWS_SECRET,
        AZURE,
        WEBDAV_TOKEN,
        "Authorization: Basic eC1hY2Nlc3M6dG9rZW4=",
    } <= found
    assert not {LAYOUT, PREFIX, REDIS_URL, "builder", "always", "protocol.file.allow"} & found


def test_remembered_values_environment_and_configuration() -> None:
    assert redact_text(f"x {TOKEN}") == f"x {TOKEN}"
    remember_secrets({"MY_API_TOKEN": TOKEN, "KEYBOARD_LAYOUT": LAYOUT})
    assert redact_text(f"x {TOKEN} {LAYOUT}") == f"x *** {LAYOUT}"
    remember_config(
        {
            "winbuild": {
                "mirror": MIRROR_URL,
                "repos": [f"https://ci:{WEBDAV_TOKEN}@git.example/x"],
                "upload": {"password": "conf-pass-123"},
            }
        }
    )
    assert redact_text(f"{MIRROR_TOKEN} {WEBDAV_TOKEN} conf-pass-123") == "*** *** ***"
    from invoke import Config

    remember_config(
        Config(
            overrides={"winbuild": {"mirror": "https://u:invoke-conf-pw@m.example/", "api_token": "invoke-conf-token"}}
        ).winbuild
    )
    assert redact_text("invoke-conf-pw invoke-conf-token") == "*** ***"
    remember_secret("add-mask-value")
    assert redact_text("echo add-mask-value") == "echo ***"
    forget_secrets()
    assert redact_text("echo add-mask-value") == "echo add-mask-value"


def test_overlapping_values_become_one_mask() -> None:
    assert mask_values("abcdefgh", ["abcdef", "defgh"]) == REDACTED
    assert mask_values("aaaaa and aaaa", ["aaaa"]) == "*** and ***"
    assert mask_values("nothing here", ["secret"]) == "nothing here"


def test_longest_value_wins() -> None:
    remember_secret("secret-value")
    remember_secret("secret-value-longer")
    assert redact_text("secret-value-longer!") == "***!"


def test_stream_redactor_masks_secrets_split_across_chunks() -> None:
    remember_secret(TOKEN)
    text = f"start\nthe token {TOKEN} and {REDIS_URL}\rprogress 50%\rdone {TOKEN}"
    for size in (1, 2, 3, 7, 64):
        masker = StreamRedactor()
        out = "".join(masker.feed(text[i : i + size]) for i in range(0, len(text), size)) + masker.flush()
        assert out == "start\nthe token *** and redis://:***@cache.internal:6379/0\rprogress 50%\rdone ***", size
    masker = StreamRedactor(hold_limit=1000)
    long_line = "x" * 5000 + TOKEN + "y" * 5000
    out = "".join(masker.feed(long_line[i : i + 999]) for i in range(0, len(long_line), 999)) + masker.flush()
    assert out == "x" * 5000 + REDACTED + "y" * 5000, (
        "a line longer than the hold limit still masks a secret on a chunk boundary"
    )


def test_redaction_is_fast_enough_for_every_build_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PyTorch build prints hundreds of thousands of lines; each is masked."""
    import time

    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    line = (
        "[1234/5678] /usr/bin/c++ -DUSE_CUDA -I/src/aten/src -O2 -std=c++17 -c /src/aten/src/ATen/native/Foo.cpp -o "
        "Foo.o"
    )
    redact_text(line)
    started = time.perf_counter()
    for _ in range(10000):
        assert redact_text(line) == line
    assert (time.perf_counter() - started) / 10000 < 200e-6, "under 0.2 ms a line"
    started = time.perf_counter()
    redact_text("-DA-B" * 10000 + " @response.rsp a.b." * 1000 + "user@host")
    assert time.perf_counter() - started < 0.5, "a long line costs linear time"
    assert redact.known_secret_count() > 0
