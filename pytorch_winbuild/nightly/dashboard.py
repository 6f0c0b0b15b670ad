"""The nightly's dashboard: one static HTML page, `<output_dir>/index.html`, made from the summaries on disk.

No server, build step, CDN or JavaScript: it opens from file:// or any static server, its Content-Security-Policy
allows only its own inline styles, every text from a summary is HTML-escaped, and links are relative, to files that
exist. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import html
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from pytorch_winbuild.builder.report import _duration
from pytorch_winbuild.json_file import JsonObject, JsonValue, read_json
from pytorch_winbuild.nightly.index import ENTRY_INDEXES, INDEX_FOLDER, IndexResult, write_text_file
from pytorch_winbuild.nightly.retention import date_folders
from pytorch_winbuild.text.redact import redact_text

DASHBOARD_FILE = "index.html"
DEFAULT_NIGHTS = 14
SUMMARY_GLOB = "nightly-*.json"
FAILING = ("failed", "interrupted", "missing")  # missing: a fleet's runner sent no part (nightly/merge.py)
# The stages of an entry in the order they run; `compile` is the part of `build` spent compiling.
STAGES = ("disk", "source", "plan", "deps", "cache", "build", "collect")
STAGE_COLOURS = {
    "disk": "#b0bec5",
    "source": "#90caf9",
    "plan": "#ce93d8",
    "deps": "#ffcc80",
    "cache": "#80cbc4",
    "build": "#5c6bc0",
    "collect": "#a5d6a7",
    "other": "#e0e0e0",
}
RESULT_CLASS = {
    "success": "ok",
    "failed": "bad",
    "interrupted": "bad",
    "missing": "bad",
    "skipped": "skip",
    "not run": "skip",
}
FIRST_ERROR_LINES = 12
CHART_BAR, CHART_GAP, CHART_HEIGHT = 22, 6, 90
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1280px;
       padding: 0 16px 32px; color: #1c1c1c; background: #fafafa; }
h1 { margin: 16px 0 4px; } h2 { margin: 0; font-size: 1.2em; } h3 { font-size: 1em; margin: 12px 0 4px; }
code, pre { font: 12px/1.4 ui-monospace, "Cascadia Mono", Consolas, monospace; }
pre { background: #f1f1f1; padding: 8px; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 12px 16px; margin: 14px 0; }
section.entry.failing { border: 2px solid #c62828; box-shadow: 0 0 0 3px #ffcdd2; }
#failing { border: 2px solid #c62828; background: #ffebee; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 12px; }
.badge.ok { background: #c8e6c9; color: #1b5e20; } .badge.bad { background: #c62828; color: #fff; }
.badge.skip { background: #eceff1; color: #37474f; }
table { border-collapse: collapse; width: 100%; margin-top: 8px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
tr.bad > td:first-child { border-left: 4px solid #c62828; }
td.failure { background: #fff8f8; }
.muted { color: #666; } .diagnosis strong { color: #b71c1c; }
svg { display: block; margin: 6px 0; } .legend span { margin-right: 10px; white-space: nowrap; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 3px; vertical-align: middle; }
"""


def _e(value: object) -> str:
    """Untrusted text as HTML text or attribute value."""
    return html.escape("" if value is None else str(value), quote=True)


def _seconds(value: object) -> str:
    number = _number(value)
    if number is None:
        return "–"
    return f"{number:.1f}s" if number < 60 else _duration(number)


def _size(size: int | None) -> str:
    if size is None:
        return "–"
    amount = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if amount < 1024 or unit == "GB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GB"


def _text(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def _number(value: object) -> float | None:
    """A finite number, not negative (JSON allows NaN and Infinity; SVG does not, nor negative sizes); an integer
    beyond a float's range (10**400 seconds) is no number either."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return max(number, 0.0) if math.isfinite(number) else None


def entry_name(entry: Mapping[str, object]) -> str:
    """A summary's entry's name (each of Night.entries, and each record made to stand for one, has a string)."""
    return name if isinstance(name := entry.get("name"), str) else ""


def _dict(value: JsonValue) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _dicts(value: JsonValue) -> list[JsonObject]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# --------------------------------------------------------------------------------------------
# The nights on disk
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Night:
    """One nightly run: a summary JSON file in its date folder."""

    day: str
    stamp: str
    folder: Path  # the date folder that holds the summary now
    summary: Path
    data: JsonObject

    @property
    def label(self) -> str:
        started = _text(self.data, "started")
        return f"{self.day} {started[11:16]}" if started and len(started) >= 16 else self.day

    @property
    def entries(self) -> list[JsonObject]:
        return [entry for entry in _dicts(self.data.get("entries")) if _text(entry, "name")]


def load_nights(output_dir: Path) -> tuple[list[Night], list[str]]:
    """Every readable run summary under the output folder, oldest first; and the unreadable ones."""
    nights, problems = [], []
    for day, folder in date_folders(output_dir):
        for path in sorted(folder.glob(SUMMARY_GLOB)):
            data: JsonValue
            try:
                data = read_json(path, allow_nonfinite=True)  # the numbers are checked where shown
            except (OSError, ValueError) as error:
                problems.append(f"{path.relative_to(output_dir).as_posix()}: unreadable ({error})")
                continue
            if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
                problems.append(f"{path.relative_to(output_dir).as_posix()}: not a nightly summary")
                continue
            nights.append(Night(day.isoformat(), path.stem.removeprefix("nightly-"), folder, path, data))
    nights.sort(key=lambda night: (night.day, _text(night.data, "started") or "", night.stamp))
    return nights, problems


class Links:
    """Relative links from the dashboard to files inside the output folder, and only those."""

    def __init__(self, output_dir: Path) -> None:
        self.root = output_dir.resolve()

    def local(self, value: JsonValue, night: Night) -> Path | None:
        """The file a summary's recorded path names now: moved with its date folder, inside the output folder.

        A path in another date folder (a skipped entry's wheel, from the night that built it) moves with the
        output folder: it is taken relative to the folder that held the run's date folder when it was recorded."""
        if not isinstance(value, str) or not value or "\x00" in value:
            return None
        recorded = Path(value)
        candidates = []
        run_dir = _text(night.data, "run_dir")
        if run_dir:
            with contextlib.suppress(ValueError):
                candidates.append(night.folder / recorded.relative_to(run_dir))
            with contextlib.suppress(ValueError):
                candidates.append(night.folder.parent / recorded.relative_to(Path(run_dir).parent))
        if recorded.is_absolute():
            candidates.append(recorded)
        for candidate in candidates:
            try:
                resolved = candidate.resolve()
                if resolved.is_relative_to(self.root) and resolved.is_file():
                    return resolved
            except (OSError, RuntimeError, ValueError):
                continue
        return None

    def href(self, path: Path) -> str:
        return "/".join(quote(part, safe="") for part in path.resolve().relative_to(self.root).parts)

    def anchor(self, path: Path | None, text: str) -> str:
        if path is None:
            return f'<span class="muted">{_e(text)}</span>'
        return f'<a href="{_e(self.href(path))}">{_e(text)}</a>'


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _result(entry: JsonObject) -> str:
    result = _text(entry, "result") or "not run"
    return result if result in RESULT_CLASS else "not run"


def _badge(entry: JsonObject) -> str:
    result = _result(entry)
    stage = _text(entry, "stage")
    text = result + (f" at {stage}" if result in FAILING and stage else "")
    return f'<span class="badge {RESULT_CLASS[result]}">{_e(text)}</span>'


def _hit_rate(entry: JsonObject) -> float | None:
    rate = _number(entry.get("hit_rate"))
    if rate is not None:
        return rate
    cache = _dict(entry.get("compiler_cache"))
    hits, misses = _number(cache.get("hits")), _number(cache.get("misses"))
    return hits / (hits + misses) if hits is not None and misses is not None and hits + misses else None


def _cache_cell(entry: JsonObject) -> str:
    rate = _hit_rate(entry)
    cache = _dict(entry.get("compiler_cache"))
    if rate is None:
        return "–"
    hits, misses = int(_number(cache.get("hits")) or 0), int(_number(cache.get("misses")) or 0)
    engine = _text(cache, "engine") or ""
    return f"{100 * rate:.0f}% <span class='muted'>({hits}/{hits + misses} {_e(engine)})</span>"


def _stage_seconds(entry: JsonObject) -> list[tuple[str, float]]:
    stages = _dict(entry.get("stages"))
    known = [(name, value) for name in STAGES if (value := _number(stages.get(name))) is not None]
    other = sum(
        value
        for name, raw in stages.items()
        if name not in STAGES and name != "compile" and (value := _number(raw)) is not None
    )
    return known + ([("other", other)] if other else [])


def _phases_cell(entry: JsonObject) -> str:
    parts = [f"{_e(name)} {_seconds(value)}" for name, value in _stage_seconds(entry)]
    return " · ".join(parts) if parts else "–"


def _failure(entry: JsonObject, night: Night, links: Links, open_: bool) -> str:
    """The error paragraph, the first error block and the diagnosis of a failed entry."""
    parts = [f'<p class="error">{_e(_text(entry, "error") or "(no message)")}</p>']
    first = _dict(entry.get("first_error"))
    lines = _dicts(first.get("lines"))[:FIRST_ERROR_LINES]
    summary = _dict(first.get("summary"))
    if first:
        log = links.local(entry.get("log"), night)
        log_name = Path(str(entry.get("log") or "log")).name
        where = f" (line {_e(summary.get('number'))} of {links.anchor(log, log_name)})"
        parts.append(
            f'<h3>First error{where}</h3><p class="first-error-summary"><code>{_e(summary.get("text"))}</code></p>'
        )
        if lines:
            block = "\n".join(f"{_e(line.get('number'))}: {_e(line.get('text'))}" for line in lines)
            parts.append(f'<pre class="first-error">{block}</pre>')
    diagnosis = _dicts(entry.get("diagnosis"))
    if diagnosis:
        items = "".join(
            f"<li><strong>[{_e(match.get('id'))}] {_e(match.get('title'))}</strong>"
            f"<br>{_e(match.get('explanation'))}<br><em>Fix:</em> {_e(match.get('fix'))}</li>"
            for match in diagnosis
        )
        parts.append(f'<h3>Diagnosis</h3><ul class="diagnosis">{items}</ul>')
    elif first or _text(entry, "log"):  # a missing entry (no part came back) has no log to diagnose
        parts.append('<p class="muted">No diagnosis rule matched this log.</p>')
    summary_text = "Failure details" + (f" — [{_e(diagnosis[0].get('id'))}]" if diagnosis else "")
    return f"<details{' open' if open_ else ''}><summary>{summary_text}</summary>{''.join(parts)}</details>"


def _row(entry: JsonObject, night: Night, links: Links, newest_failure: bool) -> str:
    result = _result(entry)
    wheel = links.local(entry.get("wheel"), night)
    wheel_name = Path(str(entry.get("wheel"))).name if _text(entry, "wheel") else None
    wheel_cell = "–"
    if wheel_name:
        try:
            size = _size(wheel.stat().st_size) if wheel is not None else "gone"
        except OSError:
            size = "gone"
        wheel_cell = f"{links.anchor(wheel, wheel_name)} <span class='muted'>({size})</span>"
    log, report = links.local(entry.get("log"), night), links.local(entry.get("report"), night)
    revision = _text(entry, "revision")
    compile_seconds = _dict(entry.get("stages")).get("compile")
    notes_list = entry.get("notes")
    notes = "".join(
        f"<br><span class='muted'>{_e(note)}</span>" for note in (notes_list if isinstance(notes_list, list) else [])
    )
    markdown = night.summary.with_suffix(".md")
    cells = [
        links.anchor(markdown if markdown.is_file() else None, night.label),
        _badge(entry) + notes,
        f"<code>{_e(revision[:12])}</code>" if revision else "–",
        _e(_text(entry, "python") or "–"),
        _seconds(entry.get("seconds")),
        _phases_cell(entry),
        _seconds(compile_seconds),
        _cache_cell(entry),
        wheel_cell,
        links.anchor(log, "log") if log else "–",
        links.anchor(report, "report") if report else "–",
    ]
    row = f'<tr class="{RESULT_CLASS[result]}">' + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"
    if result in FAILING:
        row += f'<tr class="{RESULT_CLASS[result]} detail"><td class="failure" colspan="{len(cells)}">'
        row += _failure(entry, night, links, newest_failure) + "</td></tr>"
    return row


def _trend_chart(history: list[tuple[Night, JsonObject]], title: str) -> str:
    """Stacked bars of phase durations per night, oldest left; a failure's bar outlined in red."""
    totals = [sum(value for _, value in _stage_seconds(entry)) for _, entry in history]
    top = max([*totals, 1e-9])
    width = len(history) * (CHART_BAR + CHART_GAP) + CHART_GAP
    parts = [
        f'<svg class="trend" role="img" width="{width + 48}" height="{CHART_HEIGHT + 24}" '
        f'viewBox="0 0 {width + 48} {CHART_HEIGHT + 24}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{_e(title)}</title>",
        f'<line x1="0" y1="{CHART_HEIGHT}" x2="{width}" y2="{CHART_HEIGHT}" stroke="#999"/>',
    ]
    if history:
        parts.append(f'<text x="{width + 4}" y="10" font-size="10" fill="#666">{_e(_seconds(top))}</text>')
    for index, (night, entry) in enumerate(history):
        x = CHART_GAP + index * (CHART_BAR + CHART_GAP)
        result = _result(entry)
        stages = _stage_seconds(entry)
        tooltip = f"{night.label}: {result}, {_seconds(entry.get('seconds'))}" + "".join(
            f"; {name} {_seconds(value)}" for name, value in stages
        )
        parts.append(f'<g class="night {RESULT_CLASS[result]}"><title>{_e(tooltip)}</title>')
        y = float(CHART_HEIGHT)
        for name, value in stages:
            height = CHART_HEIGHT * value / top
            y -= height
            parts.append(
                f'<rect x="{x}" y="{y:.2f}" width="{CHART_BAR}" height="{height:.2f}" fill="{STAGE_COLOURS[name]}"/>'
            )
        if result in FAILING:
            parts.append(
                f'<rect x="{x - 1}" y="{min(y, CHART_HEIGHT - 4) - 1:.2f}" width="{CHART_BAR + 2}" '
                f'height="{CHART_HEIGHT - min(y, CHART_HEIGHT - 4) + 1:.2f}" fill="none" stroke="#c62828" '
                'stroke-width="2"/>'
            )
        colour = {"ok": "#2e7d32", "bad": "#c62828", "skip": "#90a4ae"}[RESULT_CLASS[result]]
        parts.append(f'<circle cx="{x + CHART_BAR / 2}" cy="{CHART_HEIGHT + 10}" r="5" fill="{colour}"/></g>')
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> str:
    items = "".join(
        f'<span><i class="swatch" style="background:{colour}"></i>{name}</span>'
        for name, colour in STAGE_COLOURS.items()
    )
    return (
        f'<p class="legend muted">Nights: green built, red failed, grey skipped. Entries\' charts: seconds per phase '
        f"{items}; the dot is the night's result, a failure's bar is outlined in red.</p>"
    )


def _nights_chart(nights: list[Night]) -> str:
    """Per night, entries built / failed / skipped as stacked bars."""
    counts = []
    for night in nights:
        results = [_result(entry) for entry in night.entries]
        counts.append(
            (
                sum(r == "success" for r in results),
                sum(r in FAILING for r in results),
                sum(r not in FAILING and r != "success" for r in results),
            )
        )
    top = max([sum(c) for c in counts] + [1])
    width = len(nights) * (CHART_BAR + CHART_GAP) + CHART_GAP
    parts = [
        f'<svg class="nights" role="img" width="{width}" height="{CHART_HEIGHT + 4}" '
        f'viewBox="0 0 {width} {CHART_HEIGHT + 4}" xmlns="http://www.w3.org/2000/svg">',
        "<title>Entries built, failed and skipped per night</title>",
    ]
    for index, (night, (built, failed, other)) in enumerate(zip(nights, counts, strict=True)):
        x = CHART_GAP + index * (CHART_BAR + CHART_GAP)
        parts.append(f"<g><title>{_e(f'{night.label}: {built} built, {failed} failed, {other} skipped')}</title>")
        y = float(CHART_HEIGHT)
        for amount, colour in ((built, "#66bb6a"), (failed, "#e53935"), (other, "#b0bec5")):
            height = CHART_HEIGHT * amount / top
            y -= height
            if amount:
                parts.append(f'<rect x="{x}" y="{y:.2f}" width="{CHART_BAR}" height="{height:.2f}" fill="{colour}"/>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _failing_reason(entry: JsonObject) -> str:
    """The diagnosis' title, else the first error's line, else the error's first words."""
    diagnosis = _dicts(entry.get("diagnosis"))
    if diagnosis:
        return f' <strong class="diagnosis">[{_e(diagnosis[0].get("id"))}] {_e(diagnosis[0].get("title"))}</strong>'
    text = _text(_dict(_dict(entry.get("first_error")).get("summary")), "text") or _text(entry, "error") or ""
    text = " ".join(text.split())
    return f" <code>{_e(text[:200] + ('…' if len(text) > 200 else ''))}</code>" if text else ""


def _slug(name: str, index: int) -> str:
    return f"entry-{re.sub(r'[^A-Za-z0-9_.-]', '-', name)[:60]}-{index}"


def _entry_names(nights: Iterable[Night]) -> list[str]:
    """Entry names, the newest night's order first, then entries seen only in earlier nights."""
    names: list[str] = []
    for night in reversed(list(nights)):
        for entry in night.entries:
            if entry_name(entry) not in names:
                names.append(entry_name(entry))
    return names


def _failing_section(failing: list[str], newest: dict[str, JsonObject], ids: dict[str, str]) -> str:
    """The list at the top of the page: each failing entry, linked to its section, with why it fails."""
    items = "".join(
        f'<li><a href="#{ids[name]}">{_e(name)}</a> {_badge(newest[name])}' + _failing_reason(newest[name]) + "</li>"
        for name in failing
    )
    return f'<section id="failing"><h2>Failing now</h2><ul>{items}</ul></section>'


def _entry_section(
    name: str, history: list[tuple[Night, JsonObject]], anchor: str, links: Links, *, failing: bool, indexed: bool
) -> str:
    """One entry's section: its newest result, where it builds from, its trend chart and a row per night."""
    newest_night, newest = history[-1]
    meta = " · ".join(
        _e(value)
        for value in (
            _text(newest, "repo"),
            _text(newest, "ref") or "(default branch)",
            f"CUDA {_text(newest, 'cuda') or '?'}",
            f"Python {_text(newest, 'python') or '?'}",
        )
        if value
    )
    index_link = f' · <a href="{_e(_entry_index_href(name))}">its pip index</a>' if indexed else ""
    rows = "".join(
        _row(entry, night, links, newest_failure=(night is newest_night)) for night, entry in reversed(history)
    )
    return (
        f'<section class="entry{" failing" if failing else ""}" id="{anchor}" data-entry="{_e(name)}" '
        f'data-result="{_e(_result(newest))}">'
        f"<h2>{_e(name)} {_badge(newest)}</h2>"
        f'<p class="muted">{meta}{index_link}</p>'
        f"{_trend_chart(history, f'{name}: phase durations per night')}"
        "<table><thead><tr><th>Night</th><th>Result</th><th>Revision</th><th>Python</th><th>Time</th>"
        "<th>Phases</th><th>Compile</th><th>Cache hits</th><th>Wheel</th><th>Log</th><th>Report</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def render_dashboard(
    output_dir: Path,
    nights: list[Night],
    *,
    keep: int = DEFAULT_NIGHTS,
    index: IndexResult | None = None,
    problems: Iterable[str] = (),
    generated: datetime | None = None,
) -> str:
    """The page for the last `keep` nights of `nights` (oldest first)."""
    links = Links(output_dir)
    shown = nights[-keep:] if keep > 0 else []
    names = _entry_names(shown)
    histories = {
        name: [(night, entry) for night in shown for entry in night.entries if entry["name"] == name] for name in names
    }
    ids = {name: _slug(name, number) for number, name in enumerate(names)}
    failing = [name for name in names if _result(histories[name][-1][1]) in FAILING]
    latest = shown[-1] if shown else None
    stamp = (generated or datetime.now(UTC)).isoformat(timespec="seconds")
    headline = f"{len(failing)} of {len(names)} entries failing" if names else "no nights yet"

    body = [
        "<header>",
        "<h1>PyTorch nightly wheels</h1>",
        f'<p class="muted">{_e(headline)} · {len(shown)} night(s) shown of {len(nights)} kept'
        + (f" · latest {_e(latest.label)} on {_e(_text(latest.data, 'host') or '?')}" if latest else "")
        + f" · page generated {_e(stamp)}</p>",
        "</header>",
    ]
    if failing:
        body.append(_failing_section(failing, {name: histories[name][-1][1] for name in failing}, ids))

    body.append(_install_section(index))

    if shown:
        summaries = " · ".join(
            links.anchor(night.summary.with_suffix(".md"), night.label) + f" ({links.anchor(night.summary, 'json')})"
            for night in reversed(shown)
        )
        body.append(
            f'<section id="nights"><h2>Nights</h2>{_nights_chart(shown)}<p class="summaries">Summaries: {summaries}</p>'
            f"{_legend()}</section>"
        )

    for name in names:
        indexed = bool(index and name in index.entries)
        body.append(_entry_section(name, histories[name], ids[name], links, failing=name in failing, indexed=indexed))
    problem_list = list(problems) + (index.problems if index else [])
    if problem_list:
        items = "".join(f"<li>{_e(problem)}</li>" for problem in problem_list)
        body.append(f'<section id="problems"><h2>Files left out</h2><ul>{items}</ul></section>')
    title = f"PyTorch nightly: {headline}"
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<link rel="icon" href="data:,">',
            f"<title>{_e(title)}</title>",
            f"<style>{STYLE}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def _entry_index_href(name: str) -> str:
    return f"{ENTRY_INDEXES}/{quote(name, safe='')}/{INDEX_FOLDER}/"


def _install_section(index: IndexResult | None) -> str:
    if index is None:
        return ""
    projects = sorted(index.projects)
    example = _e(projects[0] if projects else "<project>")
    entry_links = " · ".join(
        f'<a href="{_e(_entry_index_href(name))}">{_e(name)}</a>' for name in sorted(index.entries)
    )
    listing = ", ".join(
        f"{_e(name)} ({len(files)} wheel{'s' if len(files) != 1 else ''})"
        for name, files in sorted(index.projects.items())
    )
    first_entry = (
        _e(_entry_index_href(sorted(index.entries)[0])) if index.entries else f"{ENTRY_INDEXES}/&lt;entry&gt;/"
    )
    return (
        '<section id="install"><h2>Install</h2>'
        f'<p>The <a href="{INDEX_FOLDER}/">pip index</a> holds every kept wheel: {listing or "none yet"}. '
        "Each entry also has its own index, with its wheels only (entries can build wheels of the same name): "
        f"{entry_links or '–'}. Use the URL of the folder this page is in, http(s):// or file://:</p>"
        f"<pre>pip install --index-url &lt;this folder&gt;/{INDEX_FOLDER}/ {example}\n"
        f"pip install --index-url &lt;this folder&gt;/{first_entry} {example}</pre>"
        "</section>"
    )


def write_dashboard(
    output_dir: Path, *, keep: int = DEFAULT_NIGHTS, index: IndexResult | None = None, generated: datetime | None = None
) -> Path:
    """Regenerate `<output_dir>/index.html` from the summaries on disk; its path."""
    nights, problems = load_nights(output_dir)
    page = render_dashboard(output_dir, nights, keep=keep, index=index, problems=problems, generated=generated)
    path = output_dir / DASHBOARD_FILE
    write_text_file(path, redact_text(page))  # the summaries were redacted; once more, as every output is
    return path
