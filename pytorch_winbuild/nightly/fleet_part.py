"""One runner's part of a fleet's night: the output folder of `invoke nightly --only NAME --output-dir PART`.

A part contributes its newest night (the run it was made for): that summary's entries, and the
files they name. Its summary was written on the runner, maybe on Windows, so its paths are
read as that system's and re-rooted here; a path that leaves the part is dropped, never
followed. Every value is checked before the merge uses it: a part is an artifact that came over
the network from a build machine, and a broken one is refused by name, not half merged.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.json_file import JsonObject, JsonValue
from pytorch_winbuild.nightly.dashboard import Night, entry_name, load_nights
from pytorch_winbuild.nightly.entry import EntryResult
from pytorch_winbuild.nightly.fleet_plan import MAX_JOBS
from pytorch_winbuild.nightly.index import ENTRY_NAME
from pytorch_winbuild.nightly.retention import DATE_FOLDER

RESULTS = ("success", "failed", "skipped", "interrupted", "not run", "missing")
MAX_NAME = 100  # characters of an entry name: a folder name on every runner's file system, with room to spare
MAX_SECONDS = 7 * 24 * 3600  # a night's length: a part saying more is not a night
EARLIEST, LATEST = 2000, 9000  # the years a night's start may fall in (dates stay far inside datetime's range)
SUMMARY_NAME = re.compile(r"nightly-.*\.(json|md)")  # a summary's file name, beside the entries' folders
PATH_FIELDS = ("wheel", "log", "report")
_TEXT_FIELDS = ("repo", "ref", "cuda", "stage", "revision", "config_hash", "python", "error", "table_hash")


@dataclass(frozen=True)
class Part:
    folder: Path
    night: Night  # its newest summary

    @property
    def label(self) -> str:
        return str(self.folder)

    @property
    def records(self) -> list[JsonObject]:
        return self.night.entries

    @property
    def host(self) -> str:
        host = self.night.data.get("host")
        return host if isinstance(host, str) and host else "?"

    @property
    def started(self) -> datetime:
        return _time(self.night.data.get("started")) or datetime.fromisoformat(f"{self.night.day}T00:00:00+00:00")

    @property
    def seconds(self) -> float:
        return _number(self.night.data.get("seconds"))

    def relative(self, value: JsonValue) -> tuple[str, ...] | None:
        """A recorded path as parts under the part's folder (<date>/<entry>/<file>), or None when it names
        nothing inside the part."""
        run_dir = self.night.data.get("run_dir")
        if not isinstance(value, str) or not isinstance(run_dir, str) or not value or "\x00" in value:
            return None
        flavour: type[PurePath] = (
            PureWindowsPath if "\\" in run_dir or PureWindowsPath(run_dir).drive else PurePosixPath
        )
        try:
            parts = flavour(value).relative_to(flavour(run_dir).parent).parts
        except ValueError:
            return None
        if len(parts) < 3 or not DATE_FOLDER.fullmatch(parts[0]) or any(p in ("", ".", "..") for p in parts):
            return None
        return parts


def _time(value: object) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return 0.0
    return float(value)


def read_part(folder: Path) -> Part:
    """The part in `folder`: its newest night, every summary of it readable."""
    if not folder.is_dir():
        raise ConfigurationError(
            f"the part {folder} is not a folder.",
            fix="pass the output folder of a runner's `invoke nightly --only NAME --output-dir PART` (the workflow "
            "uploads it as the artifact nightly-part-NAME).",
        )
    nights, problems = load_nights(folder)
    if problems:
        raise ConfigurationError(
            f"the part {folder} holds a summary that cannot be used: {problems[0]}.",
            fix="build that entry again, or leave the part out (its entry is then shown as missing).",
        )
    if not nights:
        raise ConfigurationError(
            f"the part {folder} holds no nightly summary (<date>/nightly-*.json).",
            fix="pass the output folder of a runner's `invoke nightly --only NAME --output-dir PART`.",
        )
    part = Part(folder, nights[-1])
    _check_night(part)
    return part


def _refused(part_folder: Path, what: str) -> ConfigurationError:
    return ConfigurationError(
        f"the part {part_folder} {what}.", fix="pass only parts the nightly wrote, or leave it out."
    )


def _check_night(part: Part) -> None:
    """What a runner's summary says, bounded before the merge writes anything: at most as many entries as a night's
    plan has jobs, names that are entry names (never a summary's file name), a start and a length a night has."""
    if len(part.records) > MAX_JOBS:
        raise _refused(part.folder, f"has {len(part.records)} entries; a night has at most {MAX_JOBS} (one per job)")
    for record in part.records:
        name = entry_name(record)
        if not ENTRY_NAME.fullmatch(name) or len(name) > MAX_NAME or SUMMARY_NAME.fullmatch(name):
            raise _refused(part.folder, f"has an entry named {name[:60]!r}, which no matrix allows")
    started = part.night.data.get("started")
    moment = _time(started) if started is not None else None
    if started is not None and (moment is None or not EARLIEST <= moment.year <= LATEST):
        raise _refused(part.folder, f"says its night started {str(started)[:40]!r}, not a time a night has")
    seconds = part.night.data.get("seconds")
    if seconds is not None and not (isinstance(seconds, int | float) and 0 <= seconds <= MAX_SECONDS):
        raise _refused(part.folder, f"says its night took {str(seconds)[:40]} seconds, not 0 to {MAX_SECONDS} (a week)")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _first_error(value: JsonValue) -> JsonObject | None:
    """The first error block, when it has the shape the summary's Markdown reads."""
    if not isinstance(value, dict):
        return None
    summary, lines = value.get("summary"), value.get("lines")
    if not isinstance(summary, dict) or "number" not in summary or not isinstance(lines, list):
        return None
    if not all(isinstance(line, dict) and isinstance(line.get("text"), str) for line in lines):
        return None
    return value


def result_from_record(record: JsonObject, paths: dict[str, str | None]) -> EntryResult:
    """An EntryResult from a summary's record, each value of its type (or left out), paths as given."""
    known = {field.name for field in fields(EntryResult)}
    result = EntryResult(entry_name(record), _text(record.get("repo")) or "?", _text(record.get("ref")), "?")
    for name in _TEXT_FIELDS:
        if name in known:
            setattr(result, name, _text(record.get(name)))
    result.cuda = _text(record.get("cuda")) or "?"
    recorded = record.get("result")
    result.result = recorded if isinstance(recorded, str) and recorded in RESULTS else "not run"
    result.seconds = _number(record.get("seconds"))
    stages = record.get("stages")
    result.stages = (
        {str(key): _number(value) for key, value in stages.items() if isinstance(value, int | float)}
        if isinstance(stages, dict)
        else {}
    )
    cache = record.get("compiler_cache")
    if isinstance(cache, dict):
        counted = all(
            isinstance(cache.get(key), int) and not isinstance(cache.get(key), bool) for key in ("hits", "misses")
        )
        result.compiler_cache = (
            {**cache, "engine": _text(cache.get("engine")) or "?"}
            if counted
            else {key: value for key, value in cache.items() if key not in ("hits", "misses")}
        )
    exit_code = record.get("exit_code")
    result.exit_code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
    result.first_error = _first_error(record.get("first_error"))
    diagnosis = record.get("diagnosis")
    result.diagnosis = [
        match
        for match in (diagnosis if isinstance(diagnosis, list) else [])
        if isinstance(match, dict) and isinstance(match.get("id"), str) and isinstance(match.get("title"), str)
    ]
    notes = record.get("notes")
    result.notes = [note for note in (notes if isinstance(notes, list) else []) if isinstance(note, str)]
    for name in PATH_FIELDS:
        setattr(result, name, paths.get(name))
    return result
