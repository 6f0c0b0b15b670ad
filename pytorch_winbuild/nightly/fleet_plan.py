"""The night's plan for a fleet: which entries to build, on which runners, longest first.

`invoke nightly --matrix-json` prints GitHub Actions' `strategy.matrix` jobs; GitHub is the scheduler, this decides
what goes in. An entry is left out when unchanged as seen from a GitHub-hosted runner (same commit, same matrix table
as its last good build); the plan file lets `nightly-merge --plan` tell skipped from missing.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pytorch_winbuild import atomic_file
from pytorch_winbuild.builder.source import remote_commits
from pytorch_winbuild.errors import ConfigurationError, WinbuildError
from pytorch_winbuild.json_file import JsonObject, JsonValue, read_json
from pytorch_winbuild.nightly.channel_history import ChannelHistory, read_channel
from pytorch_winbuild.nightly.matrix import MAX_KEEP_DAYS, Entry, Matrix
from pytorch_winbuild.nightly.runner_labels import LabelRules, entry_labels

MAX_JOBS = 256  # GitHub Actions: a matrix makes at most 256 jobs per workflow run
PLAN_FORMAT = 1
REMOTE_QUERIES_AT_ONCE = 8  # ls-remote waits on the network, not the CPU


@dataclass(frozen=True)
class PlannedEntry:
    name: str
    runs_on: tuple[str, ...]
    build: bool
    reason: str
    seconds: float | None  # its last successful build's duration, from the channel

    def to_dict(self) -> JsonObject:
        return {
            "entry": self.name,
            "runs-on": list(self.runs_on),
            "build": self.build,
            "reason": self.reason,
            "seconds": self.seconds,
        }


@dataclass(frozen=True)
class FleetPlan:
    planned: str  # ISO time: names the merged night (its date folder and summary)
    matrix: str
    keep_days: int
    forced: bool
    entries: tuple[PlannedEntry, ...]  # the selected entries, in the matrix's order

    def builds(self) -> list[PlannedEntry]:
        """The entries to build, longest first (never built first, then by recorded duration; ties: matrix order)."""
        order = {entry.name: index for index, entry in enumerate(self.entries)}
        return sorted(
            (entry for entry in self.entries if entry.build),
            key=lambda entry: (entry.seconds is not None, -(entry.seconds or 0.0), order[entry.name]),
        )

    def matrix_json(self) -> JsonObject:
        """`strategy.matrix` for GitHub Actions: include objects only (no other key, which would be a dimension)."""
        return {"include": [{"entry": entry.name, "runs-on": list(entry.runs_on)} for entry in self.builds()]}

    def to_dict(self) -> JsonObject:
        return {
            "format": PLAN_FORMAT,
            "planned": self.planned,
            "matrix": self.matrix,
            "keep_days": self.keep_days,
            "forced": self.forced,
            "entries": [entry.to_dict() for entry in self.entries],
        }

    def describe(self) -> str:
        """One line per entry, for a person (stderr: stdout is the JSON)."""
        lines = [f"-- nightly plan: {len(self.builds())} of {len(self.entries)} entries to build"]
        for rank, entry in enumerate(self.builds(), 1):
            took = f", last build {entry.seconds / 3600:.1f} h" if entry.seconds is not None else ""
            lines.append(f"   {rank}. {entry.name} on [{', '.join(entry.runs_on)}]: {entry.reason}{took}")
        lines += [f"   -  {entry.name}: {entry.reason}" for entry in self.entries if not entry.build]
        return "\n".join(lines)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_file.write_text(path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", newline="\n")


def _remote_heads(entries: Sequence[Entry], work_dir: Path) -> dict[tuple[str, str | None], str | None]:
    """(repo, ref) → the commit the remote names now; one ls-remote per repository, the repositories at once.
    A repository that cannot answer is left out: its entries are built (the runner reports the real error)."""
    by_repo: dict[str, list[Entry]] = {}
    for entry in entries:
        by_repo.setdefault(entry.repo, []).append(entry)
    heads: dict[tuple[str, str | None], str | None] = {}

    def ask(repo: str) -> None:
        first = by_repo[repo][0]
        try:
            answers = remote_commits(repo, [entry.ref for entry in by_repo[repo]], work_dir)
        except WinbuildError as error:  # stdout is the matrix: messages go to stderr
            print(f"-- [{first.name}] {error.paragraph()}", file=sys.stderr, flush=True)
            return
        for ref, commit in answers.items():
            heads[(repo, ref)] = commit

    with ThreadPoolExecutor(max_workers=REMOTE_QUERIES_AT_ONCE) as pool:
        list(pool.map(ask, by_repo))
    return heads


def _decide(
    entry: Entry, history: ChannelHistory, heads: dict[tuple[str, str | None], str | None], force: bool
) -> tuple[bool, str]:
    if force:
        return True, "forced (--force)"
    last = history.last_good.get(entry.name)
    if last is None:
        return True, "no good build of it in the published channel"
    if last.table_hash is None:
        return True, f"its build of {last.when} recorded no matrix table (a nightly before the fleet's)"
    if last.table_hash != entry.table_hash():
        return True, f"its matrix table changed since the build of {last.when}"
    head = heads.get((entry.repo, entry.ref))
    ref = entry.ref or "the default branch"
    if head is None:
        return True, f"the remote did not say which commit {ref} names now"
    if head != last.revision:
        return True, f"{ref} is now {head[:12]} (was {(last.revision or '')[:12]} on {last.when})"
    return False, f"unchanged since {last.when}: {ref} is still {head[:12]} and its matrix table is the same"


def plan_fleet(
    matrix: Matrix,
    entries: Sequence[Entry],
    *,
    previous: Path | None,
    force: bool,
    rules: LabelRules,
    work_dir: Path,
    now: datetime | None = None,
) -> FleetPlan:
    """Decide every entry of `entries` against the channel in `previous` (none: the first night, all built)."""
    history = read_channel(previous)
    for problem in history.problems:
        print(f"-- warning: {previous}: {problem}", file=sys.stderr, flush=True)
    candidates = [entry for entry in entries if not force and entry.name in history.last_good]
    heads = _remote_heads(candidates, work_dir) if candidates else {}
    planned = []
    for entry in entries:
        build, reason = _decide(entry, history, heads, force)
        planned.append(
            PlannedEntry(entry.name, entry_labels(entry, rules), build, reason, history.seconds.get(entry.name))
        )
    plan = FleetPlan(
        planned=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        matrix=matrix.source,
        keep_days=matrix.settings.keep_days,
        forced=force,
        entries=tuple(planned),
    )
    builds = len(plan.builds())
    if builds > MAX_JOBS:
        raise ConfigurationError(
            f"{builds} entries of {matrix.source} are to be built tonight, and GitHub Actions runs at most "
            f"{MAX_JOBS} jobs of one matrix.",
            fix="split the matrix into several files (one workflow, or one --only list, per file), or build fewer "
            "entries a night.",
        )
    return plan


# --------------------------------------------------------------------------------------------
# The plan file, as nightly-merge reads it
# --------------------------------------------------------------------------------------------


def _bad(source: Path, problem: str) -> ConfigurationError:
    return ConfigurationError(
        f"the plan file {source} {problem}.",
        fix="pass the file `invoke nightly --matrix-json --plan-file FILE` wrote for this night.",
    )


def _planned_entry(item: JsonValue, source: Path) -> PlannedEntry:
    from pytorch_winbuild.nightly.index import ENTRY_NAME

    name = item.get("entry") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(name, str) or not ENTRY_NAME.fullmatch(name):
        raise _bad(source, f"lists an entry that has no valid name ({str(item)[:80]})")
    build, labels, reason, seconds = item.get("build"), item.get("runs-on"), item.get("reason"), item.get("seconds")
    if (
        not isinstance(build, bool)
        or not isinstance(labels, list)
        or not all(isinstance(label, str) for label in labels)
        or not isinstance(reason, str)
        or (seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)))
    ):
        raise _bad(source, f"has an entry '{name}' without build, runs-on, reason or seconds as written")
    runs_on = tuple(label for label in labels if isinstance(label, str))  # every label, checked above
    return PlannedEntry(name, runs_on, build, reason, None if seconds is None else float(seconds))


def load_plan(source: Path) -> FleetPlan:
    """The plan file `plan_fleet` wrote, checked: a broken one is refused by name, not half used."""
    data: JsonValue
    try:
        data = read_json(source)
    except OSError as error:
        raise _bad(source, f"cannot be read ({error.strerror or error})") from None
    except ValueError as error:
        raise _bad(source, f"is not a plan ({error})") from None
    items = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT or not isinstance(items, list):
        raise _bad(source, f"is not a plan of format {PLAN_FORMAT}")
    planned, keep_days = data.get("planned"), data.get("keep_days")
    try:
        datetime.fromisoformat(str(planned))
    except ValueError:
        raise _bad(source, f"has no valid time 'planned' ({str(planned)[:40]})") from None
    if isinstance(keep_days, bool) or not isinstance(keep_days, int) or not 1 <= keep_days <= MAX_KEEP_DAYS:
        raise _bad(source, f"has no keep_days from 1 to {MAX_KEEP_DAYS}")
    entries = tuple(_planned_entry(item, source) for item in items)
    names = [entry.name for entry in entries]
    if len(set(names)) != len(names):
        raise _bad(source, "lists an entry twice")
    return FleetPlan(
        planned=str(planned),
        matrix=str(data.get("matrix") or ""),
        keep_days=keep_days,
        forced=bool(data.get("forced")),
        entries=entries,
    )
