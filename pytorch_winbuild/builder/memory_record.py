"""The measured memory of compile jobs, kept per machine and configuration for the next plan.

<cache>/memory/peaks.json keeps the memory watch's figures of the last `keep_runs` builds; the next build of the same
configuration on the same machine sizes MAX_JOBS from the largest job plus `margin` (--jobs still wins). Written whole
under a lock; a file that cannot be read is ignored with a warning and never stops a build or a plan.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeGuard

from pytorch_winbuild import atomic_file
from pytorch_winbuild.facts.model import MAX_MIB, Facts
from pytorch_winbuild.json_file import JsonObject, read_json
from pytorch_winbuild.knowledge.resources import WatchSettings
from pytorch_winbuild.paths import peaks_file
from pytorch_winbuild.planning.jobs import JobConfiguration, Measured, MeasuredJobs
from pytorch_winbuild.planning.plan_model import Plan

if TYPE_CHECKING:  # a plan reads the record without the sampler (psutil) loaded
    from pytorch_winbuild.builder.memory_watch import MemorySummary

RECORD_FORMAT = 1
LOCK_SECONDS = 30
MIB_PER_GIB = 1024


def machine_key(os_name: str, cpu_count: int | None, total_mib: int | None) -> str | None:
    """The machine as "linux, 16 cores, 32 GiB"; None when the cores or the memory are unknown."""
    if not cpu_count or not total_mib:
        return None
    return f"{os_name}, {cpu_count} cores, {round(total_mib / MIB_PER_GIB)} GiB"


def facts_machine(facts: Facts) -> str | None:
    """The machine a plan is for, from its facts (probed here, or a --host file)."""
    return machine_key(facts.os, facts.cpu_count, facts.memory_total_mib)


def this_machine(os_name: str) -> str | None:
    """The machine a build runs on: the same figures as the probe reads (facts/probe.py)."""
    from pytorch_winbuild.facts.probe_common import machine_memory

    return machine_key(os_name, os.cpu_count(), machine_memory().total_mib)


def job_configuration(plan: Plan) -> JobConfiguration:
    """The configuration a made plan decided, as the plan itself asked the record for it (planning/plan.py)."""
    archs = plan.archs
    return JobConfiguration(
        plan.era.name, plan.cuda.version if plan.cuda else None, archs, plan.compiler.short if plan.compiler else None
    )


def configuration_key(plan: Plan, kind: str) -> str:
    """What sizes a compile job of task `kind`, as "build, era 2.9+, CUDA 12.4, 2 architectures, MSVC 14.44"."""
    return job_configuration(plan).key(kind)


class _Record(TypedDict):
    """peaks.json as this version writes it: machine → configuration → its kept runs, oldest first (a run as
    `remember` writes it, read back as it is)."""

    format: int
    machines: dict[str, dict[str, list[JsonObject]]]


def _valid_run(run: object) -> bool:
    """A run whose peak is a number of MiB a machine can have (10**400 made MAX_JOBS's arithmetic overflow)."""
    return (
        isinstance(run, dict)
        and isinstance(run.get("peak_job_mib"), int)
        and not isinstance(run.get("peak_job_mib"), bool)
        and 0 < run["peak_job_mib"] <= MAX_MIB
    )


def _is_record(data: dict[str, object]) -> TypeGuard[_Record]:
    """Whether `data` (an object read from JSON) is a record in the form this version writes, every run valid."""
    machines = data.get("machines")
    return (
        isinstance(data.get("format"), int)
        and isinstance(machines, dict)
        and all(
            isinstance(configurations, dict)
            and all(isinstance(runs, list) and all(_valid_run(run) for run in runs) for runs in configurations.values())
            for configurations in machines.values()
        )
    )


def _peak(run: JsonObject) -> int:
    """A kept run's peak_job_mib (an int: _valid_run checked it)."""
    peak = run["peak_job_mib"]
    return peak if isinstance(peak, int) else 0


def _job_names(run: JsonObject) -> str:
    """The processes of a run's largest job, " + "-joined; "a compiler" when it names none."""
    job = run.get("peak_job") or []
    if isinstance(job, (int, float)):  # a number put there by hand: not iterable
        raise TypeError(f"'{type(job).__name__}' object is not iterable")
    return " + ".join(str(name) for name in job) or "a compiler"


@dataclass(frozen=True)
class PeakBook:
    """The record of one machine and configuration in one cache's peaks.json."""

    file: Path
    machine: str | None
    configuration: str
    settings: WatchSettings

    def _read(self) -> tuple[_Record | None, str | None, bool]:
        """(the whole file, None when it was ignored; why it was ignored; whether a new record may replace it):
        an empty record when the file is absent; a corrupt file may be replaced, another version's may not."""
        try:
            data: object = read_json(self.file)
        except FileNotFoundError:
            return {"format": RECORD_FORMAT, "machines": {}}, None, True
        except (OSError, UnicodeDecodeError, ValueError) as error:
            return None, self._ignored(f"it cannot be read as JSON ({error})"), True
        if not isinstance(data, dict) or not isinstance(data.get("format"), int):
            return None, self._ignored("it is not a record of measured peaks"), True
        if data["format"] != RECORD_FORMAT:
            why = f"it has format {data['format']}, and this version reads {RECORD_FORMAT}"
            return None, self._ignored(why, replaced=False), False
        if not _is_record(data):
            return None, self._ignored("its machines and runs are not in the form this version writes"), True
        return data, None, True

    def _ignored(self, why: str, *, replaced: bool = True) -> str:
        then = (
            "the next build replaces it with a new record"
            if replaced
            else "builds leave it as it is (delete it to record this version's)"
        )
        return (
            f"The record of measured compiler memory {self.file} is ignored: {why}. MAX_JOBS uses the cited "
            f"figures of build_config/resources.toml; {then}."
        )

    def runs(self) -> tuple[list[JsonObject], str | None]:
        """This machine and configuration's kept runs, oldest first, and a warning when the file was ignored."""
        if self.machine is None:
            return [], None
        data, warning, _ = self._read()
        if data is None:
            return [], warning
        return list(data["machines"].get(self.machine, {}).get(self.configuration, [])), warning

    def figure(self) -> Measured:
        """The memory per compile job for the next plan: the largest kept job plus the margin."""
        runs, warning = self.runs()
        if not runs:
            return Measured(warning=warning)
        largest = max(runs, key=_peak)
        gib = _peak(largest) * (1 + self.settings.margin) / MIB_PER_GIB
        names = _job_names(largest)
        note = (
            f"Memory per compile job: {gib:.2f} GiB, measured on this machine: the largest job of "
            f"{f'the last {len(runs)} runs' if len(runs) > 1 else 'the last run'} of this configuration "
            f"({self.configuration}) took "
            f"{_peak(largest) / MIB_PER_GIB:.2f} GiB ({names}, {largest.get('when', 'date unknown')}), "
            f"+ {self.settings.margin:.0%} margin (build_config/resources.toml [watch]); recorded in {self.file}."
        )
        return Measured(gib=kept_job_gib(gib), note=note, warning=warning)

    def remember(self, summary: MemorySummary, *, result: str, max_jobs: str | None) -> str | None:
        """Add this run's figures (when it ran a compiler) and keep the last runs; a warning when the
        record could not be written."""
        if self.machine is None or summary.peak_job_mib <= 0:
            return None
        run: JsonObject = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "result": result,
            "max_jobs": max_jobs,
            "peak_job_mib": summary.peak_job_mib,
            "peak_job": list(summary.peak_job),
            "peak_process": summary.to_dict()["peak_process"],
            "peak_jobs": summary.peak_jobs,
            "peak_tree_mib": summary.peak_tree_mib,
            "available_start_mib": summary.available_start_mib,
            "available_min_mib": summary.available_min_mib,
            "low_memory": len(summary.low_memory),
            "compilers": dict(summary.compilers),
        }
        from filelock import FileLock, Timeout  # only a build writes; a plan only reads (bench_cli.py)

        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(self.file) + ".lock", timeout=LOCK_SECONDS):
                data, ignored, replaceable = self._read()
                if not replaceable:
                    return ignored
                if data is None:
                    data = {"format": RECORD_FORMAT, "machines": {}}
                kept = data["machines"].setdefault(self.machine, {}).setdefault(self.configuration, [])
                kept.append(run)
                del kept[: -self.settings.keep_runs]
                self._write(data)
        except (OSError, Timeout) as error:
            return f"The measured compiler memory could not be recorded in {self.file} ({error})."
        return None

    def _write(self, data: _Record) -> None:
        atomic_file.write_text(self.file, json.dumps(data, indent=2, ensure_ascii=False) + "\n", newline="\n")


def measured_jobs(kind: str, facts: Facts, cache_dir: Path, settings: WatchSettings) -> MeasuredJobs:
    """The plan's look-up of measured figures for task `kind` on the machine of `facts`: asked with the
    configuration the plan decides, so the plan is made once."""

    def look_up(configuration: JobConfiguration) -> Measured:
        return PeakBook(peaks_file(cache_dir), facts_machine(facts), configuration.key(kind), settings).figure()

    return look_up


# The smallest figure kept: a tiny compile (a few MiB) rounded to 0.00 GiB made the job count a division by zero.
MIN_JOB_GIB = 0.01


def kept_job_gib(gib: float) -> float:
    """A measured memory per job in GiB, to two decimals and never below MIN_JOB_GIB."""
    return max(MIN_JOB_GIB, round(gib, 2))


def fitting_jobs(available_mib: int, job_gib: float) -> int:
    """The parallel jobs of `job_gib` each that fit in `available_mib` (at least 1)."""
    return max(1, math.floor(available_mib / MIB_PER_GIB / job_gib))


def diagnosis_figure(book: PeakBook, summary: MemorySummary) -> float | None:
    """Memory per job for the advice after a failure: the record's figure (this run included once
    remembered), else this run's largest job with the margin; None when no compiler was seen."""
    figure = book.figure().gib
    if figure is None and summary.peak_job_mib:
        figure = kept_job_gib(summary.peak_job_mib * (1 + book.settings.margin) / MIB_PER_GIB)
    return figure


def memory_diagnosis(
    summary: MemorySummary, matched_rules: list[str], settings: WatchSettings, job_gib: float | None
) -> str | None:
    """After a failed build: whether it ran out of memory (a rule of `oom_rules` matched the log, the
    OS killed a process for memory, or available memory fell under the floor), and the MAX_JOBS that
    would have fitted: the memory available when it started / `job_gib` (diagnosis_figure). None
    when nothing points at memory."""
    evidence = [f"the log shows it ([{rule}])" for rule in matched_rules if rule in settings.oom_rules]
    if summary.oom_kills:
        evidence.append(f"the OS killed {summary.oom_kills} process(es) for memory during the build (/proc/vmstat)")
    if summary.low_memory:
        lowest = min(episode.lowest_mib for episode in summary.low_memory)
        evidence.append(f"available memory fell to {lowest / MIB_PER_GIB:.1f} GiB, under the floor")
    if not evidence:
        return None
    text = "Out of memory: " + "; ".join(evidence) + "."
    if job_gib is None or summary.available_start_mib is None:
        return text + " No compile job was measured; pass a lower --jobs N."
    available = summary.available_start_mib / MIB_PER_GIB
    jobs = fitting_jobs(summary.available_start_mib, job_gib)
    measured = f"The largest compile job measured on this machine takes {job_gib:.2f} GiB with the margin"
    if summary.peak_jobs and jobs >= summary.peak_jobs:
        fewer = f", or run it again with --jobs {summary.peak_jobs - 1}" if summary.peak_jobs > 1 else ""
        return (
            f"{text} {measured}, so the {summary.peak_jobs} that ran at once fitted in the {available:.1f} GiB "
            f"available when the build started: something else took the memory. Close other programs{fewer}."
        )
    return (
        f"{text} {measured}; with {available:.1f} GiB available when the build started, MAX_JOBS {jobs} would "
        f"have fitted: run it again with --jobs {jobs} (the next plan uses the measured figure by itself)."
    )
