"""Check Invoke's configuration files before Invoke loads them.

Invoke imports tasks.py first and reads the system, user and project config files after; a
malformed file would end in a YAML traceback. Checking them here turns that into one paragraph
and exit code 2, and also catches misspelt `winbuild:` keys, which Invoke would silently keep.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from invoke.vendor import yaml

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.json_file import parse_json
from pytorch_winbuild.planning.flag_table import NUMBER_SETTINGS

SUFFIXES = (".yaml", ".yml", ".json")


def invoke_config_files(project_dir: Path | None, home: Path) -> list[Path]:
    """The files Invoke reads, in its order: system, user, project (None: system and user only,
    the ones Invoke reads before it imports any task)."""
    bases = [Path("/etc/invoke"), home / ".invoke", *([project_dir / "invoke"] if project_dir else [])]
    return [
        base.with_name(base.name + suffix)
        for base in bases
        for suffix in SUFFIXES
        if base.with_name(base.name + suffix).is_file()
    ]


# Settings that may also be written as a bare number (planning/flag_table.py); every other one is text (a YAML
# 9.0 or 10.10 is a float, 10.1 once read, so versions must be quoted).


def _parse(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"config file {path}: not UTF-8 text (byte {exc.start}).", fix="save it as UTF-8, or remove it."
        ) from None
    except OSError as exc:
        raise ConfigurationError(
            f"config file {path} cannot be read ({exc.strerror or exc}).", fix="make it readable, or remove it."
        ) from None
    if path.suffix == ".json":
        try:
            return parse_json(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(
                f"config file {path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}).",
                fix="correct the file or remove it.",
            ) from None
        except RecursionError:
            raise ConfigurationError(
                f"config file {path}: nested too deeply to be a configuration file.",
                fix="correct the file or remove it.",
            ) from None
        except ValueError as exc:  # an integer longer than Python converts
            raise ConfigurationError(f"config file {path}: {exc}.", fix="correct the file or remove it.") from None
    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise ConfigurationError(
            f"config file {path}: nested too deeply to be a configuration file.", fix="correct the file or remove it."
        ) from None
    except ValueError as exc:  # an integer longer than Python converts
        raise ConfigurationError(f"config file {path}: {exc}.", fix="correct the file or remove it.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigurationError(
            f"config file {path}: not valid YAML ({where}{problem}).",
            fix='correct the file (quote values such as "9.0") or remove it.',
        ) from None


# What Invoke copies when it merges a file: YAML aliases (*name) load as shared references, and Invoke's merge
# copies each one again, so an 814-byte file of nested aliases became 2.3 GB. A real configuration has a few
# dozen values; this bound is far above any and far below what hurts.
MAX_CONFIG_VALUES = 100_000


def _expanded_values(path: Path, data: object) -> int:
    """How many values `data` holds once every alias is copied: counted over the loaded graph, each shared node
    once with its count remembered, so the count itself stays cheap however large the expansion. An alias that
    contains itself would make Invoke's copy endless: refused."""
    counted: dict[int, int] = {}
    open_nodes: set[int] = set()

    def count(node: object) -> int:
        if not isinstance(node, (dict, list)):
            return 1
        if id(node) in counted:
            return counted[id(node)]
        if id(node) in open_nodes:
            raise ConfigurationError(
                f"config file {path}: a YAML alias (*name) contains itself, which no configuration can be copied from.",
                fix="write the values out instead of the alias, or remove the file.",
            )
        open_nodes.add(id(node))
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        counted[id(node)] = total = 1 + sum(count(child) for child in children)
        return total

    try:
        return count(data)
    except RecursionError:
        raise ConfigurationError(
            f"config file {path}: nested too deeply to be a configuration file.", fix="correct the file or remove it."
        ) from None


def _refuse_expansion(path: Path, data: object) -> None:
    values = _expanded_values(path, data)
    if values > MAX_CONFIG_VALUES:
        raise ConfigurationError(
            f"config file {path}: its YAML aliases expand to {values:,} values (more than {MAX_CONFIG_VALUES:,}), "
            "which Invoke would copy one by one into memory.",
            fix="write the values out instead of nesting aliases (*name), or remove the file.",
        )


def check_config_files(paths: Iterable[Path], known_keys: Iterable[str]) -> None:
    """Raise ConfigurationError for a file that does not parse or a `winbuild` key that does not exist."""
    known = set(known_keys)
    for path in paths:
        data = _parse(path)
        if data is None:
            continue
        _refuse_expansion(path, data)
        if not isinstance(data, dict):
            raise ConfigurationError(
                f"config file {path}: expected a mapping at the top level, got {type(data).__name__}."
            )
        if (
            "winbuild" in data and data["winbuild"] is None
        ):  # every key commented out: Invoke cannot merge a null section
            raise ConfigurationError(
                f"config file {path}: 'winbuild:' has no options (YAML reads it as null).",
                fix="remove the empty 'winbuild:' line, or give it at least one option.",
            )
        section = data.get("winbuild")
        if section is None:
            continue
        if not isinstance(section, dict):
            raise ConfigurationError(f"config file {path}: 'winbuild' must be a mapping of option names to values.")
        unknown = sorted(str(key) for key in set(section) - known)
        if unknown:
            raise ConfigurationError(
                f"config file {path}: unknown winbuild option(s) {', '.join(unknown)}.",
                fix=f"use the flag names with underscores: {', '.join(sorted(known))}.",
            )
        for name, value in section.items():
            check_setting(name, value, f"config file {path}: winbuild.{name}")


def check_environment(environ: Mapping[str, str], known_keys: Iterable[str]) -> None:
    """Raise ConfigurationError for an INVOKE_WINBUILD_<NAME> that names no setting: Invoke reads only
    the variables of keys it already has, so INVOKE_WINBUILD_HOST would otherwise be ignored in silence."""
    known = set(known_keys)
    unknown = sorted(name for name in environ if name.startswith("INVOKE_WINBUILD_") and name[16:].lower() not in known)
    if unknown:
        raise ConfigurationError(
            f"environment variable(s) {', '.join(unknown)} name no winbuild setting, so they would be ignored.",
            fix="--host, --source and the other per-run flags go on the command line; the settings are "
            + ", ".join(f"INVOKE_WINBUILD_{key.upper()}" for key in sorted(known))
            + ".",
        )


def check_setting(name: str, value: object, where: str) -> str | int | None:
    """`value` when it is a usable `winbuild.<name>`: text, or a whole number for jobs and vs; None (YAML null)
    means "not set". Anything else is a ConfigurationError."""
    if value is None or isinstance(value, str):
        return value
    if name in NUMBER_SETTINGS and isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, bool):
        got = f"the YAML boolean {str(value).lower()}"
    elif isinstance(value, (int, float)):
        got = f"the number {value!r}"
    elif isinstance(value, dict):
        got = "a mapping"
    elif isinstance(value, list):
        got = "a list"
    else:
        got = f"a {type(value).__name__}"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "jobs":
        expected, fix = "a whole number of parallel jobs", "write it as `jobs: 4`, or remove the line."
    elif name in NUMBER_SETTINGS:
        expected, fix = "a product line", "write it as `vs: 2019` (or 'auto'), or remove the line."
    elif number:
        expected, fix = (
            "text",
            f"write it in quotes, `{name}: '{value}'`: YAML reads an unquoted 10.10 as the number 10.1. Or "
            "remove the line.",
        )
    else:
        expected, fix = (
            "text",
            f"write it as `{name}: 'VALUE'` (see `invoke build --help` for the values), or remove the line.",
        )
    raise ConfigurationError(f"{where} is {got}; expected {expected}.", fix=fix)
