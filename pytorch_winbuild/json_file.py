"""Every JSON document the tool reads, read one way: bounded in size and nesting, finite numbers only.

Python's json meets such input with RecursionError, a bare ValueError or non-finite floats; this reader raises one
BadJson (a ValueError) with a one-line reason for every problem of the content. A missing or unreadable file stays
an OSError, so each caller keeps its own policy. A file is UTF-8 (with or without a byte-order mark) or UTF-16 after
its byte-order mark, as Windows PowerShell's `>` writes it. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import codecs
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


# The byte-order marks a file may start with, and the codec reading what follows. UTF-32's marks start with UTF-16's:
# they are looked for first (a UTF-16 JSON document never starts with U+0000).
_UTF32_MARKS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
_UTF16_MARKS = {codecs.BOM_UTF16_LE: "utf-16-le", codecs.BOM_UTF16_BE: "utf-16-be"}
# NUL is never in JSON, not even in a string: the tell of UTF-16 or UTF-32 without its mark.
_NUL = "holds NUL characters: UTF-16 or UTF-32 without a byte-order mark, or not text at all"


def _size(max_bytes: int) -> str:
    return f"{max_bytes / 2**20:g} MiB" if max_bytes >= 2**20 else f"{max_bytes / 2**10:g} KiB"


def _too_large(max_bytes: int, utf16: bool = False) -> BadJson:
    size = f"{_size(max_bytes)} ({_size(2 * max_bytes)} as UTF-16)" if utf16 else _size(max_bytes)
    return BadJson(f"larger than {size}, more than such a file ever holds")


def _utf16_limit(max_bytes: int) -> int:
    """The most bytes a UTF-16 file (its byte-order mark included) of a document within `max_bytes` may take."""
    return 2 * max_bytes + 2


def _utf16_codec(data: bytes) -> str | None:
    """The codec of a file that starts with UTF-16's byte-order mark (not UTF-32's), else None."""
    if data.startswith(_UTF32_MARKS):
        return None
    return next((codec for mark, codec in _UTF16_MARKS.items() if data.startswith(mark)), None)


def _decode_text(data: bytes, max_bytes: int = MAX_BYTES) -> str:
    """`data` as text: UTF-8 (a byte-order mark kept, for the caller to skip) or UTF-16 after its byte-order mark;
    BadJson when it is neither, or larger than `max_bytes` (twice that, and the mark, for UTF-16)."""
    codec = _utf16_codec(data)
    if codec is not None:
        if len(data) > _utf16_limit(max_bytes):
            raise _too_large(max_bytes, utf16=True)
        try:
            return data[2:].decode(codec)
        except UnicodeDecodeError as exc:
            raise BadJson(
                f"not UTF-16 text, though it starts with UTF-16's byte-order mark (byte {exc.start + 2} cannot be "
                "decoded)"
            ) from None
    if len(data) > max_bytes:
        raise _too_large(max_bytes)
    if data.startswith(_UTF32_MARKS):
        raise BadJson("UTF-32 text (it starts with UTF-32's byte-order mark), where UTF-8 or UTF-16 is read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if b"\x00" in data:
            raise BadJson(_NUL) from None
        raise BadJson(
            f"not UTF-8 text (byte {exc.start} cannot be decoded), nor UTF-16 with its byte-order mark"
        ) from None


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
    """The document in `text` (bytes: UTF-8, or UTF-16 after its byte-order mark); BadJson when it is larger than
    `max_bytes` (a UTF-16 one: twice that), is text in neither encoding, nests deeper than `max_depth`, is not JSON,
    holds an integer too long to convert, or (unless `allow_nonfinite`) NaN, Infinity or a number beyond a float's
    range."""
    if isinstance(text, bytes):
        text = _decode_text(text, max_bytes)
    elif len(text) > max_bytes:
        raise _too_large(max_bytes)
    text = text.removeprefix("\ufeff")  # a byte-order mark some Windows editors write
    if "\x00" in text:
        raise BadJson(_NUL)
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
    """The document in the file `path` (UTF-8, or UTF-16 with its byte-order mark), read no further than
    `max_bytes` and one byte (twice that, and the mark, for UTF-16).

    OSError as open() raises it (FileNotFoundError, IsADirectoryError, PermissionError...); BadJson for
    everything about the content, as parse_json."""
    with open_regular(path) as handle:
        data = handle.read(max_bytes + 1)
        if len(data) > max_bytes and _utf16_codec(data) is not None:
            data += handle.read(_utf16_limit(max_bytes) + 1 - len(data))
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
