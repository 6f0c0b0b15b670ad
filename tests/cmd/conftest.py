"""Windows' command interpreter for the `cmd` tier: Wine's cmd in a private prefix.

One prefix per test session (first boot takes seconds), with its wineserver kept alive for the
session and stopped at the end. Without Wine these fixtures fail, never skip: CI must install it
(see docs/architecture.md, "Tests").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytorch_winbuild.facts.cmd_line import decode_output, run_command_line, to_wine_path

WINE_DEFAULT_PATH = r"C:\windows\system32;C:\windows;C:\windows\system32\wbem"
BOOT_TIMEOUT_SECONDS = 300
_BOOT_SECONDS = pytest.StashKey[float]()


@dataclass(frozen=True)
class WinePrefix:
    """A booted Wine prefix and the environment that selects it."""

    path: Path
    env: dict[str, str]  # the Linux environment for `wine` (WINEPREFIX, WINEDEBUG, … , no DISPLAY)
    boot_seconds: float

    def windows_env(self, **extra: str) -> dict[str, str]:
        """An environment for programs inside the prefix: `env` with Wine's default Windows PATH."""
        return {**self.env, "PATH": WINE_DEFAULT_PATH, **extra}


def wine_cmd(arguments: str, env: Mapping[str, str], interpreter: str = "cmd") -> subprocess.CompletedProcess[bytes]:
    """`wine <interpreter> <arguments>`, the command line exactly as written (see facts/cmd_line.py run_command_line).

    One retry, only when Wine gave nothing at all: a nonzero exit with empty stdout and stderr means
    the interpreter never ran (seen once in CI on a loaded 2-core machine: exit 1, no output, for a
    script that passes on every other run). Every outcome of the script itself prints something
    (`set`'s listing, a refusal on stderr), so it is never retried.
    """
    completed = run_command_line(arguments, env=env, launcher=["wine", interpreter])
    if completed.returncode != 0 and not completed.stdout and not completed.stderr:
        completed = run_command_line(arguments, env=env, launcher=["wine", interpreter])
    return completed


@dataclass(frozen=True)
class CmdResult:
    stdout: str
    stderr: str
    exit_code: int


def _wine_env(prefix: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(
        WINEPREFIX=str(prefix),
        WINEDEBUG="-all",  # no debug channels, and no "wine32 is missing" hint on wine64-only installs
        WINEDLLOVERRIDES="mscoree,mshtml=",  # never offer to install Mono or Gecko
        LC_ALL="C.UTF-8",  # Wine reads the Linux environment in the locale's charset
    )
    return env


@pytest.fixture(scope="session")
def wine_prefix(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[WinePrefix]:
    """Boot a fresh prefix once per session; keep its wineserver up until the session ends."""
    for tool in ("wine", "wineboot", "wineserver"):
        if shutil.which(tool) is None:
            pytest.fail(
                f"{tool} is not installed: the cmd tier needs Wine (Debian: `apt-get install -y wine wine64`).",
                pytrace=False,
            )
    prefix = tmp_path_factory.mktemp("wineprefix")
    env = _wine_env(prefix)
    started = time.perf_counter()
    boot = subprocess.run(
        ["wineboot", "--init"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=BOOT_TIMEOUT_SECONDS,
        check=False,
    )
    subprocess.run(["wineserver", "-w"], env=env, timeout=BOOT_TIMEOUT_SECONDS, check=False)
    boot_seconds = time.perf_counter() - started
    if boot.returncode != 0 or not (prefix / "drive_c" / "windows" / "system32").is_dir():
        pytest.fail(
            f"wineboot could not create a prefix in {prefix} (exit {boot.returncode}): "
            f"{boot.stderr.decode(errors='replace')[-2000:]}",
            pytrace=False,
        )
    request.config.stash[_BOOT_SECONDS] = boot_seconds
    subprocess.run(["wineserver", "-p"], env=env, timeout=60, check=True)
    try:
        yield WinePrefix(path=prefix, env=env, boot_seconds=boot_seconds)
    finally:
        subprocess.run(["wineserver", "-k"], env=env, timeout=60, check=False)


@pytest.fixture(scope="session")
def run_cmd(wine_prefix: WinePrefix) -> Callable[..., CmdResult]:
    """`run_cmd(command, env=None)` runs `cmd /s /c "<command>"` in the session prefix.

    The command line reaches cmd exactly as written (see facts/cmd_line.py run_command_line). `env` is the
    Windows environment; by default the prefix's, with Wine's default PATH.
    """

    def run(command: str, env: Mapping[str, str] | None = None) -> CmdResult:
        completed = wine_cmd(f'/s /c "{command}"', env if env is not None else wine_prefix.windows_env())
        return CmdResult(
            stdout=decode_output(completed.stdout),
            stderr=decode_output(completed.stderr),
            exit_code=completed.returncode,
        )

    return run


@pytest.fixture(scope="session")
def wine_path() -> Callable[[str | os.PathLike[str]], str]:
    """Linux path → the `Z:\\...` path Wine programs see."""
    return to_wine_path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how long the prefix took to boot, so CI logs show it."""
    seconds = terminalreporter.config.stash.get(_BOOT_SECONDS, None)
    if seconds is not None:
        terminalreporter.write_line(f"Wine prefix first boot: {seconds:.1f} s")
