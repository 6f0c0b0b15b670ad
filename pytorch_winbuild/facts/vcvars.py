"""Enter the Visual Studio environment: run a vcvars script in cmd and keep what it set.

A vcvars script changes only its own cmd's environment, so `set` is read back in the same cmd, before and after:
`cmd /d /u /v:off /s /c "set && echo MARK && "<script>" <args> && echo MARK && set"`, one string (cmd does not split
its command line as C programs do). `[ERROR:...]` lines, or no cl.exe on the new PATH, fail even with exit 0.
Why each piece of that line: docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import TypedDict

from pytorch_winbuild import atomic_file
from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.cmd_line import (
    code_page,
    decode_output,
    default_launcher,
    local_path,
    run_command_line,
    wine_prefix,
    without_carriers,
)
from pytorch_winbuild.json_file import JsonValue, read_json
from pytorch_winbuild.text.quoting import refuse_control_characters
from pytorch_winbuild.text.redact import redact_text

log = logging.getLogger(__name__)

MARKER = "PYTORCH_WINBUILD_VCVARS_MARKER"
CACHE_FORMAT = 1
DEFAULT_PATHEXT = ".COM;.EXE;.BAT;.CMD"

_BARE_ARGUMENT = re.compile(r"[A-Za-z0-9_.:=+/\\-]+")
_ERROR_LINE_BYTES = re.compile(rb"\[ERROR:[^\r\n]*")
_ERROR_LINE_UTF16 = re.compile(rb"\[\x00E\x00R\x00R\x00O\x00R\x00:\x00(?:(?!\r\x00|\n\x00)..)*", re.DOTALL)
_MISSING_TOOLSET = re.compile(r"Toolset directory for version '([^']*)'")


@dataclass(frozen=True)
class VcvarsResult:
    """The environment a vcvars script leaves, ready to hand to the build's processes."""

    env: dict[str, str]  # the starting environment with the script's changes applied
    changes: dict[str, str]  # variables the script added or changed, with their new values
    removed: tuple[str, ...]  # variables the script deleted
    prepended: dict[str, list[str]]  # list variables (PATH, INCLUDE, LIB…): entries put before the old value
    appended: dict[str, list[str]]  # … and entries put after it
    cl: str  # the cl.exe that `cl` runs in that environment (its Windows path)
    output: str  # what the script printed (banner, warnings), credentials redacted
    command_line: str
    from_cache: bool
    seconds: float  # time this call took


# ---------------------------------------------------------------------------------------------
# Command line


def _quote_for_cmd(text: str, what: str) -> str:
    """Quote one word for a cmd command line, or refuse text that cmd cannot carry unchanged."""
    refuse_control_characters(text, f"the vcvars {what}")
    for bad, reason in (('"', "a double quote"), ("%", "a percent sign (cmd expands %NAME% even inside quotes)")):
        if bad in text:
            raise ConfigurationError(
                f"the vcvars {what} {text!r} contains {reason}, which cannot be passed to cmd unchanged.",
                fix=f"use a {what} without it (for a path, install to or copy into a folder whose name has none).",
            )
    if what == "argument" and _BARE_ARGUMENT.fullmatch(text):
        # vcvarsall.bat compares some arguments textually (-vcvars_ver=14.11), so no quotes when none are needed
        return text
    return f'"{text}"'


def _interpreter_arguments(script: str, args: Sequence[str]) -> str:
    words = [_quote_for_cmd(script, "script path"), *(_quote_for_cmd(arg, "argument") for arg in args)]
    return f'/d /u /v:off /s /c "set && echo {MARKER} && {" ".join(words)} && echo {MARKER} && set"'


def vcvars_command_line(script: str, args: Sequence[str]) -> str:
    """The exact command line cmd gets (see the module docstring for why it looks like this)."""
    return "cmd " + _interpreter_arguments(script, args)


# ---------------------------------------------------------------------------------------------
# Environments (names are case-insensitive on Windows)


def _find_name(env: Mapping[str, str], name: str) -> str | None:
    """The spelling under which `name` is stored in `env`, compared as Windows does."""
    wanted = name.upper()
    return next((key for key in env if key.upper() == wanted), None)


def env_get(env: Mapping[str, str], name: str) -> str | None:
    """Look a variable up the Windows way: PATH, Path and path are one variable."""
    key = _find_name(env, name)
    return None if key is None else env[key]


def parse_set_output(text: str) -> dict[str, str]:
    """Read cmd's `set` listing into a dict.

    A line is NAME=VALUE split at the first `=` after the name, so values keep their own `=`.
    The `=C:` style entries (per-drive current folders) are not variables and are skipped. A line
    without `=` continues the previous value (a value holding a line break). When a name appears
    twice in different case, the first one wins, as in Windows' own lookup.
    """
    env: dict[str, str] = {}
    last: str | None = None
    for line in text.split("\r\n") if "\r\n" in text else text.split("\n"):
        if not line:
            continue
        if line.startswith("="):
            last = None
            continue
        name, sep, value = line.partition("=")
        if not sep:
            if last is not None:
                env[last] += "\r\n" + line
            continue
        if _find_name(env, name) is not None:
            last = None
            continue
        env[name] = value
        last = name
    return env


def diff_environments(before: Mapping[str, str], after: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """What turned `before` into `after`: added or changed variables, and removed names."""
    changes = {name: value for name, value in after.items() if env_get(before, name) != value}
    removed = tuple(name for name in before if _find_name(after, name) is None)
    return changes, removed


def apply_changes(base: Mapping[str, str], changes: Mapping[str, str], removed: Sequence[str]) -> dict[str, str]:
    """`base` with the changes made, keeping base's spelling of names it already has."""
    env = dict(base)
    for name in removed:
        key = _find_name(env, name)
        if key is not None:
            del env[key]
    for name, value in changes.items():
        key = _find_name(env, name)
        env[key if key is not None else name] = value
    return env


def _entries(value: str) -> list[str]:
    return [entry for entry in value.split(";") if entry]


def path_edits(before: str | None, after: str) -> tuple[list[str], list[str]] | None:
    """For a `;`-separated list variable: the entries put before and after the old value.

    None when the variable is new, was empty, or no longer contains its old entries in order
    (the script rewrote it rather than extending it). Entries compare case-insensitively.
    """
    old = _entries(before or "")
    new = _entries(after)
    if not old or len(new) <= len(old):
        return None
    folded_old = [entry.casefold() for entry in old]
    folded_new = [entry.casefold() for entry in new]
    for start in range(len(new) - len(old) + 1):
        if folded_new[start : start + len(old)] == folded_old:
            return new[:start], new[start + len(old) :]
    return None


def _all_path_edits(
    base: Mapping[str, str], changes: Mapping[str, str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    prepended: dict[str, list[str]] = {}
    appended: dict[str, list[str]] = {}
    for name, value in changes.items():
        edits = path_edits(env_get(base, name), value)
        if edits is None:
            continue
        if edits[0]:
            prepended[name] = edits[0]
        if edits[1]:
            appended[name] = edits[1]
    return prepended, appended


# ---------------------------------------------------------------------------------------------
# Reading the output


def error_lines(data: bytes) -> list[str]:
    """Every `[ERROR:...]` line in raw output, found in UTF-16 and in code-page bytes alike.

    Searching the bytes both ways keeps working when a program the script runs wrote plain bytes
    into cmd's UTF-16 stream, which can shift the rest of the stream by one byte.
    """
    found = [(m.start(), m.group().decode("utf-16-le", errors="replace")) for m in _ERROR_LINE_UTF16.finditer(data)]
    found += [(m.start(), m.group().decode(code_page(), errors="replace")) for m in _ERROR_LINE_BYTES.finditer(data)]
    return [line.rstrip() for _, line in sorted(found)]


def _marker_line(encoding: str, *, line_start: bool) -> re.Pattern[bytes]:
    """`echo MARK` as cmd prints it ("MARK \r\n"), in the given encoding.

    The first marker must start a line: the Wine trampoline's variable holding the command line
    contains the marker too, inside the first `set` listing, but never at the start of a line.
    """

    def text(value: str) -> bytes:
        return re.escape(value.encode(encoding))

    start = b"(?:\\A|" + text("\n") + b")" if line_start else b""
    return re.compile(start + text(MARKER) + b"(?:" + text(" ") + b")*(?:" + text("\r") + b")?" + text("\n"))


def _split_sections(data: bytes) -> tuple[bytes, bytes, bytes | None] | None:
    """Cut stdout at the marker lines: (set before, script output, set after).

    None when the first marker is missing (cmd never got that far); the last part is None when
    the script stopped the rest of the line from running.
    """
    encoding = "utf-16-le" if b"\x00" in data else "ascii"
    first = _marker_line(encoding, line_start=True).search(data)
    if first is None:
        return None
    before = data[: first.start()] + ("\n".encode(encoding) if first.start() else b"")
    second = _marker_line(encoding, line_start=False).search(data, first.end())
    if second is None:
        return before, data[first.end() :], None
    return before, data[first.end() : second.start()], data[second.end() :]


# ---------------------------------------------------------------------------------------------
# Finding cl.exe the way cmd would


def find_program(name: str, env: Mapping[str, str], prefix: Path | None) -> str | None:
    """The Windows path cmd would run for `name`, searching the PATH and PATHEXT of `env`.

    Names match case-insensitively, as on Windows, and the result has the file's own spelling.
    """
    pathext = _entries(env_get(env, "PATHEXT") or DEFAULT_PATHEXT)
    has_extension = any(name.casefold().endswith(ext.casefold()) for ext in pathext)
    candidates = [name] if has_extension else [name + ext for ext in pathext]
    for folder in _entries(env_get(env, "PATH") or ""):
        folder = folder.strip().strip('"')
        local = local_path(folder, prefix) if folder else None
        if local is None:
            continue
        try:
            files = {entry.name.casefold(): entry.name for entry in os.scandir(local) if entry.is_file()}
        except OSError:
            continue
        for candidate in candidates:
            if candidate.casefold() in files:
                return str(PureWindowsPath(folder, files[candidate.casefold()]))
    return None


# ---------------------------------------------------------------------------------------------
# Failures


def _toolchain_error(command_line: str, status: int, script_bytes: bytes, stderr: bytes) -> ToolchainError | None:
    """The one-paragraph error for a vcvars run that did not work, or None if it did.

    `script_bytes` is what the script printed (not the `set` listings, whose values may hold
    any text); `stderr` is cmd's error stream.
    """
    errors = error_lines(script_bytes) + error_lines(stderr)
    if errors:
        extra = f" (and {len(errors) - 1} more [ERROR] lines)" if len(errors) > 1 else ""
        message = (
            f'`{command_line}` reported "{redact_text(errors[0])}"{extra} and exited with status {status}, so '
            "the Visual Studio environment is incomplete."
        )
        missing = _MISSING_TOOLSET.search(errors[0])
        if missing:
            version = missing.group(1)
            fix = (
                f"install the MSVC {version} toolset: open the Visual Studio Installer, choose Modify on this "
                f"instance, and under Individual components add the toolset whose name ends in 'v{version} toolset' "
                f"(VS 2017) or '(v{version})' (VS 2019 and later); or choose a toolset that is installed (its "
                "folders are under VC\\Tools\\MSVC)."
            )
        else:
            fix = (
                "run the same command in a new Command Prompt after `set VSCMD_DEBUG=1` to see the details, then "
                "repair the instance in the Visual Studio Installer (More → Repair)."
            )
        return ToolchainError(message, fix=fix)
    if status != 0:
        text = (decode_output(script_bytes) + "\n" + decode_output(stderr)).strip().splitlines()
        last = f' Its last line was "{redact_text(text[-1].strip())}".' if text else ""
        return ToolchainError(
            f"`{command_line}` exited with status {status}.{last}",
            fix="run the same command in a Command Prompt to see the full message; check that the script belongs "
            "to a complete Visual Studio installation.",
        )
    return None


# ---------------------------------------------------------------------------------------------
# Cache


def _cache_file(cache_dir: Path, script: str, args: Sequence[str], launcher: Sequence[str], start_path: str) -> Path:
    key = json.dumps([CACHE_FORMAT, script, list(args), list(launcher), start_path])
    return cache_dir / f"vcvars-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:32]}.json"


def _inputs(base: Mapping[str, str], names: Sequence[str]) -> dict[str, str | None]:
    """The starting values of the variables the script touched: a cached result is only reused
    when they are the same (a different INCLUDE or VCToolsVersion gives a different result)."""
    return {name: env_get(base, name) for name in ["PATH", *names]}


class _Entry(TypedDict):
    """A capture as the cache keeps it (with its `identity` beside it in the file)."""

    inputs: dict[str, str | None]  # the starting values of the variables the script touched, PATH first
    changes: dict[str, str]
    removed: list[str]
    cl: str
    output: str
    command_line: str


def _read_cache(
    file: Path, identity: Mapping[str, object], base: Mapping[str, str], prefix: Path | None
) -> _Entry | None:
    """A cache entry still valid for this run, or None (missing, stale or corrupt: all the same)."""
    try:
        entry: JsonValue = read_json(file)
        if not isinstance(entry, dict) or entry.get("identity") != identity:
            return None
        inputs, changes, removed = entry["inputs"], entry["changes"], entry["removed"]
        if not isinstance(inputs, dict) or not isinstance(changes, dict) or not isinstance(removed, list):
            raise ValueError("its inputs, changes or removed are not an object, an object and a list")
        changed = {name: value for name, value in changes.items() if isinstance(value, str)}
        removed_names = [name for name in removed if isinstance(name, str)]
        if len(changed) != len(changes) or len(removed_names) != len(removed):
            return None
        started = {name: value for name, value in inputs.items() if value is None or isinstance(value, str)}
        if len(started) != len(inputs) or any(env_get(base, name) != value for name, value in started.items()):
            return None
        cl = entry["cl"]
        if not isinstance(cl, str):
            raise ValueError(f"its cl is {cl!r}, not a path")
        cl_path = local_path(cl, prefix)
        if cl_path is None or not cl_path.is_file():
            return None  # the toolset was removed since: capture again and report it
        output, command_line = entry["output"], entry["command_line"]
        if not isinstance(output, str) or not isinstance(command_line, str):
            return None
        return _Entry(
            inputs=started, changes=changed, removed=removed_names, cl=cl, output=output, command_line=command_line
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("ignoring the unreadable vcvars cache entry %s (%s); it will be rewritten", file, exc)
        return None


def _write_cache(file: Path, entry: Mapping[str, object]) -> None:
    """Write through a temporary file and a rename, so a reader never sees half an entry."""
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        atomic_file.write_text(file, json.dumps(entry, indent=1, ensure_ascii=False))
    except OSError as exc:
        log.warning("could not write the vcvars cache entry %s (%s); the next build captures again", file, exc)


# ---------------------------------------------------------------------------------------------
# The entry point


def capture_vcvars(
    script: str,
    args: list[str],
    *,
    base_env: dict[str, str] | None = None,
    cache_dir: Path | None = None,
    launcher: list[str] | None = None,
) -> VcvarsResult:
    """Run a vcvars script and return the environment it leaves.

    `script` is the path cmd sees (on Wine a `C:\\...` or `Z:\\...` path; see `cmd_line.to_wine_path`).
    `base_env` is the environment to start from (default: this process's); through Wine its PATH
    must be a Windows PATH, given to cmd as is. With `cache_dir`, a result is reused while the
    script (path, arguments, modification time, size), the launcher, the starting PATH and the
    starting values of the variables the script changes are all the same, and while its cl.exe
    still exists. Only the script's changes are stored, never the rest of the environment, so
    no credential from the caller's environment lands in the cache.

    Raises ToolchainError when the script is missing, fails, prints `[ERROR:...]`, or leaves no
    cl.exe on PATH.
    """
    started = time.perf_counter()
    base = dict(os.environ if base_env is None else base_env)
    launcher = list(launcher) if launcher else default_launcher()
    prefix = None if os.name == "nt" else wine_prefix(base)
    command_line = vcvars_command_line(script, args)

    local_script = local_path(script, prefix)
    try:
        stat = local_script.stat() if local_script is not None else None
    except OSError:
        stat = None
    if stat is None:
        raise ToolchainError(
            f"the vcvars script {script} does not exist.",
            fix="check the Visual Studio instance the plan chose (`invoke doctor` lists them), or repair it in "
            "the Visual Studio Installer.",
        )

    start_path = env_get(base, "PATH") or ""
    identity: dict[str, object] = {
        "format": CACHE_FORMAT,
        "script": script,
        "args": list(args),
        "launcher": launcher,
        "mtime_ns": stat.st_mtime_ns,
        "size": stat.st_size,
        "path": start_path,
    }
    file = _cache_file(cache_dir, script, args, launcher, start_path) if cache_dir is not None else None
    entry = _read_cache(file, identity, base, prefix) if file is not None else None
    from_cache = entry is not None

    if entry is None:
        entry = _capture(script, args, command_line, base, launcher, prefix)
        if file is not None:
            _write_cache(file, {**entry, "identity": identity})

    changes = dict(entry["changes"])
    removed = tuple(entry["removed"])
    prepended, appended = _all_path_edits(base, changes)
    return VcvarsResult(
        env=apply_changes(base, changes, removed),
        changes=changes,
        removed=removed,
        prepended=prepended,
        appended=appended,
        cl=entry["cl"],
        output=entry["output"],
        command_line=entry["command_line"],
        from_cache=from_cache,
        seconds=time.perf_counter() - started,
    )


def _capture(
    script: str, args: Sequence[str], command_line: str, base: dict[str, str], launcher: list[str], prefix: Path | None
) -> _Entry:
    """Run the script for real; the result in the cache entry's shape, or ToolchainError."""
    completed = run_command_line(_interpreter_arguments(script, args), env=base, launcher=launcher)
    sections = _split_sections(completed.stdout)
    script_bytes = sections[1] if sections else completed.stdout
    error = _toolchain_error(command_line, completed.returncode, script_bytes, completed.stderr)
    if error is not None:
        raise error
    if sections is None or sections[2] is None:
        raise ToolchainError(
            f"`{command_line}` ended the command interpreter before the environment could be read (exit "
            f"status {completed.returncode}).",
            fix="the script probably calls `exit` without /b; run it in a Command Prompt to see what it does, or "
            "use vcvarsall.bat from the Visual Studio instance.",
        )
    before = without_carriers(parse_set_output(decode_output(sections[0])))
    after = without_carriers(parse_set_output(decode_output(sections[2])))
    changes, removed = diff_environments(before, after)
    cl = find_program("cl", after, prefix)
    if cl is None:
        folders = len(_entries(env_get(after, "PATH") or ""))
        raise ToolchainError(
            f"`{command_line}` finished without errors, but `cl` finds no cl.exe on the PATH it leaves "
            f"({folders} folders searched with PATHEXT), so this Visual Studio instance has no C++ compiler "
            "for these arguments.",
            fix="open the Visual Studio Installer, choose Modify on this instance and add the workload 'Desktop "
            "development with C++' (for Build Tools: 'C++ build tools'), which includes 'MSVC … C++ x64/x86 "
            "build tools' (Microsoft.VisualStudio.Component.VC.Tools.x86.x64); or pick another instance.",
        )
    return _Entry(
        inputs=_inputs(base, [*changes, *removed]),
        changes=changes,
        removed=list(removed),
        cl=cl,
        output=redact_text(decode_output(script_bytes).strip()),
        command_line=command_line,
    )
