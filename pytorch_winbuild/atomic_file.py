"""Files written whole or not at all: a temporary file beside the target, renamed over it.

A reader (another run, a crash halfway, Ctrl-C) finds the old content or the new, never half of
it, and no temporary file stays behind. The temporary file is created by mkstemp (mode 0600, as
every cache file of ours is); a file meant for the user (`--output`, faces/flags.py) sets its own mode.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_text(path: Path, text: str, *, newline: str | None = None) -> None:
    """Write `text` as UTF-8 to `path` through `.NAME.*.tmp` in its folder (which must exist).

    `newline` is open()'s: None writes os.linesep, "\\n" the same bytes on every system."""
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline=newline) as stream:
            stream.write(text)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
