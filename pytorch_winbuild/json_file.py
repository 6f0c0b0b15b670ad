"""Every JSON document the tool reads, read one way: bounded in size and nesting, finite numbers only.

Python's json meets such input with RecursionError, a bare ValueError or non-finite floats; this reader raises one
BadJson (a ValueError) with a one-line reason for every problem of the content. A missing or unreadable file stays
an OSError, so each caller keeps its own policy. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TypeAlias

# What a JSON document holds, as a type: a reader narrows it (isinstance) before it uses a value, so a document of
# another shape is refused where it is read, never a TypeError later.
JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"

# Deeper than any document the tool writes or reads (a facts file or a summary is 3 to 5 deep), and
# far below where json's recursion could reach the interpreter's limit, wherever the caller is.
MAX_DEPTH = 100
# Far above any file the tool writes (a nightly summary of many entries is a few hundred KB).
MAX_BYTES = 64 * 1024 * 1024

# A string through its closing quote, or through the end when it is never closed (one pass, never a retry).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\Z)', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class BadJson(ValueError):
    """The content is not a usable JSON document; str() is a one-line reason (no file name: the caller
    names the file in its own message)."""

    def __init__(self, reason: str, line: int | None = None, column: int | None = None) -> None:
        self.reason = reason
        self.line = line
        self.column = column
        super().__init__(f"line {line} column {column}: {reason}" if line is not None else reason)


def nesting_depth(text: str) -> int:
    """How deep arrays and objects nest in `text`, brackets inside strings not counted (a string left
    open runs to the end: json refuses that document anyway)."""
    skeleton = _STRING.sub('""', text) if '"' in text else text
    return max(accumulate(_STEP[bracket] for bracket in _BRACKET.findall(skeleton)), default=0)


def _too_large(max_bytes: int) -> BadJson:
    size = f"{max_bytes / 2**20:g} MiB" if max_bytes >= 2**20 else f"{max_bytes / 2**10:g} KiB"
    return BadJson(f"larger than {size}, more than such a file ever holds")


def _refuse_constant(name: str) -> NoReturn:
    raise BadJson(f"{name} is not a number this file may hold")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadJson(f"the number {text[:40]} is out of range")
    return value


def parse_json(
    text: str | bytes, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES, allow_nonfinite: bool = False
) -> Any:
    """The document in `text`; BadJson when it is larger than `max_bytes`, nests deeper than
    `max_depth`, is not JSON, holds an integer too long to convert, or (unless `allow_nonfinite`)
    NaN, Infinity or a number beyond a float's range."""
    if isinstance(text, bytes):
        if len(text) > max_bytes:
            raise _too_large(max_bytes)
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadJson(f"not UTF-8 text (byte {exc.start} cannot be decoded)") from None
    elif len(text) > max_bytes:
        raise _too_large(max_bytes)
    text = text.removeprefix("\ufeff")  # a byte-order mark some Windows editors write
    # Fewer brackets than the bound cannot nest deeper than it: the scan is for the rare file with many.
    if text.count("[") + text.count("{") > max_depth and nesting_depth(text) > max_depth:
        raise BadJson(f"nested too deeply: more than {max_depth} levels, where such a file has a few")
    try:
        if allow_nonfinite:
            return json.loads(text)
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise BadJson(f"not valid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except BadJson:
        raise
    except ValueError:  # the only other ValueError json raises: an integer longer than Python converts
        raise BadJson(f"holds an integer of more than {sys.get_int_max_str_digits()} digits") from None


def read_json(
    path: Path, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES, allow_nonfinite: bool = False
) -> Any:
    """The document in the file `path` (UTF-8), read no further than `max_bytes` and one byte.

    OSError as open() raises it (FileNotFoundError, IsADirectoryError, PermissionError...); BadJson for
    everything about the content, as parse_json."""
    with open_regular(path) as handle:
        data = handle.read(max_bytes + 1)
    return parse_json(data, max_depth=max_depth, max_bytes=max_bytes, allow_nonfinite=allow_nonfinite)


def open_regular(path: Path | str) -> BinaryIO:
    """`path` opened for reading in binary, when it is a regular file; OSError otherwise. A FIFO would block
    open() or read() until some writer came (forever), a device such as /dev/zero never ends: the file is opened
    without blocking and checked before anything is read."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file (a pipe, device or socket)", str(path))
        if sys.platform != "win32":  # opened without blocking (no O_NONBLOCK on Windows, nor FIFOs to open)
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
