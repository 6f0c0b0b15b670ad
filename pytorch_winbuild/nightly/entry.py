"""One matrix entry, stage by stage: disk → source → plan → (skip?) → deps → build → collect.

A stage that fails ends the entry with the error's paragraph and the stage's name, and the
nightly goes on with the next entry. The build itself is `invoke build`'s runner in wheel mode
(verification included); its record, which the nightly hands it, gives the first error, the
diagnosis and the cache's numbers, for failures as well as successes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from pytorch_winbuild.builder.memory_record import measured_jobs
from pytorch_winbuild.builder.pipeline import BuildRequest, build_record, run_build
from pytorch_winbuild.builder.report import BuildRecord, Verification, diagnosis_dicts, first_error_dict
from pytorch_winbuild.builder.source import (
    SourceCheckout,
    acquire_source,
    checked_out_commit,
    remote_commit,
    remote_commits,
    remote_url,
)
from pytorch_winbuild.child_processes import stop_cause
from pytorch_winbuild.deps.cache import archive_locator
from pytorch_winbuild.deps.in_use import build_folders, claimed
from pytorch_winbuild.errors import InternalError, InterruptedByUser, VerificationError, WinbuildError
from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.json_file import JsonObject
from pytorch_winbuild.knowledge.model import Knowledge
from pytorch_winbuild.nightly.disk import check_free_space
from pytorch_winbuild.nightly.index import file_sha256
from pytorch_winbuild.nightly.matrix import Entry, Matrix
from pytorch_winbuild.nightly.retention import WHEEL_RECORD_SUFFIX
from pytorch_winbuild.nightly.shared_cache import shared_cache
from pytorch_winbuild.nightly.state import LastSuccess, NightlyState
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import EnvChange, Plan
from pytorch_winbuild.planning.plan_record import plan_to_dict
from pytorch_winbuild.planning.request import Folders, PlanRequest, build_request
from pytorch_winbuild.text.redact import redact_text
from pytorch_winbuild.text.terminal_text import terminal_line

SOURCES_FOLDER = Path("nightly") / "src"  # under the cache folder: one clone per entry
# The plan's fields that decide the wheel; decisions, warnings and whether archives are cached yet do not.
PLAN_IDENTITY_KEYS = (
    "os",
    "pytorch_version",
    "era",
    "python",
    "visual_studio",
    "cuda_host_toolset",
    "vcvars",
    "cuda",
    "generator",
    "compiler_cache",
    "changes",
)


@dataclass(frozen=True)
class RunContext:
    """What every entry of one nightly run shares."""

    matrix: Matrix
    facts: Facts
    knowledge: Knowledge
    cache_dir: Path
    run_dir: Path  # <output_dir>/<date>
    date: str
    state: NightlyState
    force: bool
    mirror: str | None
    mirror_label: str  # how messages name it: --mirror or winbuild.mirror
    # (repo, ref) → the commit the remote names now, asked before the entries run (prefetch_remote_commits)
    remote: dict[tuple[str, str | None], str | None] = field(default_factory=dict)


@dataclass
class EntryResult:
    """What happened to one entry; the summary is made of these."""

    name: str
    repo: str
    ref: str | None
    cuda: str
    result: str = "not run"  # success | failed | skipped | interrupted | not run
    stage: str | None = None  # the stage running, or the one that failed
    revision: str | None = None
    config_hash: str | None = None
    python: str | None = None
    compiler_cache: JsonObject | None = None
    stages: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    wheel: str | None = None
    log: str | None = None
    report: str | None = None
    error: str | None = None
    exit_code: int | None = None
    first_error: JsonObject | None = None
    diagnosis: list[JsonObject] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The entry's table (Entry.table_hash): what a fleet's planner compares, as it cannot make a runner's plan.
    table_hash: str | None = None

    @classmethod
    def for_entry(cls, entry: Entry) -> EntryResult:
        return cls(
            entry.name, redact_text(remote_url(entry.repo)), entry.ref, entry.cuda, table_hash=entry.table_hash()
        )

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        self.stage = stage
        started = time.monotonic()
        try:
            yield
        finally:
            self.stages[stage] = round(self.stages.get(stage, 0.0) + time.monotonic() - started, 3)

    def note(self, text: str) -> None:
        """Kept as it is for the summary; printed safe for the terminal, as notes quote paths."""
        self.notes.append(text)
        print(terminal_line(f"-- [{self.name}] {text}"), flush=True)

    def cache_counts(self) -> tuple[int | float, int | float] | None:
        """The compiler cache's hits and misses, when it counted both (a count is None when the cache gave none)."""
        cache = self.compiler_cache or {}
        hits, misses = cache.get("hits"), cache.get("misses")
        if not isinstance(hits, int | float) or not isinstance(misses, int | float):
            return None
        return hits, misses

    def hit_rate(self) -> float | None:
        counts = self.cache_counts()
        if counts is None or counts[0] + counts[1] == 0:
            return None
        hits, misses = counts
        return hits / (hits + misses)

    def to_dict(self) -> JsonObject:
        rate = self.hit_rate()
        return {**vars(self), "hit_rate": None if rate is None else round(rate, 4)}


def plan_identity(plan: Plan) -> JsonObject:
    data: JsonObject = plan_to_dict(plan)
    identity = {key: data[key] for key in PLAN_IDENTITY_KEYS}
    changes = data["changes"]  # plan_to_dict's list of changes, each a table
    identity["changes"] = [
        {k: change[k] for k in ("name", "value", "action")}
        for change in (changes if isinstance(changes, list) else [])
        if isinstance(change, dict)
    ]
    return identity


def entry_request(entry: Entry, context: RunContext, source_dir: Path) -> tuple[PlanRequest, Facts]:
    """The request `invoke build` would make for this entry on this runner (planning/request.py, as the tasks
    build theirs), with the entry's own variables last and MAX_JOBS sized by the peaks this runner's earlier
    builds recorded in the cache."""
    knowledge = context.knowledge
    return build_request(
        entry.request,
        context.facts,
        Folders(context.cache_dir, False, source_dir),
        ask_here=True,
        python_label=f"{context.matrix.source}: entry '{entry.name}'.python",
        locate_archive=archive_locator(context.cache_dir, look=True),
        measured_jobs=measured_jobs("build", context.facts, context.cache_dir, knowledge.resources.watch),
        entry_env=tuple(
            EnvChange(name, value, "set", f"entry '{entry.name}' of {context.matrix.source}")
            for name, value in entry.env
        ),
    )


def _fetch_deps(plan: Plan, context: RunContext) -> bool:
    """Fetch the plan's MKL/MAGMA archives that are not in the cache yet; whether anything was missing."""
    from pytorch_winbuild.builder.deps import fetch_missing_archives

    summary = fetch_missing_archives(plan, context.cache_dir, context.mirror, context.mirror_label)
    if summary:
        print(summary, flush=True)
    return summary is not None


def _take_record(result: EntryResult, record: BuildRecord) -> None:
    """The build's log, report, first error, diagnosis, cache numbers and compile time, into the entry's result."""
    result.log, result.report = str(record.log), str(record.report)
    result.first_error, result.diagnosis = first_error_dict(record.triage), diagnosis_dicts(record.triage)
    cache = record.cache
    if cache is not None and result.compiler_cache is not None:
        result.compiler_cache.update(
            {
                "hits": cache.stats.hits,
                "misses": cache.stats.misses,
                "stats": cache.stats.describe(),
                "reported_location": redact_text(cache.location) if cache.location else None,
            }
        )
    build_seconds = record.phases.get("build")
    if build_seconds is not None:
        result.stages["compile"] = build_seconds


def _build(plan: Plan, checkout: SourceCheckout, context: RunContext, folder: Path, result: EntryResult) -> BuildRecord:
    """Run the builder in wheel mode (in the plan's build venv); its record, also taken into `result` when the
    build fails."""
    folder.mkdir(parents=True, exist_ok=True)
    request = BuildRequest(checkout=checkout, cache_dir=context.cache_dir, log_dir=folder, mode="wheel")
    record = build_record(plan, request)
    try:
        run_build(plan, request, record)
    except WinbuildError:
        if record.concluded():  # else it stopped before building, and wrote no report
            _take_record(result, record)
        raise
    _take_record(result, record)
    return record


def _collect(record: BuildRecord, folder: Path, result: EntryResult, context: RunContext) -> Path:
    """Copy the verified wheel into the entry's folder, with a record of where it came from."""
    built = record.verification.wheel if isinstance(record.verification, Verification) else None
    if not built or not Path(built).is_file():
        raise VerificationError(
            f"the build of '{result.name}' succeeded, but its report names no wheel ({built}).",
            fix=f"read the report {result.report}.",
        )
    wheel = folder / Path(built).name
    shutil.copy2(built, wheel)
    origin = {
        "entry": result.name,
        "wheel": wheel.name,
        "repo": result.repo,
        "ref": result.ref,
        "revision": result.revision,
        "config_hash": result.config_hash,
        "python": result.python,
        "cuda": result.cuda,
        "date": context.date,
        "report": Path(result.report).name if result.report else None,
        "log": Path(result.log).name if result.log else None,
        "sha256": file_sha256(wheel),  # what the merge of a fleet's parts checks the wheel against
    }
    wheel.with_name(wheel.name + WHEEL_RECORD_SUFFIX).write_text(
        json.dumps(origin, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return wheel


def _unchanged(entry: Entry, result: EntryResult, context: RunContext) -> LastSuccess | None:
    """The last success when this entry can be skipped: same revision, same configuration, wheel still there."""
    if context.force:
        return None
    last = context.state.last_success(entry.name)
    if last is None or last.revision != result.revision or last.config_hash != result.config_hash:
        return None
    if not Path(last.wheel).is_file():
        result.note(f"unchanged since {last.finished}, but its wheel {last.wheel} is gone: building again.")
        return None
    return last


def _skip(result: EntryResult, last: LastSuccess) -> None:
    result.result, result.stage, result.wheel = "skipped", None, last.wheel
    result.note(
        f"skipped: revision {(result.revision or '')[:12]} and the configuration are unchanged since the success "
        f"of {last.finished} (--force builds it anyway)."
    )


REMOTE_QUERIES_AT_ONCE = 8  # ls-remote waits on the network, not the CPU


def _may_be_unchanged(entry: Entry, context: RunContext) -> LastSuccess | None:
    """The last success, when the entry's clone still has its commit checked out (read from .git/HEAD)."""
    last = None if context.force else context.state.last_success(entry.name)
    if last is None or checked_out_commit(context.cache_dir / SOURCES_FOLDER / entry.name) != last.revision:
        return None
    return last


def prefetch_remote_commits(entries: Sequence[Entry], context: RunContext) -> None:
    """Ask each repository once, and the repositories at the same time, for the commits of the entries
    that may be unchanged: a nightly of one repository in 20 configurations starts one `git ls-remote`,
    not 20 in a row. The night decides "unchanged" from the remotes as they were when it started. A
    repository that cannot answer (or a configuration error) is left out; its entries then ask on their
    own, and the full way reports the real error."""
    by_repo: dict[str, list[Entry]] = {}
    for entry in entries:
        if _may_be_unchanged(entry, context) is not None:
            by_repo.setdefault(entry.repo, []).append(entry)

    def ask(repo: str) -> None:
        first = by_repo[repo][0]
        where = f"{context.matrix.source}: entry '{first.name}'"
        try:
            answers = remote_commits(
                repo,
                [entry.ref for entry in by_repo[repo]],
                context.cache_dir,
                repo_key=f"{where}.repo",
                ref_key=f"{where}.ref",
            )
        except WinbuildError:
            return
        for ref, commit in answers.items():
            context.remote[(repo, ref)] = commit

    with ThreadPoolExecutor(max_workers=REMOTE_QUERIES_AT_ONCE) as pool:
        list(pool.map(ask, by_repo))


def _skipped_before_fetch(entry: Entry, context: RunContext, result: EntryResult, source_dir: Path) -> bool:
    """Skip an unchanged entry without touching its clone: one `git ls-remote` says the ref still names the
    last success's commit, the clone still has that commit checked out (clean), and the plan made from it
    has the same configuration. Anything else goes the full way (fetch, checkout, plan) and decides there."""
    last = _may_be_unchanged(entry, context)
    if last is None:
        return False
    where = f"{context.matrix.source}: entry '{entry.name}'"
    with result.timed("source"):
        if (entry.repo, entry.ref) in context.remote:
            remote = context.remote[(entry.repo, entry.ref)]
        else:
            remote = remote_commit(
                entry.repo, entry.ref, context.cache_dir, repo_key=f"{where}.repo", ref_key=f"{where}.ref"
            )
    if remote != last.revision:
        return False
    result.revision = remote
    with result.timed("plan"):
        request, facts = entry_request(entry, context, source_dir)
        plan = make_plan(request, facts, context.knowledge)
        result.python = plan.build_python.version
        result.config_hash = entry.config_hash(plan_identity(plan))
    unchanged = _unchanged(entry, result, context)
    if unchanged is None:
        return False
    _skip(result, unchanged)
    return True


def _stages(entry: Entry, context: RunContext, result: EntryResult, claims: ExitStack) -> None:
    folder = context.run_dir / entry.name
    source_dir = context.cache_dir / SOURCES_FOLDER / entry.name
    if _skipped_before_fetch(entry, context, result, source_dir):
        return
    with result.timed("disk"):
        free = check_free_space(
            [source_dir, context.run_dir, context.cache_dir], entry.min_free_gb, entry.name, entry.min_free_gb_from
        )
        print(f"-- [{entry.name}] {free:.1f} GB free (needs {entry.min_free_gb:g} GB).", flush=True)

    def log(line: str) -> None:
        print(f"-- [{entry.name}] {line}", flush=True)

    with result.timed("source"):
        claims.enter_context(claimed(context.cache_dir, [source_dir], log=log))
        where = f"{context.matrix.source}: entry '{entry.name}'"
        checkout = acquire_source(
            repo=entry.repo, ref=entry.ref, destination=source_dir, repo_key=f"{where}.repo", ref_key=f"{where}.ref"
        )
        result.revision = checkout.commit
    with result.timed("plan"):
        request, facts = entry_request(entry, context, source_dir)
        plan = make_plan(request, facts, context.knowledge)
        result.python = plan.build_python.version
        result.config_hash = entry.config_hash(plan_identity(plan))
    last = _unchanged(entry, result, context)
    if last is not None:
        _skip(result, last)
        return
    with result.timed("deps"):
        if _fetch_deps(plan, context):
            plan = make_plan(request, facts, context.knowledge)
    with result.timed("cache"):
        build_env = {**os.environ, **{change.name: change.value for change in plan.changes if change.action == "set"}}
        cache = shared_cache(
            plan.compiler_cache, build_env, context.matrix.shared_cache_env, context.matrix.source, str(source_dir)
        )
        plan = replace(plan, changes=plan.changes + cache.changes)
        result.compiler_cache = cache.to_dict()
        print(f"-- [{entry.name}] compiler cache: {cache.describe()}", flush=True)
        if cache.fallback:
            result.note(f"warning: {cache.fallback}.")
    with result.timed("build"):
        used = build_folders(context.cache_dir, plan.venv.folder if plan.venv else None, plan.compiler_cache)
        claims.enter_context(claimed(context.cache_dir, used, log=log))
        record = _build(plan, checkout, context, folder, result)
    with result.timed("collect"):
        wheel = _collect(record, folder, result, context)
    result.wheel = str(wheel)
    context.state.record(
        entry.name,
        LastSuccess(
            result.revision or "",
            result.config_hash or "",
            str(wheel),
            context.date,
            datetime.now(UTC).isoformat(timespec="seconds"),
        ),
    )
    result.result, result.stage = "success", None


def run_entry(entry: Entry, context: RunContext, result: EntryResult) -> None:
    """Run one entry into `result`; only Ctrl-C gets out (as InterruptedByUser), every failure stays in `result`."""
    started = time.monotonic()
    print(
        "\n"
        f"==== nightly entry {entry.name}: {result.repo} {entry.ref or '(default branch)'}, CUDA {entry.cuda}, "
        f"Python {entry.python} ====",
        flush=True,
    )
    try:
        with ExitStack() as claims:  # the clone, venv and compiler cache, spared by `clean` until the entry ends
            _stages(entry, context, result, claims)
    except (InterruptedByUser, KeyboardInterrupt) as stop:
        if isinstance(stop, InterruptedByUser):
            interrupted = stop
        else:  # Ctrl-C, or SIGTERM, SIGHUP, SIGBREAK (child_processes.StopSignal): its own words and exit code
            cause, exit_code = stop_cause(stop)
            interrupted = InterruptedByUser(
                f"stopped by {cause} during the {result.stage} stage of '{entry.name}'.", exit_code=exit_code
            )
        result.result, result.error, result.exit_code = "interrupted", interrupted.paragraph(), interrupted.exit_code
        raise interrupted from None
    except WinbuildError as error:
        result.result, result.error, result.exit_code = "failed", error.paragraph(), error.exit_code
    except Exception as exc:  # a bug must not cost the other entries their wheels
        traceback.print_exc()
        bug = InternalError(
            f"{type(exc).__name__}: {exc}",
            fix="this is a bug in pytorch-winbuild; please report it with the traceback printed above.",
        )
        result.result, result.error, result.exit_code = "failed", bug.paragraph(), bug.exit_code
    finally:
        result.seconds = round(time.monotonic() - started, 3)
    if result.error:
        print(f"-- [{entry.name}] FAILED at {result.stage}: {result.error}", flush=True)
