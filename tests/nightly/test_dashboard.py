"""The nightly's dashboard (<output_dir>/index.html): made from the summaries the nightly writes, rendered by a
real headless Chromium from file:// and over a real HTTP server; hostile text stays text."""

from __future__ import annotations

import json
import re
import shutil
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

import pytest
from channel_support import assert_links_resolve, check_dashboard, chromium, console_problems, http_server
from support import run_invoke

from pytorch_winbuild.nightly.entry import EntryResult
from pytorch_winbuild.nightly.site import write_site
from pytorch_winbuild.nightly.summary import NightlySummary

DAYS = ("2026-03-01", "2026-03-02", "2026-03-03")
HOSTILE_SCRIPT = "<script>alert(1)</script>"
HOSTILE_ATTRIBUTE = '"><img src=x onerror=alert(1)>'
OOM_TITLE = "[out-of-memory] The machine ran out of memory during the build"
OOM = {
    "id": "out-of-memory",
    "phase": "build",
    "title": "The machine ran out of memory during the build",
    "explanation": "Too many compiler processes run at once for the RAM.",
    "fix": "Lower the parallelism: `invoke build --jobs 4`.",
    "source": "PyTorch build notes on MAX_JOBS",
    "line": {"number": 41, "text": "virtual memory exhausted"},
    "count": 1,
}


class Page(HTMLParser):
    """Every element's tag and attributes, the links, and the text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def hrefs(self) -> list[str]:
        return [str(attrs["href"]) for tag, attrs in self.elements if tag == "a" and attrs.get("href")]

    def sections(self) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.elements if tag == "section" and attrs.get("data-entry") is not None]


def _file(path: Path, text: str | bytes = "x\n") -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def _entry(name: str, result: str, run_dir: Path, *, wheel_bytes: int = 0, **fields: Any) -> EntryResult:
    """An entry's result as the nightly records it, with its log, report and wheel on disk."""
    entry = EntryResult(name, f"https://github.com/pytorch/pytorch.git#{name}", "main", "cpu")
    entry.result, entry.python, entry.revision = result, "3.11.9", "0123456789abcdef" * 2 + "01234567"
    entry.stages = {"disk": 0.1, "source": 12.0, "plan": 0.4, "deps": 1.0, "cache": 0.2, "build": 300.0}
    entry.seconds = 314.0
    entry.log = _file(run_dir / name / "build-020000.log", f"the build log of {name} on {run_dir.name}\n")
    entry.report = _file(run_dir / name / "build-020000.json", json.dumps({"result": result}))
    if result == "success":
        entry.stages |= {"compile": 280.0, "collect": 0.3}
        entry.compiler_cache = {"engine": "sccache", "backends": ["redis"], "hits": 300, "misses": 100}
        wheel = run_dir / name / "torch-2.13.0a0+git0123456-cp311-cp311-win_amd64.whl"
        entry.wheel = _file(wheel, b"w" * wheel_bytes)
    for key, value in fields.items():
        setattr(entry, key, value)
    return entry


def _night(output: Path, day: str, entries: list[EntryResult], stamp: str = "020000") -> NightlySummary:
    """A night's summary, written by the nightly's own writer."""
    summary = NightlySummary(
        started=f"{day}T02:00:00+00:00",
        date=day,
        host="build-01",
        matrix="build_config/nightly.toml",
        run_dir=output / day,
        stamp=f"{day.replace('-', '')}-{stamp}",
        forced=False,
        entries=entries,
        seconds=sum(entry.seconds for entry in entries),
    )
    summary.write()
    return summary


def _failure(
    name: str, run_dir: Path, error: str = "build failed: exited with status 1.", **fields: Any
) -> EntryResult:
    return _entry(
        name,
        "failed",
        run_dir,
        stage="build",
        exit_code=5,
        error=error,
        first_error={
            "kind": "compiler",
            "line_number": 40,
            "end_line_number": 41,
            "summary": {"number": 41, "text": "cc1plus: virtual memory exhausted: Cannot allocate memory"},
            "lines": [
                {"number": 40, "text": "FAILED: CMakeFiles/torch_cpu.dir/big.cpp.obj"},
                {"number": 41, "text": "cc1plus: virtual memory exhausted: Cannot allocate memory"},
            ],
        },
        diagnosis=[OOM],
        **fields,
    )


def three_nights(output: Path) -> dict[str, Any]:
    """cpu: built, built, skipped (its wheel from the second night); cu124: built, then failing twice; retired: the
    first night only."""
    day1, day2, day3 = (output / day for day in DAYS)
    _night(
        output,
        DAYS[0],
        [
            _entry("cpu", "success", day1, wheel_bytes=1000),
            _entry("cu124", "success", day1, wheel_bytes=3 * 1024 * 1024),
            _entry("retired", "success", day1, wheel_bytes=10),
        ],
    )
    cpu2 = _entry("cpu", "success", day2, wheel_bytes=2048)
    _night(output, DAYS[1], [cpu2, _failure("cu124", day2)])
    skipped = _entry("cpu", "skipped", day3, wheel=cpu2.wheel, notes=["skipped: unchanged since 2026-03-02"])
    skipped.stages = {"disk": 0.1, "source": 2.0, "plan": 0.3}
    newest_failure = _failure("cu124", day3)
    _night(output, DAYS[2], [skipped, newest_failure])
    return {"cpu_wheel": Path(str(cpu2.wheel)), "failure": newest_failure}


def resolves(page: Path, href: str) -> bool:
    """A relative link of the page names a file (or a folder with index.html) inside the output folder."""
    url, fragment = urldefrag(urljoin(page.as_uri(), href))
    path = Path(unquote(url.removeprefix("file://")))
    if not path.resolve().is_relative_to(page.parent.resolve()):
        return False
    if href.startswith("#"):
        return f'id="{fragment}"' in page.read_text(encoding="utf-8")
    return path.is_file() or (path / "index.html").is_file()


def test_the_dashboard_shows_each_entry_s_last_nights(tmp_path: Path) -> None:
    output = tmp_path / "nightly"
    made = three_nights(output)
    (output / DAYS[0] / "retired" / "build-020000.log").unlink()  # a file that is gone: named, not linked

    site = write_site(output)

    assert site.dashboard == output / "index.html"
    text = site.dashboard.read_text(encoding="utf-8")
    page = Page(text)
    sections = page.sections()
    assert [section["data-entry"] for section in sections] == ["cpu", "cu124", "retired"]
    assert [(section["class"], section["data-result"]) for section in sections] == [
        ("entry", "skipped"),
        ("entry failing", "failed"),
        ("entry", "success"),
    ]
    cu124 = text[text.index('data-entry="cu124"') : text.index('data-entry="retired"')]
    assert cu124.count('<tr class="ok">') == 1 and cu124.count('<tr class="bad">') == 2
    assert "[out-of-memory] The machine ran out of memory during the build" in cu124
    assert "cc1plus: virtual memory exhausted: Cannot allocate memory" in cu124
    assert cu124.count("<details open>") == 1 and cu124.count("<details>") == 1  # the newest failure is open
    failing = text[text.index('<section id="failing">') : text.index('<section id="install">')]
    assert 'href="#entry-cu124-1"' in failing and "[out-of-memory]" in failing and 'id="entry-cu124-1"' in text
    # Phases, compile time, the cache's hit rate, wheel sizes; the skipped night links the wheel it kept.
    assert "disk 0.1s · source 12.0s · plan 0.4s · deps 1.0s · cache 0.2s · build 5m 00s · collect 0.3s" in text
    assert "<td>4m 40s</td>" in text and "75% <span class='muted'>(300/400 sccache)</span>" in text
    assert "(2.0 KB)" in text and "(3.0 MB)" in text and "(1000 B)" in text
    cpu_wheel_link = made["cpu_wheel"].relative_to(output).as_posix().replace("+", "%2B")
    assert text.count(f'href="{cpu_wheel_link}"') == 2  # the night that built it, and the night that skipped
    assert "skipped: unchanged since 2026-03-02" in text
    # Links: relative, and only to files that exist inside the output folder.
    hrefs = page.hrefs()
    assert hrefs and all(resolves(site.dashboard, href) for href in hrefs)
    assert not any(href.startswith(("/", "file:", "http")) for href in hrefs)
    assert f"{DAYS[0]}/retired/build-020000.json" in hrefs and f"{DAYS[0]}/retired/build-020000.log" not in hrefs
    assert f"{DAYS[2]}/cu124/build-020000.log" in hrefs and "simple/" in hrefs and "entries/cpu/simple/" in hrefs
    assert f"{DAYS[2]}/nightly-20260303-020000.md" in hrefs and f"{DAYS[2]}/nightly-20260303-020000.json" in hrefs
    # No script, no event handler, no resource from anywhere: a policy that allows none.
    assert not [tag for tag, _ in page.elements if tag in ("script", "iframe", "object", "embed", "img")]
    assert not [name for _, attrs in page.elements for name in attrs if name.startswith("on")]
    assert "default-src 'none'" in text and "https://" not in text.replace("https://github.com/pytorch/", "")


def test_only_the_last_nights_are_shown(tmp_path: Path) -> None:
    output = tmp_path / "nightly"
    three_nights(output)
    site = write_site(output, nights=2)
    text = site.dashboard.read_text(encoding="utf-8")
    assert [section["data-entry"] for section in Page(text).sections()] == ["cpu", "cu124"]  # retired: older
    assert "2 night(s) shown of 3 kept" in text and DAYS[0] not in text


def test_hostile_text_from_a_summary_stays_text(tmp_path: Path) -> None:
    output = tmp_path / "nightly"
    hostile = f"{HOSTILE_SCRIPT} {HOSTILE_ATTRIBUTE}"
    entry = _failure(
        "cu124", output / DAYS[0], error=f"build failed: {hostile}", notes=[hostile], python=HOSTILE_ATTRIBUTE
    )
    entry.first_error["summary"]["text"] = hostile  # type: ignore[index]
    entry.first_error["lines"][1]["text"] = hostile  # type: ignore[index]
    entry.diagnosis = [{**OOM, "id": HOSTILE_ATTRIBUTE, "title": HOSTILE_SCRIPT, "fix": hostile}]
    _night(output, DAYS[0], [entry])
    summary = output / DAYS[0] / "nightly-20260301-020000.json"
    data = json.loads(summary.read_text())
    data["entries"][0]["name"] = HOSTILE_ATTRIBUTE  # names are checked by the matrix; the page does not rely on it
    data["entries"][0]["stage"] = HOSTILE_SCRIPT
    summary.write_text(json.dumps(data))

    text = write_site(output).dashboard.read_text(encoding="utf-8")

    page = Page(text)
    assert not [tag for tag, _ in page.elements if tag in ("script", "img")]
    assert not [name for _, attrs in page.elements for name in attrs if name.startswith("on")]
    assert "<script>alert" not in text and "<img src=x" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in text
    assert [section["data-entry"] for section in page.sections()] == [HOSTILE_ATTRIBUTE]
    assert "".join(page.text).count(hostile) >= 4  # error, first-error line and block, fix, note: as text


def test_odd_numbers_in_a_summary_never_break_the_page(tmp_path: Path) -> None:
    output = tmp_path / "nightly"
    _night(output, DAYS[0], [_failure("cu124", output / DAYS[0])])
    data = json.loads((output / DAYS[0] / "nightly-20260301-020000.json").read_text())
    data["entries"][0] |= {
        "stages": {"disk": float("nan"), "source": -5.0, "build": float("inf"), "deps": "7", "plan": True},
        "seconds": float("-inf"),  # json writes these as NaN, Infinity, -Infinity, and reads them back
        "compiler_cache": {"engine": "sccache", "hits": float("nan"), "misses": -3},
        "hit_rate": float("nan"),
    }
    data["entries"].append({"name": "not-a-dict-inside", "stages": [1, 2], "diagnosis": "x", "first_error": [1]})
    data["entries"].append(["not", "an", "entry"])
    (output / DAYS[0] / "nightly-20260301-020000.json").write_text(json.dumps(data))

    text = write_site(output).dashboard.read_text(encoding="utf-8")

    assert [section["data-entry"] for section in Page(text).sections()] == ["cu124", "not-a-dict-inside"]
    assert not re.search(r"\b(nan|inf)\b", text, re.IGNORECASE) and 'height="-' not in text and 'y="-' not in text
    assert "source 0.0s" in text  # a negative duration reads as none


def test_moved_folders_link_where_they_are_now_and_nothing_outside(tmp_path: Path) -> None:
    output = tmp_path / "nightly"
    three_nights(output)
    moved = tmp_path / "elsewhere" / "nightly"
    shutil.copytree(output, moved)
    shutil.rmtree(output)
    outside = _file(tmp_path / "secret.txt", "not for the page\n")
    summary = moved / DAYS[2] / "nightly-20260303-020000.json"
    data = json.loads(summary.read_text())
    data["entries"][1]["report"] = outside
    data["entries"][1]["log"] = str(moved / DAYS[2] / ".." / ".." / ".." / "secret.txt")
    summary.write_text(json.dumps(data))
    (moved / DAYS[1] / "nightly-20260302-020000.json").write_text("{ not json")

    text = write_site(moved).dashboard.read_text(encoding="utf-8")

    hrefs = Page(text).hrefs()
    assert f"{DAYS[2]}/cpu/build-020000.log" in hrefs  # recorded under the old folder, found in the new one
    assert all(resolves(moved / "index.html", href) for href in hrefs) and "secret" not in " ".join(hrefs)
    assert [section["data-entry"] for section in Page(text).sections()] == ["cpu", "cu124", "retired"]
    assert f"{DAYS[1]}/nightly-20260302-020000.json: unreadable (" in text


def _site(*args: str) -> int:
    """`invoke nightly-site ARGS`, as the workflow runs it: its exit code (an error is one paragraph, no traceback)."""
    done = run_invoke("nightly-site", *args)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0 or done.stderr.startswith("configuration error: "), done.stderr
    return done.returncode


def test_the_site_command_regenerates_and_stages_what_the_pages_link(tmp_path: Path) -> None:
    output = tmp_path / "nightly"
    three_nights(output)
    (output / "state.json").write_text("{}\n")
    wheel_name = "torch-2.13.0a0+git0123456-cp311-cp311-win_amd64.whl"
    _file(output / DAYS[0] / "cpu" / f"{wheel_name}.nightly.json", "{}\n")  # the record beside a wheel
    stage = tmp_path / "stage"

    assert _site(str(output)) == 0
    assert (output / "index.html").is_file() and (output / "simple" / "torch" / "index.html").is_file()
    assert _site(str(output), "--stage", str(stage), "--wheels", "newest") == 0

    staged = sorted(path.relative_to(stage).as_posix() for path in stage.rglob("*") if path.is_file())
    assert "index.html" in staged and "simple/index.html" in staged and "entries/cpu/simple/index.html" in staged
    assert [name for name in staged if name.endswith(".whl")] == [
        f"{DAYS[0]}/cu124/{wheel_name}",  # each entry's newest wheel only
        f"{DAYS[0]}/retired/{wheel_name}",
        f"{DAYS[1]}/cpu/{wheel_name}",
    ]
    assert f"{DAYS[0]}/cpu/{wheel_name}.nightly.json" not in staged  # left with its wheel
    assert f"{DAYS[0]}/cpu/build-020000.log" in staged and f"{DAYS[2]}/nightly-20260303-020000.md" in staged
    assert "state.json" not in staged and not [name for name in staged if "/." in name or name.startswith(".")]
    # The copy's own index and dashboard: exactly what it holds, every link resolving in it.
    assert len(Page((stage / "simple" / "torch" / "index.html").read_text()).hrefs()) == 1  # one file name
    assert len(Page((stage / "entries" / "cpu" / "simple" / "torch" / "index.html").read_text()).hrefs()) == 1
    hrefs = Page((stage / "index.html").read_text(encoding="utf-8")).hrefs()
    assert all(resolves(stage / "index.html", href) for href in hrefs)
    assert f"{DAYS[0]}/cpu/{wheel_name.replace('+', '%2B')}" not in hrefs
    assert _site(str(output), "--stage", str(stage)) == 2  # never into a folder that holds something
    assert _site(str(tmp_path / "missing")) == 2
    assert _site(str(output), "--wheels", "oldest") == 2
    assert _site(str(output), "--nights", "-1") == 2
    everything = tmp_path / "everything"
    assert _site(str(output), "--stage", str(everything), "--nights", "3") == 0
    assert len(list(everything.rglob("*.whl"))) == 4  # every kept wheel


# --------------------------------------------------------------------------------------------
# In a real browser
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.mark.browser
@pytest.mark.xdist_group("nightly-dashboard-browser")  # one Chromium for both
def test_chromium_renders_the_dashboard_from_file_and_over_http(tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    output = tmp_path / "nightly"
    three_nights(output)
    dashboard = write_site(output).dashboard
    expected = ["cpu", "cu124", "retired"]

    hrefs = check_dashboard(browser, dashboard.as_uri(), expected, "cu124", OOM_TITLE)
    assert_links_resolve(browser, hrefs)

    with http_server(output) as served:
        hrefs = check_dashboard(browser, served.url, expected, "cu124", OOM_TITLE)
        assert_links_resolve(browser, hrefs)
        log = next(href for href in hrefs if href.endswith(f"{DAYS[2]}/cu124/build-020000.log"))
        with urllib.request.urlopen(log, timeout=10) as response:  # servers send .log as a download
            assert response.read().decode() == f"the build log of cu124 on {DAYS[2]}\n"
        report = next(href for href in hrefs if href.endswith(f"{DAYS[2]}/cu124/build-020000.json"))
        browser.get(report)  # followed from the page, the report opens in the browser
        assert json.loads(browser.find_element(By.TAG_NAME, "body").text) == {"result": "failed"}
        browser.get_log("browser")  # (a JSON document has no icon: the server's 404 for /favicon.ico)
        browser.get(f"{served.url}simple/")
        assert browser.find_elements(By.LINK_TEXT, "torch")
        assert console_problems(browser) == []


@pytest.mark.browser
@pytest.mark.xdist_group("nightly-dashboard-browser")  # one Chromium for both
def test_hostile_text_renders_as_text_in_chromium(tmp_path: Path, browser: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    output = tmp_path / "nightly"
    hostile = f"{HOSTILE_SCRIPT} {HOSTILE_ATTRIBUTE}"
    entry = _failure("cu124", output / DAYS[0], error=f"build failed: {hostile}")
    entry.first_error["summary"]["text"] = hostile  # type: ignore[index]
    entry.diagnosis = [{**OOM, "title": HOSTILE_SCRIPT, "fix": HOSTILE_ATTRIBUTE}]
    entry.stages |= {"source": -5.0, "build": float("nan")}  # numbers SVG would reject
    _night(output, DAYS[0], [entry, _entry(HOSTILE_ATTRIBUTE, "success", output / DAYS[0], wheel_bytes=5)])
    dashboard = write_site(output).dashboard

    browser.get_log("browser")
    browser.get(dashboard.as_uri())
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018  (reading it is the check)
    assert browser.find_elements(By.CSS_SELECTOR, "script, img") == []
    marked = browser.find_element(By.CSS_SELECTOR, "section.entry.failing")
    assert f"build failed: {hostile}" in marked.text and f"[out-of-memory] {HOSTILE_SCRIPT}" in marked.text
    names = [section.get_attribute("data-entry") for section in browser.find_elements(By.CSS_SELECTOR, "section.entry")]
    assert names == ["cu124", HOSTILE_ATTRIBUTE]
    assert browser.find_element(By.CSS_SELECTOR, "section.entry:not(.failing) h2").text.startswith(HOSTILE_ATTRIBUTE)
    assert console_problems(browser) == []
