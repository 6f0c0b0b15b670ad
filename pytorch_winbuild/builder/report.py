"""The record of one build: a JSON report next to its log, and the short summary printed at the end.

The report is what a user attaches to a bug report, so it holds everything needed to understand
the run without the machine: the plan, the environment the build really got (credentials
redacted), how long each phase took, the compiler cache's numbers, the memory its compilers took
(and any low-memory episode), the result, the first error with the diagnosis rules that matched,
and the verification.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytorch_winbuild.builder.memory_watch import MemorySummary
from pytorch_winbuild.text.redact import redact_env, redact_text
from pytorch_winbuild.text.terminal_text import terminal_line, terminal_lines

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


@dataclass
class BuildRecord:
    """Filled in phase by phase while a build runs; written whatever the outcome."""

    kind: str  # "build" or "build-ext"
    log: Path
    report: Path
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    source: dict[str, Any] | None = None
    command: list[str] = field(default_factory=list)
    cwd: str | None = None
    plan: dict[str, Any] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    vcvars: dict[str, Any] | None = None
    runner_env: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    cache: dict[str, Any] | None = None
    progress: dict[str, int] | None = None
    memory: MemorySummary | None = None  # what the memory watch saw while the command ran
    memory_diagnosis: str | None = None  # after a failure that points at memory: the MAX_JOBS that fits
    result: str = "running"  # success | failed | verification failed | interrupted | error
    exit_code: int | None = None
    error: str | None = None
    first_error: dict[str, Any] | None = None
    diagnosis: list[dict[str, Any]] = field(default_factory=list)
    verification: dict[str, Any] | None = None
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

    def to_dict(self) -> dict[str, Any]:
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
            "cache": self.cache,
            "memory": (
                {**self.memory.to_dict(), "diagnosis": self.memory_diagnosis} if self.memory is not None else None
            ),
            "first_error": self.first_error,
            "diagnosis": self.diagnosis,
            "verification": self.verification,
            "notes": self.notes,
            "plan": self.plan,
            "vcvars": self.vcvars,
            "runner_env": self.runner_env,
            "environment": self.environment,
        }

    def write(self) -> Path:
        """Write the report through a temporary file, so a reader never sees half of one."""
        text = redact_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str)) + "\n"
        temporary = self.report.with_suffix(".json.tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, self.report)
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


def _yes_no(value: Any) -> str:
    if value is None:
        return "n/a"
    return "yes" if value else "no"


def verification_line(verification: dict[str, Any]) -> str:
    """One line for people from verify.py's result."""
    if verification.get("skipped"):
        return f"skipped: {verification['skipped']}"
    if not verification.get("ok"):
        return f"FAILED at {verification.get('failed_step', 'start')}"
    loader = verification.get("dataloader") or {}
    cudnn = verification.get("cudnn")
    parts = [
        f"torch {verification.get('version')}",
        f"CUDA {verification.get('cuda_version') or 'no'}"
        + (" (available)" if verification.get("cuda_available") else ""),
        f"MKL {_yes_no(verification.get('mkl'))}",
        f"MAGMA {_yes_no(verification.get('magma'))}",
        f"cuDNN {cudnn if cudnn else 'no'}",
        f"DataLoader(num_workers={loader.get('num_workers')}, {loader.get('start_method')}) ok",
    ]
    return " · ".join(parts)


def gpu_lines(verification: dict[str, Any]) -> list[str]:
    """One line per GPU that verify.py checked (capability, coverage, kernel), or why none was."""
    gpu = verification.get("gpu")
    if not isinstance(gpu, dict):
        return []
    if not gpu.get("checked"):
        return [f"not checked: {gpu.get('reason', 'unknown')}"] if gpu.get("reason") else []
    built = " ".join(gpu.get("arch_list") or []) or "unknown"
    lines = []
    for device in gpu.get("devices") or []:
        coverage = {
            True: f"built for it ({' '.join(device.get('covered_by') or [])})",
            False: f"NOT built for it (arch list {built})",
            None: "arch list unknown",
        }[device.get("covered")]
        kernel = device.get("kernel")
        outcome = "kernel ok" if kernel == "ok" else f"kernel {kernel}: {device.get('error', 'no message')}"
        lines.append(
            f"{device.get('device')} {device.get('name') or 'unnamed'} · capability "
            f"{device.get('capability') or '?'} · {coverage} · {outcome}"
        )
    return lines


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
        rows.append(
            (
                "source",
                f"{record.source['path']} ({record.source['origin']}"
                + (f", {record.source['commit'][:12]}" if record.source.get("commit") else "")
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
    if record.cache:
        rows.append(("cache", record.cache["summary"]))
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
    if record.first_error:
        summary_line = record.first_error["summary"]
        rows.append(("first error", f"line {summary_line['number']}: {summary_line['text'].strip()}"))
    for match in record.diagnosis:
        rows.append(("diagnosis", f"[{match['id']}] {match['title']}"))
    if record.verification is not None:
        rows.append(("verified", verification_line(record.verification)))
        rows += [("gpu", line) for line in gpu_lines(record.verification)]
    if record.log.exists():
        rows.append(("log", str(record.log)))
    rows.append(("report", str(record.report)))
    width = max(len(name) for name, _ in rows)
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    return terminal_lines(redact_text(line) for line in lines)
