"""Hostile files the tool reads (issue 29 point 4): JSON nested 100,000 deep in the tool's own caches and records,
NaN, Infinity, 1e999 and numbers beyond any machine in a facts file. Every JSON document goes through one reader
(pytorch_winbuild/json_file.py) that bounds its size and nesting before json parses it; each caller keeps its
policy: its own cache or record is ignored with a message and rebuilt, a user's file is refused with exit 2.

The command-line cases are real `python -m invoke` processes on real files in tmp folders. The nightly's own
files are in tests/nightly/test_hostile_nightly_files.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import HOSTS_DIR, plan_options, run_invoke

from pytorch_winbuild.builder.build_folder import MEMORY_FILE, last_identity
from pytorch_winbuild.builder.build_venv import LAST_VENV, last_venv
from pytorch_winbuild.builder.memory_record import RECORD_FORMAT, configuration_key, facts_machine
from pytorch_winbuild.deps.cache import MARKER_NAME, read_marker
from pytorch_winbuild.facts.probe import probe
from pytorch_winbuild.facts.probe_common import run_command
from pytorch_winbuild.facts.version_cache import VersionCache
from pytorch_winbuild.json_file import MAX_DEPTH, BadJson, parse_json, read_json
from pytorch_winbuild.knowledge.config_files import ParsedConfig
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.paths import peaks_file
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.request import PlanRequest

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a": ' * 100_000 + "1" + "}" * 100_000
VS2017 = HOSTS_DIR / "vs2017-cuda90-cuda100.json"
DRY_RUN = ("build", "--dry-run", "--cuda", "cpu", "--pytorch-version", "2.13.0")


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr and "internal error" not in done.stderr, done.stderr


def _words(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------- the reader


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(DEEP, "nested too deeply: more than 100 levels", id="array 100,000 deep"),
        pytest.param(DEEP_OBJECT, "nested too deeply: more than 100 levels", id="object 100,000 deep"),
        pytest.param("[" * 101 + "]" * 101, "nested too deeply", id="101 deep"),
        pytest.param('{"pid": NaN}', "NaN is not a number this file may hold", id="NaN"),
        pytest.param("[-Infinity]", "-Infinity is not a number this file may hold", id="-Infinity"),
        pytest.param('{"pid": 1e999}', "the number 1e999 is out of range", id="1e999"),
        pytest.param("[" + "9" * 5000 + "]", "holds an integer of more than 4300 digits", id="5000 digits"),
        pytest.param("{half", "line 1 column 2: not valid JSON: Expecting property name", id="broken"),
        pytest.param(b'{"a": "\xff"}', "not UTF-8 text (byte 7 cannot be decoded)", id="not UTF-8"),
        pytest.param(" " * 2000, "larger than 1 KiB", id="over the size bound"),
    ],
)
def test_the_reader_refuses_with_one_exception_and_a_reason(text: str | bytes, reason: str) -> None:
    with pytest.raises(BadJson) as raised:
        parse_json(text, max_bytes=1024 if text == " " * 2000 else 64 * 1024 * 1024)
    assert isinstance(raised.value, ValueError) and reason in str(raised.value) and "\n" not in str(raised.value)


def test_the_reader_reads_what_json_reads(tmp_path: Path) -> None:
    """Brackets and quotes inside strings are not nesting; 100 levels is allowed; a byte-order mark is skipped;
    NaN is read where the caller allows it."""
    text = json.dumps(
        {"log": '[[[{{{ \\" ]]' * 1000, "deep": json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))}
    )
    assert parse_json(text) == json.loads(text)
    file = tmp_path / "bom.json"
    file.write_bytes(b"\xef\xbb\xbf" + json.dumps({"a": 1}).encode())
    assert read_json(file) == {"a": 1}
    assert str(parse_json("[NaN]", allow_nonfinite=True)[0]) == "nan"
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json")


# ---------------------------------------------------------------- the tool's own files: ignored, rebuilt


def test_build_dry_run_ignores_a_deep_peaks_record(tmp_path: Path) -> None:
    """<cache>/memory/peaks.json is the builds' own record: ignored with a warning, MAX_JOBS from the cited
    figures, the file left for the next build to replace."""
    peaks = peaks_file(tmp_path)
    peaks.parent.mkdir(parents=True)
    peaks.write_text(DEEP, encoding="utf-8")
    done = run_invoke(*DRY_RUN, "--cache-dir", str(tmp_path))
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    text = _words(done.stdout)
    assert "peaks.json is ignored: it cannot be read as JSON (nested too deeply" in text.replace(str(peaks.parent), "")
    assert "the next build replaces it with a new record" in text and "per C++ job" in text


def test_build_dry_run_ignores_a_peak_beyond_any_machine(tmp_path: Path) -> None:
    """A run of this machine and configuration whose peak is 10**400 MiB overflowed MAX_JOBS's arithmetic."""
    facts = probe()  # this machine's: a plan for another one does not read this cache's record
    plan = make_plan(PlanRequest(plan_options(cuda="cpu", pytorch_version="2.13.0")), facts, load_knowledge())
    runs = {configuration_key(plan, "build"): [{"when": "2026-01-01T03:00:00+00:00", "peak_job_mib": 10**400}]}
    peaks = peaks_file(tmp_path)
    peaks.parent.mkdir(parents=True)
    peaks.write_text(json.dumps({"format": RECORD_FORMAT, "machines": {facts_machine(facts): runs}}), "utf-8")
    done = run_invoke(*DRY_RUN, "--cache-dir", str(tmp_path))
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    text = _words(done.stdout).replace(str(peaks.parent), "")
    assert "peaks.json is ignored: its machines and runs are not in the form this version writes" in text


def _deep_marker(cache: Path) -> Path:
    folder = cache / "deps" / "mkl_2020.2.254"
    folder.mkdir(parents=True)
    (folder / MARKER_NAME).write_text(DEEP, encoding="utf-8")
    return folder


def test_fetch_deps_treats_a_deep_archive_marker_as_no_marker(tmp_path: Path) -> None:
    """The marker says an archive was extracted whole; a damaged one means "extract again", here from an empty
    --from-dir: the documented dependency error (exit 4), not a crash."""
    cache, empty = tmp_path / "cache", tmp_path / "archives"
    empty.mkdir()
    folder = _deep_marker(cache)
    done = run_invoke(
        "fetch-deps",
        "--cuda",
        "10.1",
        "--mkl-version",
        "2020.2.254",
        "--no-magma",
        "--cache-dir",
        str(cache),
        "--lock-file",
        str(tmp_path / "deps.lock"),
        "--from-dir",
        str(empty),
    )
    _no_traceback(done)
    assert done.returncode == 4, done.stderr
    assert _words(done.stderr).startswith(f"dependency error: {empty / 'mkl_2020.2.254.7z'} does not exist")
    assert read_marker(folder) is None and (folder / MARKER_NAME).read_text(encoding="utf-8") == DEEP


def test_clean_does_not_take_a_deep_marker_for_a_cache(tmp_path: Path) -> None:
    """`clean` deletes only in a pytorch-winbuild cache; a folder whose only sign is a damaged marker is not one."""
    cache = tmp_path / "cache"
    folder = _deep_marker(cache)
    done = run_invoke("clean", "--deps", "--cache-dir", str(cache))
    _no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert "is not a pytorch-winbuild cache" in _words(done.stderr) and (folder / MARKER_NAME).is_file()


def test_the_probe_version_cache_nested_deep_is_asked_again_and_rewritten(tmp_path: Path) -> None:
    """cache/probe/versions.json (doctor, every plan): the tools are asked again and the file written afresh."""
    found = shutil.which("ninja")
    assert found, "ninja is a dependency of this project (pip install -e .)"
    ninja = tmp_path / "bin" / "ninja"
    ninja.parent.mkdir()
    shutil.copy2(Path(found).resolve(), ninja)
    store = tmp_path / "probe" / "versions.json"
    store.parent.mkdir()
    store.write_text(DEEP, encoding="utf-8")
    cache = VersionCache(store, run_command)
    assert cache([str(ninja), "--version"], 30).ok
    cache.save()
    assert len(read_json(store)["answers"]) == 1


@pytest.mark.parametrize("content", [DEEP, DEEP_OBJECT], ids=["array", "object"])
def test_every_own_record_nested_deep_reads_as_absent(tmp_path: Path, content: str) -> None:
    """The smaller records: the last venv, the build folder's generator, an archive marker, the parsed
    configuration cache. Each is only a shortcut: unreadable, it is as if it were not there."""
    for file in (
        tmp_path / "venvs" / LAST_VENV,
        tmp_path / "src" / "build" / MEMORY_FILE,
        tmp_path / "deps" / "mkl" / MARKER_NAME,
        tmp_path / "parsed-config.json",
    ):
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(content, encoding="utf-8")
    assert last_venv(tmp_path) is None
    assert last_identity(tmp_path / "src") is None
    assert read_marker(tmp_path / "deps" / "mkl") is None
    assert ParsedConfig(tmp_path / "parsed-config.json").get("nightly.toml", "key") is None


# ---------------------------------------------------------------- a user's facts file: exit 2, named key


def _facts(tmp_path: Path, **changes: object) -> Path:
    data = json.loads(VS2017.read_text(encoding="utf-8"))
    for key, value in changes.items():
        if key == "gpu_memory_mib":
            data["gpus"] = [{"index": 0, "name": "a GPU", "compute_capability": "8.6", "memory_mib": value}]
        else:
            data[key] = value
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        pytest.param(
            "memory_available_mib",
            10**400,
            "memory_available_mib: expected a number of MiB from 0 to 1099511627776, got 10000000000000000000… "
            "(401 characters).",
            id="memory_available_mib 10**400",
        ),
        pytest.param(
            "memory_total_mib",
            2**40 + 1,
            "memory_total_mib: expected a number of MiB from 0 to 1099511627776, got",
            id="memory_total_mib 2**40+1",
        ),
        pytest.param(
            "cpu_count",
            10**30,
            "cpu_count: expected a number of logical processors from 1 to 65536, got",
            id="cpu_count 10**30",
        ),
        pytest.param(
            "gpu_memory_mib",
            10**400,
            "gpus[0].memory_mib: expected a number of MiB from 0 to 1099511627776, got",
            id="gpus[0].memory_mib 10**400",
        ),
    ],
)
def test_a_facts_number_beyond_any_machine_is_refused(tmp_path: Path, key: str, value: int, message: str) -> None:
    """`build --dry-run --host FILE`: 10**400 MiB of memory used to overflow MAX_JOBS's arithmetic (exit 70)."""
    facts = _facts(tmp_path, **{key: value})
    done = run_invoke("build", "--dry-run", "--host", str(facts), "--cuda", "9.0", "--pytorch-version", "1.0.1")
    _no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert _words(done.stderr).startswith(f"configuration error: facts file {facts}: {message}")


def test_build_jobs_beyond_any_machine_is_refused() -> None:
    """--jobs 10**26 went into MAX_JOBS as it was; a job count has the processors' bound."""
    done = run_invoke(*DRY_RUN, "--jobs", "1" + "0" * 26)
    _no_traceback(done)
    assert done.returncode == 2, done.stdout
    assert _words(done.stderr).startswith(
        "configuration error: --jobs 1000000000000000… must be a positive number of parallel compile jobs, at most "
        "65536."
    )
