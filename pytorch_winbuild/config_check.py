"""Check Invoke's configuration files before Invoke loads them.

Invoke imports tasks.py first and reads the system, user and project config files after; a
malformed file would end in a YAML traceback. Checking them here turns that into one paragraph
and exit code 2, and also catches misspelt `winbuild:` keys, which Invoke would silently keep.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from invoke.vendor import yaml

from .errors import ConfigurationError

SUFFIXES = (".yaml", ".yml", ".json")


def invoke_config_files(project_dir: Path, home: Path) -> list[Path]:
    """The files Invoke reads, in its order: system, user, project."""
    bases = [Path("/etc/invoke"), home / ".invoke", project_dir / "invoke"]
    return [base.with_name(base.name + suffix) for base in bases for suffix in SUFFIXES if base.with_name(base.name + suffix).is_file()]


def _parse(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"config file {path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}).", fix="correct the file or remove it.") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigurationError(f"config file {path}: not valid YAML ({where}{problem}).", fix="correct the file (quote values such as \"9.0\") or remove it.") from None


def check_config_files(paths: Iterable[Path], known_keys: Iterable[str]) -> None:
    """Raise ConfigurationError for a file that does not parse or a `winbuild` key that does not exist."""
    known = set(known_keys)
    for path in paths:
        data = _parse(path)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise ConfigurationError(f"config file {path}: expected a mapping at the top level, got {type(data).__name__}.")
        section = data.get("winbuild")
        if section is None:
            continue
        if not isinstance(section, dict):
            raise ConfigurationError(f"config file {path}: 'winbuild' must be a mapping of option names to values.")
        unknown = sorted(set(section) - known)
        if unknown:
            raise ConfigurationError(
                f"config file {path}: unknown winbuild option(s) {', '.join(unknown)}.",
                fix=f"use the flag names with underscores: {', '.join(sorted(known))}.",
            )
