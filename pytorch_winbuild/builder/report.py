"""The record of one build: a JSON report next to its log, and the short summary printed at the end.

The report is what a user attaches to a bug report, so it holds everything needed to understand the run without the
machine (credentials redacted). It stays typed while the build runs and becomes JSON only in `to_dict`.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pytorch_winbuild import atomic_file
from pytorch_winbuild.builder.compiler_cache import CacheStats
from pytorch_winbuild.builder.memory_watch import MemorySummary
from pytorch_winbuild.json_file import JsonObject
from pytorch_winbuild.text.redact import redact_env, redact_text
from pytorch_winbuild.text.terminal_text import terminal_line, terminal_lines

if TYPE_CHECKING:  # the diagnosis loads its rule engine only when a run fails
    from pytorch_winbuild.builder.environment import VcvarsEntry
    from pytorch_winbuild.diagnosis.triage import TriageResult

REPORT_FORMAT = 1


def run_paths(log_dir: Path, kind: str, label: str | None = None) -> tuple[Path, Path]:
    """(log, report) for a new run: <kind>[-label]-<UTC time>.log/.json, never an existing name."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    stem = "-".join(part for part in (kind, label, stamp) if part)
    candidate, number = stem, 1
    while (log_dir / f"{candidate}.log").exists() or (log_dir / f"{candidate}.json").exists():
        number += 1
        candidate = f"{stem}-{number}"
    return log_dir / f"{candidate}.log", log_dir / f"{candidate}.json"


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as verify.py's check saw it: whether the build's architectures cover it, and its kernel run."""

    index: int
    device: str  # cuda:N
    name: str | None
    capability: str | None
    covered: bool | None  # None: the build's architecture list is unknown
    covered_by: tuple[str, ...]
    kernel: str  # ok | failed | not run
    ok: bool
    error: str | None = None

    def to_dict(self) -> JsonObject:
        """As the script writes a device: `error` only for one that failed."""
        data: JsonObject = {
            "index": self.index,
            "device": self.device,
            "name": self.name,
            "capability": self.capability,
            "covered": self.covered,
            "covered_by": list(self.covered_by),
            "kernel": self.kernel,
            "ok": self.ok,
        }
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass(frozen=True)
class GpuCheck:
    """The check's gpu section: the build's architectures and every visible device, or why none was checked."""

    checked: bool
    arch_list: tuple[str, ...] | None
    device_count: int
    devices: tuple[GpuDevice, ...]
    kernel_test: str
    arch_list_error: str | None = None
    reason: str | None = None  # why no device was checked (no CUDA in torch, none visible)
    warnings: tuple[str, ...] = ()  # what torch warned while the devices were checked

    def to_dict(self) -> JsonObject:
        """As the script writes the section: the optional keys only when it set them."""
        data: JsonObject = {
            "checked": self.checked,
            "arch_list": None if self.arch_list is None else list(self.arch_list),
            "device_count": self.device_count,
            "devices": [device.to_dict() for device in self.devices],
            "kernel_test": self.kernel_test,
        }
        if self.arch_list_error is not None:
            data["arch_list_error"] = self.arch_list_error
        if self.reason is not None:
            data["reason"] = self.reason
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data


@dataclass(frozen=True)
class DataLoaderCheck:
    """The DataLoader the check ran with worker processes (spawn, as every DataLoader with workers on Windows)."""

    num_workers: int
    start_method: str
    batches: int
    ok: bool

    def to_dict(self) -> JsonObject:
        return {
            "num_workers": self.num_workers,
            "start_method": self.start_method,
            "batches": self.batches,
            "ok": self.ok,
        }


# What the check in the fresh interpreter reports, in the order it reports them (verify.py VERIFY_SCRIPT).
CHECK_FACTS = (
    "python",
    "executable",
    "cwd",
    "version",
    "location",
    "cuda_version",
    "cuda_available",
    "mkl",
    "magma",
    "cudnn",
    "gpu",
    "dataloader",
    "failed_step",
    "error",
    "fix",
)


@dataclass(frozen=True)
class Verification:
    """verify.py's result: what torch in a fresh interpreter reported and, when the check failed, the failed step,
    its reason in one line and the diagnosis."""

    ok: bool
    interpreter: str
    exit_code: int
    python: str | None = None
    executable: str | None = None
    cwd: str | None = None
    version: str | None = None
    location: str | None = None
    cuda_version: str | None = None
    cuda_available: bool | None = None
    mkl: bool | None = None
    magma: bool | None = None
    cudnn: int | None = None
    gpu: GpuCheck | None = None
    dataloader: DataLoaderCheck | None = None
    failed_step: str | None = None
    error: str | None = None
    fix: str | None = None  # the check's own fix: the --arch-list for the GPUs the build misses
    error_summary: str | None = None
    # A failed check's diagnosis: the rules that matched its output and tracebacks, the first error of its reason.
    triage: TriageResult | None = None
    wheel: str | None = None  # the wheel checked (--mode wheel)
    # The facts torch answered with none (no CUDA, MAGMA or cuDNN): the report writes them as null, and leaves out
    # a fact the check never reached because it stopped earlier.
    answered_none: frozenset[str] = frozenset()

    def to_dict(self) -> JsonObject:
        """The report's form: the check's facts as it printed them (without its tracebacks), who ran it and,
        after a failure, the reason and the diagnosis; the checked wheel last."""
        data: JsonObject = {"ok": self.ok}
        for name in CHECK_FACTS:
            value = getattr(self, name)
            if value is not None or name in self.answered_none:
                data[name] = value.to_dict() if isinstance(value, (GpuCheck, DataLoaderCheck)) else value
        data["interpreter"], data["exit_code"] = self.interpreter, self.exit_code
        if not self.ok:
            data["error_summary"] = self.error_summary
            data["diagnosis"] = list(diagnosis_dicts(self.triage))  # as list[JsonValue] (lists are invariant)
            data["first_error"] = first_error_dict(self.triage)
        if self.wheel is not None:
            data["wheel"] = self.wheel
        return data


@dataclass(frozen=True)
class VerificationSkipped:
    """Why a build was not verified (--no-verify, a LibTorch build): the report says so in place of a result."""

    reason: str

    def to_dict(self) -> JsonObject:
        return {"skipped": self.reason}


def first_error_dict(triage: TriageResult | None) -> JsonObject | None:
    """A triage's first error block as the report and the nightly summary write it."""
    return triage.first_error.to_dict() if triage and triage.first_error else None


def diagnosis_dicts(triage: TriageResult | None) -> list[JsonObject]:
    """A triage's matching rules as the report and the nightly summary write them, with the fixes for the
    machine the triaged text comes from."""
    return [match.to_dict(triage.posix) for match in triage.matches] if triage else []


@dataclass(frozen=True)
class CacheRecord:
    """The compiler cache's numbers for the command, and where the cache says it keeps its files (sccache's
    JSON statistics name it; the nightly shows it for a shared cache), read once from the tool's output."""

    stats: CacheStats
    location: str | None

    @classmethod
    def of(cls, stats: CacheStats) -> CacheRecord:
        """The one place the tool's own output (`raw`, of no fixed shape) is looked into."""
        location = stats.raw.get("cache_location") if isinstance(stats.raw, dict) else None
        return cls(stats, location if isinstance(location, str) else None)

    def to_dict(self) -> JsonObject:
        """The report's form: the numbers and the tool's output as read, and the line the summary prints."""
        return {**self.stats.to_dict(), "summary": self.stats.describe()}


class BuildReport(TypedDict):
    """The report as it is written (REPORT_FORMAT): BuildRecord.to_dict."""

    format: int
    kind: str
    started: str
    seconds: float
    result: str
    exit_code: int | None
    error: str | None
    source: Mapping[str, object] | None
    command: list[str]
    cwd: str | None
    log: str
    report: str
    phases: dict[str, float]
    progress: dict[str, int] | None
    cache: JsonObject | None
    memory: JsonObject | None
    first_error: JsonObject | None
    diagnosis: list[JsonObject]
    verification: JsonObject | None
    notes: list[str]
    plan: Mapping[str, object] | None
    vcvars: VcvarsEntry | None
    runner_env: list[dict[str, str]]
    environment: dict[str, str]


@dataclass
class BuildRecord:
    """Filled in phase by phase while a build runs; written whatever the outcome."""

    kind: str  # "build" or "build-ext"
    log: Path
    report: Path
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    source: Mapping[str, object] | None = None  # where the source came from: path, origin, commit, ...
    command: list[str] = field(default_factory=list)
    cwd: str | None = None
    plan: Mapping[str, object] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    vcvars: VcvarsEntry | None = None
    runner_env: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    cache: CacheRecord | None = None
    progress: dict[str, int] | None = None
    memory: MemorySummary | None = None  # what the memory watch saw while the command ran
    memory_diagnosis: str | None = None  # after a failure that points at memory: the MAX_JOBS that fits
    result: str = "running"  # success | failed | verification failed | interrupted | error
    exit_code: int | None = None
    error: str | None = None
    triage: TriageResult | None = None  # a failed command's log: its first error and the diagnosis rules that matched
    verification: Verification | VerificationSkipped | None = None
    _clock_start: float = field(default_factory=time.monotonic, repr=False)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase; its time is kept even when it fails."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(self.phases.get(name, 0.0) + time.monotonic() - started, 3)

    def set_environment(self, env: dict[str, str]) -> None:
        self.environment = dict(sorted(redact_env(env).items()))

    def note(self, text: str) -> None:
        """Something the runner did or decided that the user should know; printed as it happens (made safe
        for the terminal: notes quote paths), and kept as it is for the report."""
        self.notes.append(text)
        print(terminal_line(f"-- {text}"), flush=True)

    def total_seconds(self) -> float:
        return time.monotonic() - self._clock_start

    def concluded(self) -> bool:
        """Whether the run got as far as its verdict (success, failure, interruption), which its report then
        holds; a run stopped before its phases began (its settings unreadable) wrote no report."""
        return self.result != "running"

    def to_dict(self) -> BuildReport:
        return {
            "format": REPORT_FORMAT,
            "kind": self.kind,
            "started": self.started,
            "seconds": round(self.total_seconds(), 3),
            "result": self.result,
            "exit_code": self.exit_code,
            "error": self.error,
            "source": self.source,
            "command": self.command,
            "cwd": self.cwd,
            "log": str(self.log),
            "report": str(self.report),
            "phases": self.phases,
            "progress": self.progress,
            "cache": self.cache.to_dict() if self.cache is not None else None,
            "memory": (
                {**self.memory.to_dict(), "diagnosis": self.memory_diagnosis} if self.memory is not None else None
            ),
            "first_error": first_error_dict(self.triage),
            "diagnosis": diagnosis_dicts(self.triage),
            "verification": self.verification.to_dict() if self.verification is not None else None,
            "notes": self.notes,
            "plan": self.plan,
            "vcvars": self.vcvars,
            "runner_env": self.runner_env,
            "environment": self.environment,
        }

    def write(self) -> Path:
        """Write the report through a temporary file, so a reader never sees half of one."""
        text = redact_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str)) + "\n"
        atomic_file.write_text(self.report, text, mode=atomic_file.SHARED)
        return self.report


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def _yes_no(value: bool | None) -> str:
    if value is None:
        return "n/a"
    return "yes" if value else "no"


def verification_line(verification: Verification | VerificationSkipped) -> str:
    """One line for people from verify.py's result."""
    if isinstance(verification, VerificationSkipped):
        return f"skipped: {verification.reason}"
    if not verification.ok:
        return f"FAILED at {'start' if verification.failed_step is None else verification.failed_step}"
    loader = verification.dataloader
    workers, start_method = (loader.num_workers, loader.start_method) if loader else (None, None)
    cudnn = verification.cudnn
    parts = [
        f"torch {verification.version}",
        f"CUDA {verification.cuda_version or 'no'}" + (" (available)" if verification.cuda_available else ""),
        f"MKL {_yes_no(verification.mkl)}",
        f"MAGMA {_yes_no(verification.magma)}",
        f"cuDNN {cudnn if cudnn else 'no'}",
        f"DataLoader(num_workers={workers}, {start_method}) ok",
    ]
    return " · ".join(parts)


def gpu_lines(verification: Verification) -> list[str]:
    """One line per GPU that verify.py checked (capability, coverage, kernel), or why none was."""
    gpu = verification.gpu
    if gpu is None:
        return []
    if not gpu.checked:
        return [f"not checked: {gpu.reason}"] if gpu.reason else []
    built = " ".join(gpu.arch_list or ()) or "unknown"
    lines = []
    for device in gpu.devices:
        coverage = {
            True: f"built for it ({' '.join(device.covered_by)})",
            False: f"NOT built for it (arch list {built})",
            None: "arch list unknown",
        }[device.covered]
        kernel = device.kernel
        error = "no message" if device.error is None else device.error
        outcome = "kernel ok" if kernel == "ok" else f"kernel {kernel}: {error}"
        lines.append(
            f"{device.device} {device.name or 'unnamed'} · capability "
            f"{device.capability or '?'} · {coverage} · {outcome}"
        )
    return lines


def _triage_rows(triage: TriageResult | None) -> list[tuple[str, str]]:
    """The summary's rows for a failed command: its first error's line and the diagnosis rules that matched."""
    if triage is None:
        return []
    rows = [("diagnosis", f"[{match.rule.id}] {match.rule.title}") for match in triage.matches]
    if triage.first_error:
        first = triage.first_error.summary
        rows.insert(0, ("first error", f"line {first.number}: {first.text.strip()}"))
    return rows


def summary(record: BuildRecord) -> str:
    """The few lines printed at the end of a run; they quote the log and git, so each stays one safe line."""
    title = {
        "success": "succeeded",
        "failed": "FAILED",
        "verification failed": "built, but verification FAILED",
        "interrupted": "interrupted",
        "error": "stopped",
    }.get(record.result, record.result)
    lines = [f"== pytorch-winbuild {record.kind} {title} in {_duration(record.total_seconds())} =="]
    rows: list[tuple[str, str]] = []
    if record.source:
        commit = record.source.get("commit")
        rows.append(
            (
                "source",
                f"{record.source['path']} ({record.source['origin']}"
                + (f", {commit[:12]}" if isinstance(commit, str) and commit else "")
                + ")",
            )
        )
    if record.command:
        rows.append(("command", " ".join(record.command)))
    if record.phases:
        rows.append(
            (
                "phases",
                " · ".join(
                    f"{name} {_duration(seconds) if seconds >= 1 else f'{seconds:.2f}s'}"
                    for name, seconds in record.phases.items()
                ),
            )
        )
    if record.cache is not None:
        rows.append(("cache", record.cache.stats.describe()))
    if record.memory is not None:
        rows.append(("memory", record.memory.describe()))
        rows += [
            (
                "low memory",
                f"{episode.started}: {episode.lowest_mib / 1024:.1f} GiB available at the lowest, with {episode.jobs} "
                f"compile jobs running"
                + (f", for {episode.seconds:g}s" if episode.seconds is not None else ", until the end"),
            )
            for episode in record.memory.low_memory
        ]
    rows += _triage_rows(record.triage)
    if record.verification is not None:
        rows.append(("verified", verification_line(record.verification)))
        if isinstance(record.verification, Verification):
            rows += [("gpu", line) for line in gpu_lines(record.verification)]
    if record.log.exists():
        rows.append(("log", str(record.log)))
    rows.append(("report", str(record.report)))
    width = max(len(name) for name, _ in rows)
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    return terminal_lines(redact_text(line) for line in lines)
