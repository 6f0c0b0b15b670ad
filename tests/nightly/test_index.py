"""The nightly's pip index (<output_dir>/simple/): PEP 503 pages and PEP 691 JSON, written atomically, that pip
installs from over file:// and over a real HTTP server."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin

import pytest
from channel_support import build_wheel, fresh_venv, http_server, make_project, pip_install, run_in

from pytorch_winbuild.nightly import index as index_module
from pytorch_winbuild.nightly.index import write_index
from pytorch_winbuild.nightly.site import write_site

DAY1, DAY2 = "2026-03-01", "2026-03-02"
PROJECT = "Tiny_Winbuild.Probe"  # PEP 503: tiny-winbuild-probe
NORMALISED = "tiny-winbuild-probe"


class Anchors(HTMLParser):
    """The <a> elements of a page: attributes and text."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "a":
            self.links.append({**dict(attrs), "text": ""})

    def handle_data(self, data: str) -> None:
        if self.links and self.links[-1]["text"] == "":
            self.links[-1]["text"] = data


def anchors(page: Path) -> Anchors:
    parser = Anchors()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def fake_wheel(
    folder: Path, version: str, *, name: str = PROJECT, requires: str | None = ">=3.8", payload: str = ""
) -> Path:
    """A wheel file as pip's index pages see it: a real zip with METADATA, named by the spec."""
    distribution = re.sub(r"[-_.]+", "_", name)
    path = folder / f"{distribution}-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        if requires:
            metadata += f"Requires-Python: {requires}\n"
        archive.writestr(f"{distribution}-{version}.dist-info/METADATA", metadata)
        archive.writestr(f"{distribution}/__init__.py", payload)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def target(page: Path, href: str) -> Path:
    """The file a relative href of `page` names, as a static server or file:// resolves it."""
    url = urljoin(page.as_uri(), href.split("#")[0])
    return Path(unquote(url.removeprefix("file://")))


def test_the_index_lists_every_kept_wheel_by_normalised_name(tmp_path: Path) -> None:
    output = tmp_path / "out"
    old = fake_wheel(output / DAY1 / "cpu", "0.9")
    cpu = fake_wheel(output / DAY2 / "cpu", "1.0+nightly.1", payload="cpu")
    cuda = fake_wheel(output / DAY2 / "cu124", "1.0+nightly.1", payload="cuda")  # the same file name as cpu's
    os.utime(cuda, (time.time() + 60, time.time() + 60))  # built later that night
    other = fake_wheel(output / DAY2 / "cpu", "2.0", name="Other.Pkg", requires=None)
    (output / DAY2 / "cpu" / "not-a-wheel.whl").write_bytes(b"junk")
    fake_wheel(output / "notes", "3.0")  # not a date folder: not the nightly's

    result = write_index(output)

    simple = output / "simple"
    root = anchors(simple / "index.html")
    assert [(link["href"], link["text"]) for link in root.links] == [
        ("other-pkg/", "other-pkg"),
        (f"{NORMALISED}/", NORMALISED),
    ]
    assert '<meta name="pypi:repository-version" content="1.1">' in (simple / "index.html").read_text()

    page = simple / NORMALISED / "index.html"
    links = anchors(page).links
    # One link per file name: of cpu's and cu124's 1.0+nightly.1, the newer (cu124's); oldest version first.
    assert [link["text"] for link in links] == [old.name, cuda.name]
    assert [target(page, str(link["href"])) for link in links] == [old, cuda]
    assert (
        links[1]["href"]
        == f"../../{DAY2}/cu124/Tiny_Winbuild_Probe-1.0%2Bnightly.1-py3-none-any.whl#sha256={sha256(cuda)}"
    )
    assert links[0]["href"] == f"../../{DAY1}/cpu/{old.name}#sha256={sha256(old)}"
    assert all(link["data-requires-python"] == ">=3.8" for link in links)
    assert 'data-requires-python="&gt;=3.8"' in page.read_text()
    [other_link] = anchors(simple / "other-pkg" / "index.html").links
    assert (
        "data-requires-python" not in other_link
        and target(simple / "other-pkg" / "index.html", str(other_link["href"])) == other
    )

    # PEP 691 (API 1.1) beside each page, with URLs relative to it.
    assert json.loads((simple / "index.json").read_text()) == {
        "meta": {"api-version": "1.1"},
        "projects": [{"name": "other-pkg"}, {"name": NORMALISED}],
    }
    project = json.loads((simple / NORMALISED / "index.json").read_text())
    assert project["meta"] == {"api-version": "1.1"} and project["name"] == NORMALISED
    assert project["versions"] == ["0.9", "1.0+nightly.1"]
    assert [(f["filename"], f["hashes"], f["size"], f["requires-python"]) for f in project["files"]] == [
        (old.name, {"sha256": sha256(old)}, old.stat().st_size, ">=3.8"),
        (cuda.name, {"sha256": sha256(cuda)}, cuda.stat().st_size, ">=3.8"),
    ]
    assert [target(page, f["url"]) for f in project["files"]] == [old, cuda]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", f["upload-time"]) for f in project["files"])

    # Each entry's own index holds its wheels only: cpu's 1.0+nightly.1 is there, not cu124's.
    cpu_page = output / "entries" / "cpu" / "simple" / NORMALISED / "index.html"
    assert [target(cpu_page, str(link["href"])) for link in anchors(cpu_page).links] == [old, cpu]
    cuda_page = output / "entries" / "cu124" / "simple" / NORMALISED / "index.html"
    assert [target(cuda_page, str(link["href"])) for link in anchors(cuda_page).links] == [cuda]
    assert set(result.entries) == {"cpu", "cu124"} and sorted(result.projects) == ["other-pkg", NORMALISED]
    assert result.problems == [
        f"{DAY2}/cpu/not-a-wheel.whl: not a valid wheel file name (Invalid wheel filename "
        "(wrong number of parts): 'not-a-wheel')"
    ]
    # Readable by a web server running as another user, as any file this process creates.
    reference = tmp_path / "reference"
    reference.write_text("x")
    assert page.stat().st_mode == reference.stat().st_mode


def test_regeneration_replaces_only_its_own_pages(tmp_path: Path) -> None:
    output = tmp_path / "out"
    keep = fake_wheel(output / DAY1 / "cpu", "1.0")
    gone = fake_wheel(output / DAY1 / "cpu", "1.0", name="Gone")
    write_index(output)
    notes = output / "simple" / "README.txt"
    notes.write_text("a user's notes\n")
    page = output / "simple" / NORMALISED / "index.html"
    before = page.stat()

    gone.unlink()  # retention removed it
    write_index(output)

    assert not (output / "simple" / "gone").exists() and not (output / "entries" / "cpu" / "simple" / "gone").exists()
    assert "gone" not in (output / "simple" / "index.html").read_text()
    assert notes.read_text() == "a user's notes\n"
    after = page.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # unchanged: not rewritten
    assert not [path for path in output.rglob("*.tmp")]
    keep.unlink()
    write_index(output)
    assert not (output / "entries").exists() or not any((output / "entries").rglob("index.html"))
    assert anchors(output / "simple" / "index.html").links == []


def test_a_reader_never_sees_half_an_index(tmp_path: Path) -> None:
    output = tmp_path / "out"
    for number in range(30):
        fake_wheel(output / DAY1 / "cpu", f"1.{number}")
    spare = output / DAY2 / "cpu"
    stop = threading.Event()
    seen: list[str] = []

    def read() -> None:
        while not stop.is_set():
            for page in (output / "simple" / "index.html", output / "simple" / NORMALISED / "index.html"):
                try:
                    seen.append(page.read_text(encoding="utf-8"))
                except FileNotFoundError:
                    continue

    write_index(output)
    reader = threading.Thread(target=read)
    reader.start()
    try:
        for round_ in range(15):
            if round_ % 2:
                shutil.rmtree(spare, ignore_errors=True)
            else:
                for number in range(20):
                    fake_wheel(spare, f"2.{number}")
            write_index(output)
    finally:
        stop.set()
        reader.join()
    assert len(seen) > 10
    assert all(text.startswith("<!DOCTYPE html>") and text.endswith("</html>\n") for text in seen)


def test_hostile_folder_names_stay_text_in_the_index(tmp_path: Path) -> None:
    output = tmp_path / "out"
    names = ['"><img src=x onerror=alert(1)>', "<script>alert(1)<\\script>"]
    wheels = [fake_wheel(output / DAY1 / name, f"1.{number}") for number, name in enumerate(names)]

    result = write_index(output)

    page = output / "simple" / NORMALISED / "index.html"
    parsed = anchors(page)
    assert parsed.tags == {"html", "head", "meta", "link", "title", "body", "h1", "a", "br"}
    assert [target(page, str(link["href"])) for link in parsed.links] == wheels
    assert "<img" not in page.read_text() and "<script" not in page.read_text()
    assert result.entries == {} and not (output / "entries").exists()
    assert [problem.split(": the folder name")[0] for problem in result.problems] == [
        f"{DAY1}/{name}/{wheel.name}" for name, wheel in zip(names, wheels, strict=True)
    ]


def test_hashes_are_read_once_until_the_wheel_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "out"
    wheel = fake_wheel(output / DAY1 / "cpu", "1.0")
    fake_wheel(output / DAY1 / "cpu", "1.1")
    hashed: list[str] = []
    real = index_module.file_sha256
    monkeypatch.setattr(index_module, "file_sha256", lambda path: hashed.append(path.name) or real(path))

    write_index(output)
    assert len(hashed) == 2
    write_index(output)
    assert len(hashed) == 2  # from <output>/.wheel-hashes.json
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    write_index(output)
    assert hashed[2:] == [wheel.name]
    assert f"#sha256={sha256(wheel)}" in (output / "simple" / NORMALISED / "index.html").read_text()


@pytest.fixture(scope="module")
def real_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel `pip wheel` built from a minimal setuptools project."""
    folder = tmp_path_factory.mktemp("project")
    return build_wheel(make_project(folder / "src"), folder / "dist")


def _channel(tmp_path: Path, wheel: Path) -> Path:
    output = tmp_path / "nightly"
    (output / DAY2 / "cpu").mkdir(parents=True)
    shutil.copy2(wheel, output / DAY2 / "cpu" / wheel.name)
    write_site(output)
    return output


@pytest.mark.network
@pytest.mark.xdist_group("nightly-index-wheel")  # one worker builds the wheel once
def test_pip_installs_from_the_index_over_file_and_http(tmp_path: Path, real_wheel: Path) -> None:
    output = _channel(tmp_path, real_wheel)
    assert real_wheel.name == "tiny_winbuild_probe-1.0+nightly.1-py3-none-any.whl"
    check = "import tiny_winbuild_probe as p, sys; print(p.VALUE, p.__file__.startswith(sys.prefix))"

    from_file = fresh_venv(tmp_path / "venv-file")
    done = pip_install(from_file, (output / "simple").as_uri() + "/", PROJECT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert run_in(from_file, check) == "installed from the nightly index True"

    with http_server(output) as served:
        base = served.url
        from_http = fresh_venv(tmp_path / "venv-http")
        done = pip_install(from_http, f"{base}simple/", f"{PROJECT}==1.0+nightly.1")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f'"GET /{DAY2}/cpu/tiny_winbuild_probe-1.0%2Bnightly.1-py3-none-any.whl HTTP/1.1" 200' in served.log()
        assert run_in(from_http, check) == "installed from the nightly index True"
        from_entry = fresh_venv(tmp_path / "venv-entry")
        done = pip_install(from_entry, f"{base}entries/cpu/simple/", NORMALISED)
        assert done.returncode == 0, done.stdout + done.stderr
        assert run_in(from_entry, check) == "installed from the nightly index True"


@pytest.mark.network
@pytest.mark.xdist_group("nightly-index-wheel")  # one worker builds the wheel once
def test_pip_refuses_a_wheel_that_does_not_match_its_sha256(tmp_path: Path, real_wheel: Path) -> None:
    output = _channel(tmp_path, real_wheel)
    kept = output / DAY2 / "cpu" / real_wheel.name
    kept.write_bytes(kept.read_bytes() + b"tampered after indexing")
    with http_server(output) as served:
        done = pip_install(fresh_venv(tmp_path / "venv"), f"{served.url}simple/", PROJECT)
    assert done.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in done.stderr and sha256(real_wheel) in done.stderr
