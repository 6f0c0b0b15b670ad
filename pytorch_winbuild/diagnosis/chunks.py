"""The log as UTF-8 bytes in chunks of whole lines, in bounded memory whatever the input.

Logs of a full build reach hundreds of MB, written as UTF-8, UTF-16 (PowerShell's `>`) or bytes
of the console code page, with "\\r\\n", "\\n" or a lone "\\r". Reading them is apart from
scanning so that the scan sees one shape only: whole lines ending in "\\n", each at most
MAX_LINE_BYTES long, about CHUNK_BYTES at a time.
"""

from __future__ import annotations

import codecs
import functools
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, TextIO

import hyperscan

CHUNK_BYTES = 2 * 1024 * 1024
# A line longer than this is cut: only its first MAX_LINE_BYTES are matched and shown, the rest is
# read and dropped, so memory stays bounded whatever the log holds (1 GiB of NUL bytes, /dev/zero).
# The longest real lines are command lines (Ninja's FAILED blocks, verbose builds): on Windows at
# most 32,767 UTF-16 characters (CreateProcess; longer ones go through response files), under
# 96 KiB of UTF-8 even if every character took 3 bytes; on Linux one argument is at most 128 KiB
# (MAX_ARG_STRLEN). The errors themselves are short lines of their own.
MAX_LINE_BYTES = 256 * 1024

Chunk = bytes | bytearray  # whole lines of the log's bytes (UTF-8, stray bytes and all)


class _Readable(Protocol):
    def readinto(self, buffer: memoryview, /) -> int | None: ...


class _TextAsUtf8:
    """A text stream (a UTF-16 log, decoded) read as UTF-8 bytes, the way _line_chunks reads a file."""

    def __init__(self, text: TextIO) -> None:
        self.text = text
        self.pending = b""

    def readinto(self, buffer: memoryview, /) -> int:
        if not self.pending:
            # At most 3 bytes a character (4 for a surrogate pair, which counts as 2 here): about a chunk.
            self.pending = self.text.read(max(1, CHUNK_BYTES // 3)).encode("utf-8", "surrogatepass")
        size = min(len(buffer), len(self.pending))
        buffer[:size] = self.pending[:size]
        self.pending = self.pending[size:]
        return size


def log_chunks(path: Path) -> Iterator[tuple[Chunk, int]]:
    """The log as UTF-8 in chunks of whole lines, whatever wrote it, each with the length of its first
    line where that line was cut (_line_chunks; in bytes of UTF-8, for a UTF-16 log too).

    UTF-8 (with or without a BOM) is passed on undecoded: bytes that are not UTF-8 (MSVC messages
    in the console code page) stay as they are; the patterns' literals are ASCII, so they still
    match around them. UTF-16 (PowerShell's `>`) is transcoded, from the same handle (a pipe cannot
    be opened twice). Line ends are those of text mode: "\\r\\n" and a lone "\\r" become "\\n".
    """
    with path.open("rb") as handle:
        head = handle.peek(4)[:4]  # not read: a pipe (/dev/stdin) cannot seek back
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            with io.TextIOWrapper(handle, encoding="utf-16", errors="replace", newline=None) as text:
                yield from _line_chunks(_TextAsUtf8(text))
            return
        if head.startswith(codecs.BOM_UTF8):
            handle.read(len(codecs.BOM_UTF8))
        yield from _line_chunks(handle)


_CR = ord("\r")


def _line_end(chunk: bytearray, start: int, end: int) -> int:
    """The first line end in chunk[start:end]: a "\\n", or a "\\r" with a byte after it; -1 if none."""
    newline = chunk.find(b"\n", start, end)
    cr = chunk.find(b"\r", start, end - 1 if newline < 0 else newline)
    return cr if cr >= 0 else newline


def _utf8_head(chunk: bytearray, start: int, limit: int) -> int:
    """How many bytes of chunk[start:] to keep, at most `limit`, without ending inside a UTF-8 character."""
    for keep in range(limit, max(limit - 4, 0), -1):
        if chunk[start + keep] & 0xC0 != 0x80:  # not a continuation byte: a character starts there
            return keep
    return limit  # not UTF-8 there: cut anywhere


def _line_chunks(handle: _Readable) -> Iterator[tuple[bytearray, int]]:
    """Whole lines of `handle`, about CHUNK_BYTES at a time, each read into the same buffer, in
    memory bounded by MAX_LINE_BYTES + CHUNK_BYTES however long a line is (a file of NUL bytes, an
    endless pipe, /dev/zero).

    Yields (chunk, cut): `cut` is 0, or the length in bytes of the chunk's first line when that
    line is longer than MAX_LINE_BYTES: only its first MAX_LINE_BYTES are in the chunk (they are
    matched and shown), the rest was read and dropped. Every line that is cut starts a chunk.

    A chunk is overwritten by the next one: a fresh multi-MB object per chunk costs page faults
    that take about as long as the read itself. A chunk ends after a "\\n" or a "\\r" that no "\\n"
    follows, so a log whose lines end in "\\r" alone is read in chunks too. Only what was just read
    is searched for line ends: the unfinished line carried over holds none, except a final "\\r"
    that may be the first half of a "\\r\\n".
    """
    chunk = bytearray()
    filled = 0  # bytes at the start of `chunk` read but not handed out yet: the start of a line
    cut = 0  # while a long line is cut: its length so far (less a final "\r"); its first `head` bytes are kept
    head = 0
    while True:
        size = filled + CHUNK_BYTES
        if len(chunk) < size:
            chunk.extend(bytes(size - len(chunk)))
        else:
            del chunk[size:]
        with memoryview(chunk)[filled:] as free:
            read = handle.readinto(free) or 0
        end = filled + read
        if not read:
            if filled:
                del chunk[end:]
                yield from _cut_long_lines(_text_line_ends(chunk), cut)
            return
        start = filled  # where line ends may be: what was just read, and a "\r" just before it
        if cut:  # the rest of a long line: drop it, up to its end
            stop = _line_end(chunk, head, end)
            if stop < 0:
                pending_cr = int(chunk[end - 1] == _CR)
                cut += end - head - pending_cr
                chunk[head : head + pending_cr] = b"\r" * pending_cr
                filled = head + pending_cr
                continue
            cut += stop - head
            del chunk[head:stop]
            end -= stop - head
            start = head
        newline = chunk.rfind(b"\n", start, end)
        # A "\r" in the last byte may be the first half of a "\r\n": it waits.
        cr = chunk.rfind(b"\r", newline + 1 if newline >= 0 else max(start - 1, 0), end - 1)
        lines_end = max(newline, cr) + 1
        # The start of a line that goes on in the next read, and its length so far.
        pending_cr = int(end > lines_end and chunk[end - 1] == _CR)
        tail = end - lines_end - pending_cr
        if not lines_end and tail <= MAX_LINE_BYTES:
            filled = end
            continue
        if tail <= MAX_LINE_BYTES:
            kept, next_cut, next_head = chunk[lines_end:end], 0, 0
        else:  # too long: keep its head, and drop the rest of it, this read's and the next ones'
            next_head = _utf8_head(chunk, lines_end, MAX_LINE_BYTES)
            kept = chunk[lines_end : lines_end + next_head] + b"\r" * pending_cr
            next_cut = tail
        if lines_end:
            del chunk[lines_end:]
            yield from _cut_long_lines(_text_line_ends(chunk), cut)
        chunk[: len(kept)] = kept
        filled, cut, head = len(kept), next_cut, next_head


def _cut_long_lines(chunk: bytearray, cut: int) -> Iterator[tuple[bytearray, int]]:
    """`chunk` (whole lines ending in "\\n"; its first one cut where `cut` says so) as _line_chunks yields
    it: the lines longer than MAX_LINE_BYTES that lie whole in it are cut too, each starting a chunk.

    The line at `pos` is that long when no "\\n" lies in the next MAX_LINE_BYTES + 1 bytes; each look
    finds the last newline of that window, so a chunk of ordinary lines takes CHUNK_BYTES /
    MAX_LINE_BYTES short searches, and is passed on as it is.
    """
    limit = MAX_LINE_BYTES
    start = pos = 0
    while len(chunk) - pos > limit:
        newline = chunk.rfind(b"\n", pos, pos + limit + 1)
        if newline >= 0:
            pos = newline + 1
            continue
        end = chunk.find(b"\n", pos)
        end = len(chunk) if end < 0 else end
        if pos > start:
            yield chunk[start:pos], cut
            cut = 0
        yield chunk[pos : pos + _utf8_head(chunk, pos, limit)] + chunk[end : end + 1], end - pos
        start = pos = end + 1
        cut = 0
    if not start:
        yield chunk, cut
    elif start < len(chunk):
        yield chunk[start:], cut


def _text_line_ends(chunk: bytearray) -> bytearray:
    """Line ends as text mode reads them: "\\r\\n" and a lone "\\r" become "\\n"."""
    if b"\r" not in chunk:
        return chunk
    if _has_lone_cr(chunk):
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    # A Windows log: deleting every "\r" runs on memchr, about 10 times as fast as replacing "\r\n".
    return chunk.replace(b"\r", b"")


def _has_lone_cr(chunk: bytearray) -> bool:
    """Does a "\\r" end a line by itself (a progress bar redrawing its line)?"""
    if chunk.endswith(b"\r"):
        return True
    found: list[int] = []
    database = _lone_cr_finder()
    hyperscan_scan(database, chunk, lambda *_: found.append(1), hyperscan.Scratch(database))
    return bool(found)


@functools.cache
def _lone_cr_finder() -> hyperscan.Database:
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=[b"\r[^\n]"], elements=1, flags=hyperscan.HS_FLAG_SINGLEMATCH)
    return database


def hyperscan_scan(
    database: hyperscan.Database,
    chunk: Chunk,
    on_match: Callable[[int, int, int, int, object], bool | None],
    scratch: hyperscan.Scratch,
) -> None:
    """Database.scan, typed for a bytearray too: the stub says str or bytes, the extension takes any buffer."""
    database.scan(chunk, match_event_handler=on_match, scratch=scratch)  # type: ignore[type-var]
