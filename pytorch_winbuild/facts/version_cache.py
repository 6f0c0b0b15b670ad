"""Answers of `TOOL --version` and of the Python query kept between runs, so a plan does not start
cmake, ninja, git, nvcc or every installed Python again while none of them changed.

Keyed by the command line and the executable's resolved path, size and modification time, so a changed tool is asked
again; only answers that are a property of the file are kept. A missing, broken or unwritable cache file only means
the tools are asked, never an error. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from pytorch_winbuild import atomic_file
from pytorch_winbuild.facts.probe_common import CommandResult, Runner, run_command
from pytorch_winbuild.facts.probe_pythons import PYTHON_QUERY, answer_folders
from pytorch_winbuild.json_file import JsonValue, read_json

VERSION_FLAGS = frozenset({"--version", "-version", "version", "-V"})
FORMAT = 1


def _identity(executable: str) -> str | None:
    """Path, size and mtime of the file a command starts; None when it is not a file we can stat."""
    try:
        path = Path(executable).resolve()
        stat = path.stat()
    except (OSError, RuntimeError):
        return None
    return f"{path}|{stat.st_size}|{stat.st_mtime_ns}"


def _stamps(folders: Sequence[str]) -> dict[str, int | None]:
    """Each folder's modification time (None: absent): adding or removing a package changes it."""
    stamps: dict[str, int | None] = {}
    for folder in folders:
        try:
            stamps[folder] = Path(folder).stat().st_mtime_ns
        except OSError:
            stamps[folder] = None
    return stamps


def _key(args: Sequence[str]) -> tuple[str | None, bool]:
    """The answer's key (None: never kept), and whether it is the Python query."""
    python = tuple(args[1:]) == PYTHON_QUERY
    identity = _identity(args[0]) if args and (args[-1] in VERSION_FLAGS or python) else None
    if identity is None:
        return None, python
    return json.dumps([identity, args[0], *args[1:]] if python else [identity, *args[1:]]), python


class VersionCache:
    """A Runner that answers version queries from `path` when the executable is unchanged."""

    def __init__(self, path: Path, run: Runner = run_command) -> None:
        self.path = path
        self._run = run
        self._lock = threading.Lock()
        self._changed = False
        self._answers: dict[str, object] = {}  # each a dict[str, object] when this process wrote it, else checked
        try:
            data: JsonValue = read_json(path)
            answers = data.get("answers") if isinstance(data, dict) and data.get("format") == FORMAT else None
            if isinstance(answers, dict):
                self._answers = dict(answers)
        except (OSError, ValueError):
            pass

    def __call__(self, args: Sequence[str], timeout: float) -> CommandResult:
        key, python = _key(args)
        if key is not None:
            with self._lock:
                kept = self._answers.get(key)
            stdout, stderr = (kept.get("stdout"), kept.get("stderr")) if isinstance(kept, dict) else (None, None)
            watched = kept.get("watch") if isinstance(kept, dict) else None
            current = not python or (isinstance(watched, dict) and _stamps(list(watched)) == watched)
            if isinstance(stdout, str) and isinstance(stderr, str) and current:
                return CommandResult(0, stdout, stderr)
        result = self._run(args, timeout)
        folders = answer_folders(args[0], result.stdout) if python and result.ok else ()
        if key is not None and result.ok and folders is not None:
            answer: dict[str, object] = {"stdout": result.stdout, "stderr": result.stderr}
            if python:
                answer["watch"] = _stamps(folders)
            with self._lock:
                self._answers[key] = answer
                self._changed = True
        return result

    def save(self) -> None:
        """Write the answers if any is new: whole or not at all (a temporary file renamed over it)."""
        if not self._changed:
            return
        text = json.dumps({"format": FORMAT, "answers": self._answers}, indent=1, sort_keys=True)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_file.write_text(self.path, text)
        except OSError:
            pass  # a read-only cache folder: the next run asks the tools again
