"""Run a cmd command line exactly as written, on Windows or through Wine, and read what it printed.

vcvars capture and the cmd tier of the tests (which runs the generated .bat files) need cmd to get
a command line whose quoting matters to the byte, and Python's own argument quoting would break
it: cmd does not split its command line the way C programs do. So starting cmd lives here, apart
from what vcvars does with the output: on Windows the string goes to CreateProcess untouched;
elsewhere it goes through Wine with a trampoline that keeps every quote, and paths are mapped
between Linux and Wine's drives.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PureWindowsPath
from typing import NotRequired, TypedDict

from pytorch_winbuild.errors import ConfigurationError, ToolchainError

TIMEOUT_SECONDS = 300

# Off Windows, Wine rebuilds the Windows command line from argv and escapes every quote as \",
# which cmd does not understand. So an outer cmd receives only quote-free words, and takes the
# real command line and the Windows PATH from these variables with delayed expansion: text
# expanded from !VAR! is never parsed again, so it reaches the inner cmd exactly as written.
_CARRIER_PATH = "__PYTORCH_WINBUILD_PATH"
_CARRIER_COMMAND = "__PYTORCH_WINBUILD_COMMAND"
_TRAMPOLINE = ["/d", "/v:on", "/c", "set", f"PATH=!{_CARRIER_PATH}!&!ComSpec!", f"!{_CARRIER_COMMAND}!"]


# ---------------------------------------------------------------------------------------------
# Output decoding


def code_page() -> str:
    """What cmd writes without /u: the console (OEM) code page on Windows; under Wine in a C or
    English locale, code page 1252."""
    return "oem" if os.name == "nt" else "cp1252"


def decode_output(data: bytes) -> str:
    """Decode cmd output: UTF-16 (cmd /u) when it holds NUL bytes, else the console code page."""
    if b"\x00" in data:
        return data.decode("utf-16-le", errors="replace")
    return data.decode(code_page(), errors="replace")


# ---------------------------------------------------------------------------------------------
# Wine


def to_wine_path(path: str | os.PathLike[str]) -> str:
    """/tmp/a b → Z:\\tmp\\a b: Wine maps drive Z: to the Linux root."""
    text = os.fspath(path)
    if not text.startswith("/"):
        raise ValueError(f"{text!r} is not an absolute Linux path")
    return "Z:" + text.replace("/", "\\")


def wine_prefix(env: Mapping[str, str]) -> Path:
    """The Wine prefix a process started with `env` uses."""
    prefix = env.get("WINEPREFIX")
    if prefix:
        return Path(prefix)
    return Path(env.get("HOME") or Path.home()) / ".wine"


def from_wine_path(path: str, prefix: Path) -> Path | None:
    """C:\\x or Z:\\tmp\\x → the Linux path behind it, or None when nothing is there.

    Goes through the prefix's dosdevices links, so every drive maps as Wine maps it, and matches
    each name case-insensitively, as Wine does (vcvars writes HostX64 for the folder Hostx64).
    """
    windows = PureWindowsPath(path)
    if len(windows.drive) != 2 or not windows.root:
        return None
    try:
        current = (prefix / "dosdevices" / windows.drive.lower()).resolve(strict=True)
    except OSError:
        return None
    for part in windows.parts[1:]:
        candidate = current / part
        if not candidate.exists():
            try:
                match = next((child for child in current.iterdir() if child.name.casefold() == part.casefold()), None)
            except OSError:
                return None
            if match is None:
                return None
            candidate = match
        current = candidate
    return current if current.exists() else None


def local_path(windows_path: str, prefix: Path | None) -> Path | None:
    """Where a Windows path lives for this process: itself on Windows, through Wine elsewhere."""
    if prefix is None:
        return Path(windows_path)
    return from_wine_path(windows_path, prefix)


# ---------------------------------------------------------------------------------------------
# Running cmd


def default_launcher() -> list[str]:
    """cmd.exe itself on Windows (from %ComSpec%); Wine's cmd elsewhere."""
    if os.name == "nt":
        comspec = os.environ.get("COMSPEC") or os.path.join(  # Windows' environment ignores case
            os.environ.get("SYSTEMROOT", r"C:\Windows"), "System32", "cmd.exe"
        )
        return [comspec]
    return ["wine", "cmd"]


class _Invocation(TypedDict):
    """subprocess.run's keyword arguments that start cmd (see `_invocation`)."""

    args: str | list[str]  # the whole command line on Windows, the launcher's argv elsewhere
    executable: NotRequired[str]  # Windows: cmd.exe, which CreateProcess starts with `args` untouched
    env: dict[str, str]


def _invocation(
    interpreter_arguments: str, launcher: Sequence[str], env: Mapping[str, str], *, windows: bool
) -> _Invocation:
    """The subprocess.run keyword arguments that give cmd exactly `cmd <interpreter_arguments>`.

    On Windows the string goes to CreateProcess untouched, with cmd.exe as the program to start.
    Elsewhere the launcher (Wine) gets the quote-free trampoline; see `_TRAMPOLINE`.
    """
    if windows:
        if len(launcher) != 1:
            raise ConfigurationError(
                f"on Windows the launcher must be the command interpreter alone, got {list(launcher)!r}.",
                fix="pass launcher=None (uses %ComSpec%) or the path of cmd.exe.",
            )
        return {"args": "cmd " + interpreter_arguments, "executable": launcher[0], "env": dict(env)}
    process_env = {name: value for name, value in env.items() if name.upper() != "PATH"}
    process_env["PATH"] = os.environ.get("PATH", os.defpath)  # the launcher is a Linux program; Wine ignores this PATH
    # the first spelling wins, as in Windows' own lookup (PATH, Path and path are one variable)
    process_env[_CARRIER_PATH] = next((value for name, value in env.items() if name.upper() == "PATH"), "")
    process_env[_CARRIER_COMMAND] = interpreter_arguments
    return {"args": [*launcher, *_TRAMPOLINE], "env": process_env}


def run_command_line(
    interpreter_arguments: str, *, env: Mapping[str, str], launcher: Sequence[str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run `cmd <interpreter_arguments>` with that exact command line; raw stdout and stderr.

    Other parts (and tests) use this to run generated .bat files the same way, on Windows or
    through Wine.
    """
    launcher = list(launcher) if launcher else default_launcher()
    resolved = shutil.which(launcher[0]) or launcher[0]
    kwargs = _invocation(interpreter_arguments, [resolved, *launcher[1:]], env, windows=os.name == "nt")
    # Output goes to files, not pipes: a process the script (or Wine) leaves running inherits the
    # handles, and reading a pipe to its end would wait for that process as well.
    try:
        with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
            completed = subprocess.run(
                **kwargs, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, timeout=TIMEOUT_SECONDS, check=False
            )
            stdout.seek(0)
            stderr.seek(0)
            return subprocess.CompletedProcess(completed.args, completed.returncode, stdout.read(), stderr.read())
    except FileNotFoundError:
        fix = (
            "check %ComSpec%, which should name cmd.exe."
            if os.name == "nt"
            else "install Wine (`apt-get install wine64`), or pass the launcher to use."
        )
        raise ToolchainError(
            f"the command interpreter could not be started: {launcher[0]} was not found.", fix=fix
        ) from None
    except subprocess.TimeoutExpired:
        raise ToolchainError(
            f"`cmd {interpreter_arguments}` did not finish within {TIMEOUT_SECONDS} s.",
            fix="run the same command in a Command Prompt to see where it waits (a prompt for input, a hung "
            "installer check).",
        ) from None


def without_carriers(env: dict[str, str]) -> dict[str, str]:
    """Drop the variables the Wine trampoline added; they are not part of anyone's environment."""
    carriers = {_CARRIER_PATH.upper(), _CARRIER_COMMAND.upper()}
    return {name: value for name, value in env.items() if name.upper() not in carriers}
