"""Each entry's last success (revision, configuration hash, wheel), kept in <output_dir>/state.json.

It only decides whether a night can skip an entry, so an unreadable file costs a rebuild, not a
failure: the nightly says so and starts afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from pytorch_winbuild import atomic_file
from pytorch_winbuild.json_file import read_json

STATE_FILE = "state.json"
STATE_FORMAT = 1


@dataclass(frozen=True)
class LastSuccess:
    revision: str
    config_hash: str
    wheel: str
    date: str  # the run's date folder
    finished: str  # ISO time


class NightlyState:
    def __init__(self, output_dir: Path, log: Callable[[str], None] = print) -> None:
        self.path = output_dir / STATE_FILE
        self.entries: dict[str, LastSuccess] = {}
        try:
            data = read_json(self.path)
            self.entries = {name: LastSuccess(**fields) for name, fields in data["entries"].items()}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as problem:
            log(f"-- {self.path} is unreadable ({problem}); every entry is built this time.")

    def last_success(self, entry: str) -> LastSuccess | None:
        return self.entries.get(entry)

    def record(self, entry: str, success: LastSuccess) -> None:
        """Remember a success at once, so a later crash of the run does not forget it."""
        self.entries[entry] = success
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "format": STATE_FORMAT,
            "entries": {name: asdict(value) for name, value in sorted(self.entries.items())},
        }
        atomic_file.write_json(self.path, data, mode=atomic_file.SHARED)
