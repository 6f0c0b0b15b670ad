"""Reading the TOML files in build_config/ with errors that name the file and the key.

Every knowledge module goes through `load_toml` and the `require_*` helpers, so a broken file is reported one way.
The shipped files are parsed once and kept as JSON beside them, the way Python keeps bytecode, keyed by each file's
size, modification time and inode; a missing, broken or unwritable cache only means the TOML is parsed.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar, overload

from pytorch_winbuild import atomic_file
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.json_file import JsonValue, open_regular, parse_json, read_json

_PACKAGE = Path(__file__).resolve().parents[1]
_REPO_CONFIG = _PACKAGE.parent / "build_config"
_INSTALLED_CONFIG = _PACKAGE / "build_config"

T = TypeVar("T")
U = TypeVar("U")


def config_dir() -> Path:
    """build_config/ next to the package in a checkout, or inside it once installed."""
    return _REPO_CONFIG if _REPO_CONFIG.is_dir() else _INSTALLED_CONFIG


PARSED_FORMAT = 1


class ParsedConfig:
    """The parsed shipped TOML files, kept as JSON in `path` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, JsonValue] | None = None

    def _read(self) -> dict[str, JsonValue]:
        if self._entries is None:
            self._entries = {}
            with contextlib.suppress(OSError, ValueError):
                data: JsonValue = read_json(self.path)
                if isinstance(data, dict) and data.get("format") == PARSED_FORMAT:
                    files = data.get("files")
                    self._entries = files if isinstance(files, dict) else {}
        return self._entries

    def get(self, name: str, key: str) -> dict[str, object] | None:
        """A fresh copy of the kept data (callers may change what they get, as with tomllib's)."""
        entry = self._read().get(name)
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        text = entry.get("json")
        if not isinstance(text, str):
            return None
        try:
            data: JsonValue = parse_json(text, allow_nonfinite=True)  # TOML has nan and inf
        except ValueError:
            return None
        return dict(data) if isinstance(data, dict) else None

    def put(self, name: str, key: str, data: Mapping[str, object]) -> None:
        """Keep `data`, whole or not at all (a temporary file renamed over the cache)."""
        if sys.dont_write_bytecode:
            return
        entries = self._read()
        try:
            entries[name] = {"key": key, "json": json.dumps(data, separators=(",", ":"))}
            text = json.dumps({"format": PARSED_FORMAT, "files": entries}, separators=(",", ":"))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_file.write_text(self.path, text)
        except (OSError, TypeError, ValueError):
            entries.pop(name, None)  # TOML dates are not JSON, an unwritable folder: parse next time


_parsed: ParsedConfig | None = None


def parsed_config_file() -> Path:
    """Where bytecode of a module in build_config/ would go (PEP 3147, or sys.pycache_prefix)."""
    folder = config_dir()
    if sys.pycache_prefix:
        return Path(sys.pycache_prefix) / folder.relative_to(folder.anchor) / "parsed-config.json"
    return folder / "__pycache__" / "parsed-config.json"


def _parsed_config() -> ParsedConfig:
    global _parsed
    if _parsed is None:
        _parsed = ParsedConfig(parsed_config_file())
    return _parsed


def _parse(path: Path) -> dict[str, object]:
    """tomllib's reading, imported only when no parsed copy answers (a few ms a command)."""
    import tomllib

    try:
        with open_regular(path) as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(
            f"{path}: not valid TOML ({exc}).", fix="correct the syntax at the position shown."
        ) from None


def load_toml(path: Path | str) -> dict[str, object]:
    """Parse a TOML file; a relative name is looked up in build_config/."""
    path = Path(path)
    if not path.is_absolute() and not path.exists():
        path = config_dir() / path
    shipped = path.parent == config_dir()
    try:
        if shipped:
            stat = path.stat()
            key = f"{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}"  # a file replaced (git checkout) is a new inode
            kept = _parsed_config().get(path.name, key)
            if kept is not None:
                return kept
        data = _parse(path)
        if shipped:
            _parsed_config().put(path.name, key, data)
        return data
    except FileNotFoundError:
        raise ConfigurationError(
            f"{path}: file not found.",
            fix="check the path, or reinstall pytorch-winbuild if it is one of its own build_config files.",
        ) from None
    except UnicodeDecodeError as exc:  # tomllib decodes the bytes itself; TOML is UTF-8 only
        raise ConfigurationError(
            f"{path}: not UTF-8 text (byte {exc.start} cannot be decoded), so not a TOML file.",
            fix='save it as UTF-8 (an editor\'s "UTF-8" encoding), or restore it from version control.',
        ) from None
    except ValueError as exc:  # an integer longer than Python converts (int_max_str_digits)
        raise ConfigurationError(
            f"{path}: not a usable TOML file ({exc}).",
            fix="correct the value, or restore the file from version control.",
        ) from None
    except RecursionError:
        raise ConfigurationError(
            f"{path}: nested too deeply to read.", fix="correct the file, or restore it from version control."
        ) from None
    except IsADirectoryError:
        raise ConfigurationError(f"{path} is a folder, not a TOML file.", fix="pass the path of the file.") from None
    except OSError as exc:
        raise ConfigurationError(
            f"{path} cannot be read ({exc.strerror or exc}).", fix="make the file readable, or pass another one."
        ) from None


@overload
def require(table: Mapping[str, object], key: str, kind: type[dict[str, object]], where: str) -> dict[str, object]: ...
@overload
def require(table: Mapping[str, object], key: str, kind: type[T], where: str) -> T: ...
@overload
def require(table: Mapping[str, object], key: str, kind: tuple[type[T], type[U]], where: str) -> T | U: ...


def require(table: Mapping[str, object], key: str, kind: type | tuple[type, ...], where: str) -> object:
    """Return table[key] if it has the expected type, else a ConfigurationError naming `where.key`.

    A TOML table comes back as a dict[str, object], what it holds narrowed in turn (an array's items too: see
    `array` and `tables`)."""
    return _checked(table, key, kind, where)


def _checked(table: Mapping[str, object], key: str, kind: type | tuple[type, ...], where: str) -> object:
    if key not in table:
        raise ConfigurationError(f"{where}: missing required key '{key}'.")
    value = table[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    name = " or ".join(k.__name__ for k in kinds)
    # bool is an int to isinstance, but `min_free_gb = true` is a mistake, not 1.
    if isinstance(value, bool) and bool not in kinds:
        raise ConfigurationError(f"{where}.{key}: expected {name}, got a boolean.")
    if not isinstance(value, kinds):
        raise ConfigurationError(f"{where}.{key}: expected {name}, got {type(value).__name__} {value!r}.")
    return value


@overload
def optional(
    table: Mapping[str, object], key: str, kind: type[dict[str, object]], where: str, default: dict[str, object]
) -> dict[str, object]: ...
@overload
def optional(table: Mapping[str, object], key: str, kind: type[T], where: str, default: T) -> T: ...
@overload
def optional(
    table: Mapping[str, object], key: str, kind: tuple[type[T], type[U]], where: str, default: T | U
) -> T | U: ...


def optional(
    table: Mapping[str, object], key: str, kind: type | tuple[type, ...], where: str, default: object
) -> object:
    """Like `require`, but a missing key gives `default`."""
    if key not in table:
        return default
    return _checked(table, key, kind, where)


def array(table: Mapping[str, object], key: str, where: str) -> list[object]:
    """table[key], a TOML array: `require(table, key, list, where)` with its items still to narrow."""
    value: list[object] = require(table, key, list, where)
    return value


def as_table(value: object, where: str) -> dict[str, object]:
    """`value` (an array's item, a table's value) when it is a TOML table, else a ConfigurationError naming `where`."""
    if not isinstance(value, dict):
        raise ConfigurationError(f"{where}: expected a table.")
    table: dict[str, object] = value
    return table


def require_int_pair(table: Mapping[str, object], key: str, where: str) -> tuple[int, int]:
    """A [low, high] list of two integers with low < high."""
    value = array(table, key, where)
    match value:
        case [int() as low, int() as high] if not isinstance(low, bool) and not isinstance(high, bool) and low < high:
            return low, high
    raise ConfigurationError(f"{where}.{key}: expected [low, high] with two integers and low < high, got {value!r}.")


def string_list(table: Mapping[str, object], key: str, where: str, default: list[str] | None = None) -> list[str]:
    """A list of strings (missing key → default, or an error when no default is given)."""
    if key not in table and default is not None:
        return list(default)
    value = array(table, key, where)
    strings = [item for item in value if isinstance(item, str)]
    if len(strings) != len(value):
        raise ConfigurationError(f"{where}.{key}: expected a list of strings, got {value!r}.")
    return strings


def string_values(table: Mapping[str, object], where: str) -> dict[str, str]:
    """`table` when every value is a string, else a ConfigurationError naming the first that is not."""
    strings: dict[str, str] = {}
    for name, value in table.items():
        if not isinstance(value, str):
            raise ConfigurationError(f"{where}.{name}: expected a string, got {value!r}.")
        strings[name] = value
    return strings
