"""The night's summary: JSON for tools, Markdown for people (and GitHub's job summary).

Both say, per entry, what was built from which revision, how long it took, how much the
compiler cache served, where the wheel is, and for a failure the stage, the first error and the
diagnosis. Everything written passes through redaction once more: an error paragraph may quote
a URL or a command line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pytorch_winbuild import atomic_file
from pytorch_winbuild.builder.report import _duration
from pytorch_winbuild.json_file import JsonObject, JsonValue
from pytorch_winbuild.nightly.entry import EntryResult
from pytorch_winbuild.nightly.retention import RetentionResult
from pytorch_winbuild.text.redact import redact_text

SUMMARY_FORMAT = 1
ICONS = {"success": "✅", "failed": "❌", "skipped": "⏭️", "interrupted": "⏹️", "not run": "⏸️", "missing": "🚫"}
# The results every summary counts; "missing" (a fleet's merge: the entry's runner sent no part) only where it is.
COUNTED = ("success", "failed", "skipped", "interrupted", "not run")
FAILING = ("failed", "interrupted", "missing")
FIRST_ERROR_LINES = 12  # of the first error block, in the Markdown


@dataclass
class NightlySummary:
    started: str
    date: str
    host: str
    matrix: str
    run_dir: Path
    stamp: str  # names this run's summary files
    forced: bool
    entries: list[EntryResult] = field(default_factory=list)
    seconds: float = 0.0
    retention: RetentionResult | None = None

    def count(self, result: str) -> int:
        return sum(1 for entry in self.entries if entry.result == result)

    @property
    def failed(self) -> list[EntryResult]:
        return [entry for entry in self.entries if entry.result in FAILING]

    def cache_totals(self) -> tuple[int, int]:
        hits = sum(_count(entry.compiler_cache, "hits") for entry in self.entries)
        misses = sum(_count(entry.compiler_cache, "misses") for entry in self.entries)
        return hits, misses

    def hit_rate(self) -> float | None:
        hits, misses = self.cache_totals()
        return hits / (hits + misses) if hits + misses else None

    def headline(self) -> str:
        total = len(self.entries)
        parts = [f"{self.count('success')} of {total} built"]
        for result in ("skipped", "failed", "interrupted", "missing", "not run"):
            if self.count(result):
                parts.append(f"{self.count(result)} {result}")
        return ", ".join(parts)

    def to_dict(self) -> JsonObject:
        hits, misses = self.cache_totals()
        rate = self.hit_rate()
        counts: JsonObject = {result: self.count(result) for result in COUNTED}
        if self.count("missing"):
            counts["missing"] = self.count("missing")
        return {
            "format": SUMMARY_FORMAT,
            "started": self.started,
            "date": self.date,
            "host": self.host,
            "matrix": self.matrix,
            "run_dir": str(self.run_dir),
            "forced": self.forced,
            "seconds": round(self.seconds, 3),
            "result": "failed" if self.failed else "success",
            "counts": counts,
            "compiler_cache": {"hits": hits, "misses": misses, "hit_rate": None if rate is None else round(rate, 4)},
            "entries": [entry.to_dict() for entry in self.entries],
            "retention": self.retention.to_dict() if self.retention else None,
        }

    @property
    def json_path(self) -> Path:
        return self.run_dir / f"nightly-{self.stamp}.json"

    @property
    def markdown_path(self) -> Path:
        return self.run_dir / f"nightly-{self.stamp}.md"

    def write(self) -> None:
        """Write both files through temporary ones, so a reader never sees half of one."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for path, text in (
            (self.json_path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"),
            (self.markdown_path, render_markdown(self)),
        ):
            atomic_file.write_text(path, redact_text(text), mode=atomic_file.SHARED)


def _count(cache: JsonObject | None, key: str) -> int:
    """A compiler cache's count of hits or misses; 0 when it gave none (None, or no cache)."""
    value = (cache or {}).get(key)
    return value if isinstance(value, int) else 0


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _cache_cell(entry: EntryResult) -> str:
    cache = entry.compiler_cache or {}
    rate, counts = entry.hit_rate(), entry.cache_counts()
    if rate is None or counts is None:
        return "–"
    hits, misses = counts
    backends = cache.get("backends")
    where = "/".join(name for name in backends if isinstance(name, str)) if isinstance(backends, list) else ""
    return f"{hits}/{hits + misses} ({100 * rate:.0f}%, {cache['engine']} {where or 'local'})"


def _result_cell(entry: EntryResult) -> str:
    text = f"{ICONS[entry.result]} {entry.result}"
    return text + (f" at {entry.stage}" if entry.result in FAILING and entry.stage else "")


def _first_error_block(first: JsonObject) -> tuple[JsonValue, list[str]]:
    """The line number of a first error block, and its first lines' text (the builder's triage wrote it, or the
    merge checked its shape: fleet_part._first_error)."""
    summary, lines = first.get("summary"), first.get("lines", [])
    number = summary.get("number") if isinstance(summary, dict) else None
    texts = [
        text
        for line in (lines if isinstance(lines, list) else [])
        if isinstance(line, dict) and isinstance(text := line.get("text"), str)
    ]
    return number, texts[:FIRST_ERROR_LINES]


def _failure_section(entry: EntryResult) -> list[str]:
    lines = [
        "",
        f"### {ICONS[entry.result]} {entry.name}: {entry.result}" + (f" at {entry.stage}" if entry.stage else ""),
        "",
        entry.error or "(no message)",
    ]
    first = entry.first_error
    if first:
        number, block = _first_error_block(first)
        lines += ["", f"First error (line {number} of `{entry.log}`):", "", "```", *block, "```"]
    for match in entry.diagnosis:
        lines += ["", f"**Diagnosis [{match['id']}] {match['title']}.** {match.get('fix', '')}"]
    if entry.report:
        lines += ["", f"Report: `{entry.report}`"]
    return lines


def render_markdown(summary: NightlySummary) -> str:
    rate = summary.hit_rate()
    lines = [
        f"## PyTorch nightly {summary.date}: {summary.headline()}",
        "",
        f"Host `{summary.host}` · started {summary.started} · {_duration(summary.seconds)} · matrix `{summary.matrix}`"
        + (f" · compiler cache {100 * rate:.0f}% hits" if rate is not None else "")
        + (" · --force" if summary.forced else ""),
        "",
        "| Entry | Result | Revision | Python | CUDA | Time | Compile | Cache hits | Wheel |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in summary.entries:
        compile_seconds = entry.stages.get("compile")
        lines.append(
            "| "
            + " | ".join(
                _cell(value)
                for value in (
                    entry.name,
                    _result_cell(entry),
                    f"`{entry.revision[:12]}`" if entry.revision else "–",
                    entry.python or "–",
                    entry.cuda,
                    _duration(entry.seconds),
                    _duration(compile_seconds) if compile_seconds is not None else "–",
                    _cache_cell(entry),
                    Path(entry.wheel).name if entry.wheel else "–",
                )
            )
            + " |"
        )
    notes = [(entry.name, note) for entry in summary.entries for note in entry.notes]
    if notes:
        lines += ["", *[f"- **{name}**: {_cell(note)}" for name, note in notes]]
    for entry in summary.failed:
        lines += _failure_section(entry)
    if summary.retention and (summary.retention.removed_folders or summary.retention.kept_wheels):
        retention = summary.retention
        lines += [
            "",
            f"Retention ({retention.keep_days} days): removed {len(retention.removed_folders)} old "
            f"folder(s); kept {len(retention.kept_wheels)} older wheel(s) as their entry's newest.",
        ]
    return "\n".join(lines) + "\n"


def publish_to_github(summary: NightlySummary, environ: dict[str, str]) -> None:
    """Append the Markdown to the job summary, and name this run's files as step outputs (for upload-artifact)."""
    step_summary = environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(redact_text(render_markdown(summary)))
    output = environ.get("GITHUB_OUTPUT")
    if output:
        with open(output, "a", encoding="utf-8") as handle:
            handle.write(
                redact_text(
                    f"run-dir={summary.run_dir}\nsummary-json={summary.json_path}\nsummary-md={summary.markdown_path}\n"
                )
            )
