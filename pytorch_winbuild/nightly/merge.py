"""`invoke nightly-merge`: a fleet's parts and the last published channel, joined into one channel.

It makes the channel one runner would have made of the same night. With `--plan` an unchanged entry shows skipped and
a lost runner's entry missing; two parts claiming one entry are refused (exit 2). Idempotent, and all or nothing:
every part checked first, the channel made in a staging folder and put in place with two renames.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pytorch_winbuild import atomic_file
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.json_file import JsonObject, JsonValue, read_json
from pytorch_winbuild.nightly.channel_history import ChannelHistory, LastGood, read_channel
from pytorch_winbuild.nightly.dashboard import DEFAULT_NIGHTS, entry_name, write_dashboard
from pytorch_winbuild.nightly.entry import EntryResult
from pytorch_winbuild.nightly.fleet_part import PATH_FIELDS, Part, read_part, result_from_record
from pytorch_winbuild.nightly.fleet_plan import FleetPlan, PlannedEntry, load_plan
from pytorch_winbuild.nightly.index import file_sha256, write_index, write_text_file
from pytorch_winbuild.nightly.matrix import load_settings
from pytorch_winbuild.nightly.retention import WHEEL_RECORD_SUFFIX, apply_retention, date_folders, published
from pytorch_winbuild.nightly.summary import NightlySummary, publish_to_github, render_markdown
from pytorch_winbuild.text.redact import redact_text

# --------------------------------------------------------------------------------------------
# Placing files
# --------------------------------------------------------------------------------------------


def _same_file(source: Path, target: Path) -> bool:
    try:
        one, two = source.stat(), target.stat()
    except OSError:
        return False
    return (one.st_dev, one.st_ino) == (two.st_dev, two.st_ino) or (
        one.st_size == two.st_size and one.st_mtime_ns == two.st_mtime_ns
    )


def place(source: Path, target: Path) -> None:
    """`target` becomes a copy of `source` (a hard link where it can be, times kept), whole (atomic_file.copy);
    nothing is written when it already is one."""
    if _same_file(source, target):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.copy(source, target)


def plain_file(root: Path, parts: Sequence[str]) -> Path | None:
    """root/parts… when no component below `root` is a link and the last is a regular file, else None: a link
    anywhere on the way may lead out of the part (an ssh key, /dev/zero), so none is followed."""
    path, mode = root, 0
    for part in parts:
        path = path / part
        try:
            mode = path.lstat().st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            return None
    return path if parts and stat.S_ISREG(mode) else None


def plain_files(folder: Path) -> Iterator[Path]:
    """The regular files under `folder` (itself no link), reached through no link, in a stable order."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for root, folders, files in os.walk(folder, followlinks=False):
        folders[:] = sorted(name for name in folders if not os.path.islink(os.path.join(root, name)))
        for name in sorted(files):
            path = Path(root, name)
            with contextlib.suppress(OSError):
                if stat.S_ISREG(path.lstat().st_mode):
                    yield path


def copy_channel(previous: Path, output_dir: Path) -> int:
    """The date folders of the channel in `previous` into `output_dir` (not its pages: they are made again), read
    through no link; how many files were placed."""
    count = 0
    for _, folder in date_folders(previous):
        for path in plain_files(folder):
            relative = path.relative_to(previous)
            if published(relative):
                place(path, output_dir / relative)
                count += 1
    return count


# --------------------------------------------------------------------------------------------
# The night
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MergedPart:
    """One part of the night, as the merged summary lists it."""

    part: str  # its folder
    host: str
    started: str  # ISO time
    seconds: float
    entries: tuple[str, ...]

    def to_dict(self) -> JsonObject:
        return {
            "part": self.part,
            "host": self.host,
            "started": self.started,
            "seconds": self.seconds,
            "entries": list(self.entries),
        }


@dataclass
class MergedSummary(NightlySummary):
    """A night's summary as one runner writes it, plus the parts it was made of."""

    parts: list[MergedPart] = field(default_factory=list)
    plan: str | None = None  # the plan file's path

    def to_dict(self) -> JsonObject:
        return {**super().to_dict(), "parts": [part.to_dict() for part in self.parts], "plan": self.plan}

    def write_into(self, folder: Path) -> None:
        """Both files into `folder` (the night's folder of the staged channel), each through a temporary one
        (index.write_text_file: readable by a web server, as the pages)."""
        import json

        folder.mkdir(parents=True, exist_ok=True)
        runners = "".join(
            f"- `{part.host}`: {', '.join(part.entries) or '(no entry)'} — started {part.started}\n"
            for part in self.parts
        )
        markdown = render_markdown(self) + (f"\nRunners:\n\n{runners}" if runners else "")
        for path, text in (
            (self.json_path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"),
            (self.markdown_path, markdown),
        ):
            write_text_file(folder / path.name, redact_text(text))


@dataclass(frozen=True)
class MergeResult:
    summary: MergedSummary
    index_describe: str
    dashboard: Path

    def describe(self) -> str:
        summary = self.summary
        return (
            f"== nightly merge {summary.date}: {summary.headline()} ==\n"
            f"  summary   {summary.json_path}\n"
            f"  index     {summary.run_dir.parent / 'simple' / 'index.html'} ({self.index_describe})\n"
            f"  dashboard {self.dashboard}"
        )


def _refuse_double_claims(parts: Sequence[Part]) -> dict[str, Part]:
    claims: dict[str, Part] = {}
    for part in parts:
        for record in part.records:
            name = entry_name(record)
            if name in claims:
                other = claims[name]
                where = "twice in the part " + part.label if other is part else f"in {other.label} and {part.label}"
                raise ConfigurationError(
                    f"entry '{name}' is {where}; a night builds each entry once, so one of them is from another "
                    "night or the entry was built twice, and the merge cannot tell which to publish.",
                    fix="pass each entry's part once: the parts of this night's run (the artifacts nightly-part-NAME "
                    "of one workflow run).",
                )
            claims[name] = part
    return claims


def _copy_part_files(
    part: Part, record: JsonObject, stage: _Stage, run_dir: Path
) -> tuple[dict[str, str | None], list[str]]:
    """The entry's own folder of the part's night into the channel, and the record's paths as they are there (None:
    it named nothing in that folder); with a note for each file the record named elsewhere. A part publishes only
    regular files of its own entries' folders for its own night, reached through no link: never another entry's
    (a part claiming B cannot replace A's wheel), another night's, or a file outside the part."""
    name = entry_name(record)
    night_folder = part.night.folder
    for path in plain_files(night_folder / name):
        relative = path.relative_to(night_folder / name)
        wheel = path.name.endswith((".whl", ".whl" + WHEEL_RECORD_SUFFIX))  # only the record's, once checked
        if not night_folder.is_symlink() and published(relative) and not wheel:
            place(path, run_dir / name / relative)
    paths: dict[str, str | None] = {}
    notes: list[str] = []
    for key in PATH_FIELDS:
        parts = part.relative(record.get(key))
        own = parts is not None and parts[:2] == (night_folder.name, name)
        source = plain_file(part.folder, parts) if own and parts is not None else None
        if source is None or parts is None:
            paths[key] = None
            if record.get(key):
                notes.append(
                    f"the part's {key} {str(record.get(key))[:200]!r} is not a regular file of this entry's own folder "
                    "for its night (reached through no link): not published"
                )
            continue
        target = run_dir.joinpath(*parts[1:])
        recorded = plain_file(part.folder, (*parts[:-1], parts[-1] + WHEEL_RECORD_SUFFIX)) if key == "wheel" else None
        changed = _changed_since_built(source, recorded)
        if changed is not None:
            paths[key] = None
            notes.append(f"the part's wheel {source.name} is not published: {changed}")
            continue
        place(source, target)
        if recorded is not None:
            place(recorded, target.with_name(target.name + WHEEL_RECORD_SUFFIX))
        paths[key] = str(stage.final(target))
    return paths, notes


def _changed_since_built(wheel: Path, recorded: Path | None) -> str | None:
    """Why the wheel is not the one its runner built (the SHA-256 it recorded beside the wheel, entry.py), or None."""
    if recorded is None:
        return None
    record: JsonValue
    try:
        record = read_json(recorded)
    except (OSError, ValueError) as error:
        return f"its runner's record {recorded.name} cannot be read ({error})"
    expected = record.get("sha256") if isinstance(record, dict) else None
    if expected is None:
        return None  # a part from before runners recorded the hash
    actual = file_sha256(wheel)
    return None if actual == expected else f"its SHA-256 is {actual}, and its runner recorded {str(expected)[:64]}"


def _standing(
    last: LastGood | None, planned: PlannedEntry, result: str, note: str, error: str | None, stage: _Stage
) -> EntryResult:
    """An entry no part built tonight, shown on its last good build (its wheel stays in the index)."""
    record: JsonObject = dict(last.record) if last else {"name": planned.name}
    record["name"] = planned.name
    entry = result_from_record(record, {"wheel": str(stage.final(last.wheel)) if last else None})
    entry.result, entry.stage, entry.error = result, None, error
    entry.seconds, entry.stages, entry.compiler_cache = 0.0, {}, None
    entry.log = entry.report = entry.first_error = entry.exit_code = None
    entry.diagnosis, entry.notes = [], [note]
    if result == "missing":
        entry.revision = entry.config_hash = None
    return entry


def _planned_result(planned: PlannedEntry, history: ChannelHistory, stage: _Stage) -> EntryResult:
    last = history.last_good.get(planned.name)
    kept = (
        f"its last good wheel, from {last.when}, stays in the index" if last else "it has no good build to fall back on"
    )
    if planned.build:
        return _standing(
            last,
            planned,
            "missing",
            f"missing: planned for a runner ({planned.reason}), which sent no part; {kept}.",
            "no part came back for this entry: its runner stopped before uploading it (it died, lost its "
            "connection, timed out or was cancelled), or its build job never started (no runner with the labels "
            f"{', '.join(planned.runs_on)}).",
            stage,
        )
    if last is None:
        return _standing(
            None,
            planned,
            "not run",
            f"not run: the plan left it out ({planned.reason}), and the previous channel holds no good build of it.",
            None,
            stage,
        )
    return _standing(last, planned, "skipped", f"skipped: {planned.reason} (the plan left it out).", None, stage)


def _night_time(plan: FleetPlan | None, parts: Sequence[Part]) -> datetime:
    if plan is not None:
        moment = datetime.fromisoformat(plan.planned)
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    return min(part.started for part in parts).astimezone(UTC)


def merge_night(
    parts: Sequence[Path],
    output_dir: Path,
    *,
    previous: Path | None = None,
    plan: FleetPlan | None = None,
    plan_path: Path | None = None,
    keep_days: int | None = None,
    nights: int = DEFAULT_NIGHTS,
) -> MergeResult:
    """Join `parts` (runners' output folders) and the channel in `previous` into the channel `output_dir`.

    Everything is read and checked first; the channel is then made in a staging folder beside `output_dir` (the
    current channel's files hard-linked into it) and put in place with two renames, so a merge that fails part
    way (a full disk, a signal) leaves the published channel as it was."""
    loaded = [read_part(folder) for folder in parts]
    claims = _refuse_double_claims(loaded)
    if not loaded and plan is None:
        raise ConfigurationError(
            "there is nothing to merge: no part and no plan.",
            fix="pass the parts with --part (one per runner's output folder), and the night's plan with --plan.",
        )
    output_dir = output_dir.absolute()
    if previous is not None and previous.resolve() != output_dir.resolve() and not previous.is_dir():
        raise ConfigurationError(
            f"--previous {previous} is not a folder.", fix="pass the channel published last night, or leave it out."
        )
    stage = _Stage.begin(output_dir)
    try:
        if previous is not None and previous.resolve() != output_dir.resolve():
            copy_channel(previous, stage.folder)
        result = _merge_into(stage, loaded, claims, plan, plan_path, keep_days, nights)
    except BaseException:
        stage.abandon()
        raise
    stage.publish()
    return result


@dataclass(frozen=True)
class _Stage:
    """The channel being made: `folder`, beside `output_dir`, where every file is written; paths are recorded as
    they will be once it is published in place of `output_dir`."""

    folder: Path
    output_dir: Path

    @classmethod
    def begin(cls, output_dir: Path) -> _Stage:
        folder = output_dir.with_name(f".{output_dir.name}.merging")
        shutil.rmtree(folder, ignore_errors=True)  # a merge that died before it published
        folder.mkdir(parents=True)
        for path in plain_files(output_dir):
            place(path, folder / path.relative_to(output_dir))
        return cls(folder, output_dir)

    def final(self, path: Path) -> Path:
        """Where a file of the staging folder will be once it is published."""
        return self.output_dir / path.relative_to(self.folder)

    def abandon(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def publish(self) -> None:
        """The staged channel in place of the old one: two renames. Where the old folder cannot be renamed (a
        mount point, or the current folder on Windows), its files are replaced by the staged ones instead."""
        old = self.output_dir.with_name(f".{self.output_dir.name}.old-{secrets.token_hex(4)}")
        try:
            if self.output_dir.exists():
                atomic_file.replace(self.output_dir, old)
        except OSError:
            self._publish_in_place()
            return
        atomic_file.replace(self.folder, self.output_dir)
        shutil.rmtree(old, ignore_errors=True)

    def _publish_in_place(self) -> None:
        staged = {path.relative_to(self.folder) for path in plain_files(self.folder)}
        for relative in sorted(staged):
            place(self.folder / relative, self.output_dir / relative)
        for path in list(plain_files(self.output_dir)):
            if path.relative_to(self.output_dir) not in staged:
                path.unlink()
        for root, folders, _ in os.walk(self.output_dir, topdown=False):
            for name in folders:
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(root, name))  # the date folders retention emptied
        self.abandon()


def _merge_into(
    stage: _Stage,
    loaded: list[Part],
    claims: dict[str, Part],
    plan: FleetPlan | None,
    plan_path: Path | None,
    keep_days: int | None,
    nights: int,
) -> MergeResult:
    """The night merged into the staging folder (see merge_night)."""
    if keep_days is None:
        keep_days = plan.keep_days if plan else load_settings().keep_days  # build_config/nightly.toml's
    started = _night_time(plan, loaded)
    day = started.date().isoformat()
    summary = MergedSummary(
        started=started.isoformat(timespec="seconds"),
        date=day,
        host=", ".join(sorted({part.host for part in loaded})) or "no runner",
        matrix=(plan.matrix if plan else "") or next((str(p.night.data.get("matrix")) for p in loaded), ""),
        run_dir=stage.output_dir / day,
        stamp=started.strftime("%Y%m%d-%H%M%S"),
        forced=plan.forced if plan else any(p.night.data.get("forced") is True for p in loaded),
        plan=str(plan_path) if plan_path else None,
    )
    # What the channel stood on before tonight (this night's own summary, from an earlier merge, left out).
    history = read_channel(stage.folder, leave_out=stage.folder / day / summary.json_path.name)
    built: dict[str, EntryResult] = {}
    for part in loaded:
        for record in part.records:
            paths, notes = _copy_part_files(part, record, stage, stage.folder / day)
            built[entry_name(record)] = result = result_from_record(record, paths)
            result.notes += notes
    order = [planned.name for planned in plan.entries] if plan else []
    order += [name for name in claims if name not in order]
    planned_by_name = {planned.name: planned for planned in plan.entries} if plan else {}
    summary.entries = [
        built[name] if name in built else _planned_result(planned_by_name[name], history, stage) for name in order
    ]
    ends = [part.started + timedelta(seconds=part.seconds) for part in loaded]
    summary.seconds = max([(end - started).total_seconds() for end in ends] + [0.0])
    summary.parts = [
        MergedPart(
            part=part.label,
            host=part.host,
            started=part.started.isoformat(timespec="seconds"),
            seconds=part.seconds,
            entries=tuple(entry_name(record) for record in part.records),
        )
        for part in loaded
    ]
    retention = apply_retention(stage.folder, keep_days, started.date())
    summary.retention = replace(
        retention,
        removed_folders=tuple(str(stage.final(Path(p))) for p in retention.removed_folders),
        kept_wheels=tuple(str(stage.final(Path(p))) for p in retention.kept_wheels),
    )
    summary.write_into(stage.folder / day)
    index = write_index(stage.folder)
    dashboard = write_dashboard(
        stage.folder, keep=nights, index=index, generated=started + timedelta(seconds=summary.seconds)
    )
    return MergeResult(summary, index.describe(), stage.final(dashboard))


# --------------------------------------------------------------------------------------------
# The command: invoke nightly-merge (faces/nightly_commands.py checks its flags)
# --------------------------------------------------------------------------------------------


def run_merge(
    parts: Sequence[Path],
    output_dir: Path,
    *,
    previous: Path | None,
    plan_path: Path | None,
    keep_days: int | None,
    environ: dict[str, str] | None = None,
) -> MergeResult:
    """The merge as `invoke nightly-merge` runs it: the plan read, the night merged and described, GitHub told."""
    plan = load_plan(plan_path) if plan_path else None
    result = merge_night(parts, output_dir, previous=previous, plan=plan, plan_path=plan_path, keep_days=keep_days)
    print(result.describe(), flush=True)
    publish_to_github(result.summary, dict(os.environ if environ is None else environ))
    return result
