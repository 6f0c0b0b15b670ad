"""Flags and configuration values, checked before any work starts.

A flag given on the command line wins; otherwise Invoke's configuration under the `winbuild` key
(invoke.yaml, `-f FILE`, INVOKE_WINBUILD_<NAME>); otherwise WINBUILD_DEFAULTS. Every check raises a
ConfigurationError (exit 2) naming the flag or key and what to pass instead.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from invoke import Context

from pytorch_winbuild import atomic_file
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.paths import default_cache_dir
from pytorch_winbuild.planning.flag_table import SETTINGS
from pytorch_winbuild.text.terminal_text import echoed, terminal_line

# What Invoke hands a task for a flag: its text, a switch's True or False, or None when it was not given.
FlagValue: TypeAlias = "str | bool | None"

WINBUILD_DEFAULTS: dict[str, object] = dict(SETTINGS)  # planning/flag_table.py: the flags with a setting


def setting(c: Context, name: str, flag: object) -> object:
    """A flag's value, else the `winbuild.<name>` configuration value (checked: a `-f` file or an
    INVOKE_WINBUILD_* variable reaches here without config_check); null means the default."""
    if flag is not None:
        return flag
    from pytorch_winbuild.faces.config_check import check_setting

    value = check_setting(
        name,
        c.config.winbuild.get(name),
        f"configuration value winbuild.{name} (invoke.yaml, -f FILE or INVOKE_WINBUILD_{name.upper()})",
    )
    if value is None or (
        isinstance(value, str) and not value.strip()
    ):  # `mirror: ''` / INVOKE_WINBUILD_MIRROR= unset it
        return WINBUILD_DEFAULTS.get(name)
    return value


def text_setting(c: Context, name: str, flag: object) -> str | None:
    """`setting` of a flag read as text (a path, a URL, --python): what the flag, the configuration (which
    config_check lets hold only text for these) or the default says; None when none says anything."""
    value = setting(c, name, flag)
    return None if value is None else str(value)


def flag_label(name: str, flag: object) -> str:
    """How an error names a value: the flag when it was given, else the configuration key."""
    return f"--{name.replace('_', '-')}" if flag is not None else f"winbuild.{name}"


def example(label: str, value: str) -> str:
    """`--jobs 4` for a flag; `jobs: 4` in invoke.yaml (or INVOKE_WINBUILD_JOBS=4) for a setting."""
    if label.startswith("--"):
        return f"{label} {value}"
    name = label.removeprefix("winbuild.")
    return f"`{name}: {value}` in invoke.yaml (or INVOKE_WINBUILD_{name.upper()}={value})"


def whole_number(
    value: object, label: str, *, minimum: int = 1, maximum: int | None = None, unit: str = ""
) -> int | None:
    """A whole-number flag or configuration value (text from the command line), from `minimum` to `maximum`
    (None: no upper bound); None when absent."""
    if value is None:
        return None
    span = f"{minimum} or more" if maximum is None else f"from {minimum} to {maximum}"
    fix = f"pass a whole number, {span}, e.g. {example(label, '4')}, or leave it out for the default."
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigurationError(f"{label} {value!r} is not a number.", fix=fix)
    text = value.strip() if isinstance(value, str) else value
    try:
        number = int(text)
    except ValueError:
        try:
            float(text)
        except ValueError:
            raise ConfigurationError(f"{label} {value!r} is not a number.", fix=fix) from None
        raise ConfigurationError(f"{label} {value!r} is not a whole number.", fix=fix) from None
    if number < minimum or (maximum is not None and number > maximum):
        expected = f"{minimum} or more" if maximum is None else f"{minimum} to {maximum}"
        raise ConfigurationError(f"{label} {number}: expected {expected}{unit}.", fix=fix)
    return number


def finite_number(value: str | float | None, label: str, *, minimum: float = 0.0) -> float | None:
    """A decimal flag (text from the command line): finite, `minimum` or more; None when absent."""
    if value is None:
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"{label} {value!r} is not a number.",
            fix=f"pass a number such as {label} 40, or leave {label} out for its default.",
        ) from None
    if not math.isfinite(number):
        raise ConfigurationError(
            f"{label} {value!r} is not a finite number.",
            fix=f"pass a number such as {label} 40, or leave {label} out for its default.",
        )
    if number < minimum:
        raise ConfigurationError(
            f"{label} {value}: expected {minimum:g} or more.",
            fix=f"pass a number such as {label} 40, or leave {label} out for its default.",
        )
    return number


NAME_MAX = 255  # bytes of one path component on Linux and macOS; NTFS allows 255 UTF-16 units


def path_flag(value: str | None, label: str) -> str | None:
    """A path flag: absent (None) or text; an empty path would silently mean the current folder, and a component
    longer than any file system allows would end in ENAMETOOLONG wherever the path is first used."""
    if value is not None and not value.strip():
        raise ConfigurationError(f"{label} is empty.", fix=f"give {label} a path, or leave it out for its default.")
    if value is not None:
        long = next((part for part in re.split(r"[\\/]", value) if len(os.fsencode(part)) > NAME_MAX), None)
        if long is not None:
            raise ConfigurationError(
                f"{label}: the name {echoed(long, 60)!r} is {len(os.fsencode(long))} bytes long, and no file system "
                f"takes a name over {NAME_MAX}.",
                fix=f"give {label} a path whose folder and file names are shorter.",
            )
    return value


def writable_folder(folder: Path, label: str, instead: str | None = None) -> None:
    """Prove, before any work starts and without leaving anything behind, that the folder can be
    written: a file is made (and removed at once) in it, or in the nearest existing folder above it
    when it does not exist yet (the task creates it later). `label` names where the folder came from
    (a flag, a setting); `instead` says how to choose another (default: pass another one as `label`)."""
    instead = instead or f"pass another one as {label}"
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigurationError(f"{label} {folder}: {existing} is a file, not a folder.", fix=f"{instead}.")
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".pytorch-winbuild-"):
            pass
    except OSError as exc:
        where = "" if existing == folder else f", since {existing} cannot be written and it would be created there"
        raise ConfigurationError(
            f"{label} {folder} cannot be written ({exc.strerror or exc}){where}.",
            fix=f"make the folder writable for this user, or {instead}.",
        ) from None


@dataclass(frozen=True)
class CacheChoice:
    """The cache folder as the user chose it, looked up once per command: messages name it the way it was
    chosen (--cache-dir, the setting winbuild.cache_dir, or the default) and say how to choose another."""

    folder: Path
    given: str | None  # the text of --cache-dir or winbuild.cache_dir; None: this machine's default
    label: str
    instead: str

    def check_writable(self) -> None:
        writable_folder(self.folder, self.label, self.instead)

    def again(self) -> str:
        """What chooses this cache again in a command printed to run next, as this shell reads it: " --cache-dir
        DIR" when the flag chose it; "" when the setting or the default did (they choose it there too)."""
        if self.given is None or self.label != "--cache-dir":
            return ""
        from pytorch_winbuild.facts.platform import Platform
        from pytorch_winbuild.planning.commands_plan import quote_argument

        return f" --cache-dir {quote_argument(Platform.running(), self.given)}"


def cache_choice(c: Context, flag: str | None) -> CacheChoice:
    """--cache-dir, else winbuild.cache_dir (invoke.yaml, -f FILE or INVOKE_WINBUILD_CACHE_DIR), else the default
    (the checkout's cache/ or the user's)."""
    if path_flag(flag, "--cache-dir") is not None:
        assert flag is not None
        return CacheChoice(Path(flag), flag, "--cache-dir", "pass another one as --cache-dir")
    value = text_setting(c, "cache_dir", None)
    if value:
        return CacheChoice(
            Path(value),
            str(value),
            "winbuild.cache_dir",
            "point winbuild.cache_dir at another folder (`cache_dir: DIR` in invoke.yaml, or "
            "INVOKE_WINBUILD_CACHE_DIR=DIR), or pass --cache-dir DIR",
        )
    return CacheChoice(
        default_cache_dir(),
        None,
        "the default cache folder",
        "pass another one with --cache-dir DIR (or winbuild.cache_dir)",
    )


def output_file(output: str | None, example: str = "build_env.bat") -> Path | None:
    """--output checked before any work: a file in an existing folder, not a folder itself (`example`: a file name the
    fix suggests)."""
    given = path_flag(output, "--output")
    if given is None:
        return None
    target = Path(given)
    if target.is_dir():
        raise ConfigurationError(
            f"--output {output} is a folder.", fix=f"name a file, e.g. --output {target / example}."
        )
    folder = target.parent
    if not folder.is_dir():
        raise ConfigurationError(
            f"--output {output}: the folder {folder} does not exist.",
            fix="create the folder first, or name a file in an existing one.",
        )
    _refuse_special_file(target, given, example)
    return target


def _refuse_special_file(target: Path, output: str | Path, example: str) -> None:
    """--output replaces a regular file, never a pipe, socket or device that something else reads or writes
    (a symlink counts as what it points to: its target is the file written)."""
    if target.exists() and not target.is_file():
        raise ConfigurationError(
            f"--output {output} is not a regular file (a pipe, socket or device); nothing was written.",
            fix=f"name a new file or an existing regular file, e.g. --output {example}; to feed a pipe, leave "
            "--output out and pipe the standard output.",
        )


def write_output(text: str, output: Path | None, example: str = "build_env.bat") -> None:
    """Print, or write the file as UTF-8 (PowerShell's `>` would pass the text through the console's code page and
    write UTF-16, which cmd cannot run); `example` is a file name an error's fix suggests.

    The file is written whole or not at all (atomic_file: a temporary file next to it, renamed over it at the
    end), so an error or Ctrl-C never leaves half a script that looks complete. It keeps an existing file's
    permissions, else gets open()'s. The file gets `text` exactly; only the "wrote" line for the terminal is
    made safe."""
    if output is None:
        sys.stdout.write(text)
        return
    target = Path(os.path.realpath(output)) if output.is_symlink() else output
    _refuse_special_file(target, output, example)  # again: it may have appeared since output_file checked
    try:
        atomic_file.write_text(target, text, newline="", mode=atomic_file.SHARED, keep_mode=True)
    except OSError as exc:
        raise ConfigurationError(
            f"--output {output} cannot be written ({exc.strerror or exc}); nothing was written.",
            fix="pass a file in a folder you can write to.",
        ) from None
    print(terminal_line(f"wrote {output}"), file=sys.stderr)


def python_flag(python: str | None) -> str | None:
    """--python checked before it is started: a bad path is bad input (2), not a failed check (6)."""
    if path_flag(python, "--python") is None:
        return None
    assert python is not None
    if shutil.which(python):
        return python
    fix = (
        "pass the path of a Python executable (e.g. C:\\Python311\\python.exe or /usr/bin/python3) or a name on "
        "PATH, or leave --python out for the task's own choice (its --help says which Python that is)."
    )
    candidate = Path(python)
    if candidate.is_dir():
        raise ConfigurationError(f"--python {python} is a folder, not a Python executable.", fix=fix)
    if candidate.is_file():
        raise ConfigurationError(f"--python {python} is not executable.", fix=fix)
    raise ConfigurationError(
        (
            f"--python {python}: no such "
            f"file{' or command on PATH' if os.sep not in python and '/' not in python else ''}."
        ),
        fix=fix,
    )


def started_program() -> str:
    """This tool's command as this shell runs it, for a command printed to run next: the console script outside the
    repo (where `invoke` finds no tasks.py), a venv's script that is not on PATH by the path it was started as."""
    from pytorch_winbuild.facts.platform import Platform
    from pytorch_winbuild.planning.commands_plan import quote_argument

    started = Path(sys.argv[0])
    program = "pytorch-winbuild" if started.stem == "pytorch-winbuild" else "invoke"
    found = shutil.which(program)
    if started.stem == program and (found is None or Path(found).resolve() != started.resolve()):
        program = quote_argument(Platform.running(), str(started))
    return program
