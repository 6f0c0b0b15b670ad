"""The nightly's parts on real things: a real Redis, a real memcached and TCP endpoints, folders and files,
interpreters, the disk."""

from __future__ import annotations

import os
import re
import sys
from datetime import date
from pathlib import Path

import pytest
from nightly_support import Redis, free_port
from support import REPO_ROOT

from pytorch_winbuild.builder.compiler_cache import CacheStats
from pytorch_winbuild.builder.report import BuildRecord, CacheRecord, run_paths
from pytorch_winbuild.diagnosis.triage import triage_log
from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.interpreter import ask_python, with_python
from pytorch_winbuild.facts.model import load_facts
from pytorch_winbuild.json_file import read_json
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.nightly.disk import check_free_space
from pytorch_winbuild.nightly.entry import EntryResult, _take_record
from pytorch_winbuild.nightly.matrix import entry_python, parse_matrix
from pytorch_winbuild.nightly.retention import apply_retention, newest_wheels
from pytorch_winbuild.nightly.shared_cache import endpoints, shared_cache
from pytorch_winbuild.planning.plan_model import EnvChange
from pytorch_winbuild.planning.python_choice import AUTO, PythonRequest

SOURCE = "/src/nightly/cpu"


@pytest.mark.services
def test_redis_from_the_runner_environment(redis_server: Redis) -> None:
    env = {
        "SCCACHE_REDIS_ENDPOINT": redis_server.endpoint,
        "SCCACHE_REDIS_PASSWORD": redis_server.password,
        "SCCACHE_DIR": "/c/sccache",
    }
    cache = shared_cache("sccache", env, (), "nightly.toml", SOURCE)
    assert cache.backends == ("redis",) and cache.location == redis_server.endpoint and cache.fallback is None
    assert cache.changes == (EnvChange("SCCACHE_BASEDIRS", SOURCE, "set", cache.changes[0].reason),)
    assert cache.describe() == f"sccache → redis ({redis_server.endpoint})"


@pytest.mark.services
def test_matrix_variables_apply_where_the_environment_is_silent(redis_server: Redis) -> None:
    endpoint = f"127.0.0.1:{redis_server.port}"
    matrix_env = (("SCCACHE_REDIS_ENDPOINT", endpoint), ("SCCACHE_REDIS_KEY_PREFIX", "winbuild"))
    cache = shared_cache("sccache", {"SCCACHE_REDIS_KEY_PREFIX": "from-runner"}, matrix_env, "nightly.toml", SOURCE)
    assert cache.backends == ("redis",)
    assert [(c.name, c.value, c.action) for c in cache.changes] == [
        ("SCCACHE_REDIS_ENDPOINT", endpoint, "set"),
        ("SCCACHE_BASEDIRS", SOURCE, "set"),
    ]
    assert cache.changes[0].reason == "shared compiler cache (nightly.toml [shared_cache])"


def test_an_unreachable_cache_falls_back_to_the_local_one() -> None:
    port = free_port()  # nothing listens there
    env = {"SCCACHE_REDIS": f"redis://:hunter2@127.0.0.1:{port}/0", "SCCACHE_DIR": "/c/sccache"}
    cache = shared_cache("sccache", env, (), "nightly.toml", SOURCE)
    assert cache.backends == () and cache.location == "SCCACHE_DIR=/c/sccache"
    assert cache.fallback is not None and cache.fallback.startswith(
        f"the shared redis cache redis://:***@127.0.0.1:{port}/0 is unreachable (127.0.0.1:{port}: "
    )
    assert "hunter2" not in cache.describe() + str(cache.to_dict())
    assert [(c.name, c.action) for c in cache.changes] == [("SCCACHE_BASEDIRS", "set"), ("SCCACHE_REDIS", "unset")]


def test_incomplete_backends_are_configuration_errors() -> None:
    with pytest.raises(
        ConfigurationError,
        match="the sccache azure cache is switched on by SCCACHE_AZURE_BLOB_CONTAINER, but "
        "SCCACHE_AZURE_CONNECTION_STRING is not set",
    ):
        shared_cache("sccache", {"SCCACHE_AZURE_BLOB_CONTAINER": "objects"}, (), "nightly.toml", SOURCE)
    with pytest.raises(
        ConfigurationError,
        match="SCCACHE_GHA_ENABLED, but SCCACHE_GHA_RUNTIME_TOKEN or ACTIONS_RUNTIME_TOKEN is not set",
    ):
        shared_cache(
            "sccache",
            {"SCCACHE_GHA_ENABLED": "on", "ACTIONS_RESULTS_URL": "https://results.example/"},
            (),
            "nightly.toml",
            SOURCE,
        )


def test_cloud_backends_are_named_without_a_connection_check() -> None:
    s3 = shared_cache(
        "sccache", {"SCCACHE_BUCKET": "team-objects", "SCCACHE_REGION": "eu-west-1"}, (), "nightly.toml", SOURCE
    )
    assert s3.backends == ("s3",) and s3.location == "team-objects"
    gha = shared_cache(
        "sccache",
        {"SCCACHE_GHA_ENABLED": "on", "ACTIONS_RESULTS_URL": "https://r.example/", "ACTIONS_RUNTIME_TOKEN": "t"},
        (),
        "nightly.toml",
        SOURCE,
    )
    assert gha.backends == ("gha",)
    off = shared_cache("sccache", {"SCCACHE_GHA_ENABLED": "off", "SCCACHE_DIR": "/c"}, (), "nightly.toml", SOURCE)
    assert off.backends == () and off.location == "SCCACHE_DIR=/c"


@pytest.mark.services
def test_clcache_memcached_and_engines_without_backends(memcached_server: int) -> None:
    clcache = shared_cache(
        "clcache",
        {"CLCACHE_MEMCACHED": f"127.0.0.1:{memcached_server}", "CLCACHE_DIR": "C:\\cache\\clcache"},
        (),
        "nightly.toml",
        "C:\\src",
    )
    assert clcache.backends == ("memcached",) and clcache.changes == ()
    ccache = shared_cache("ccache", {"CCACHE_DIR": "/c/ccache"}, (), "nightly.toml", SOURCE)
    assert ccache.backends == () and ccache.location == "CCACHE_DIR=/c/ccache"
    assert shared_cache("none", {}, (), "nightly.toml", SOURCE).describe() == "no compiler cache"


def test_endpoint_forms() -> None:
    assert endpoints("redis://user:pw@cache.example:6380/?db=1", 6379) == [("cache.example", 6380)]
    assert endpoints("cache.example", 6379) == [("cache.example", 6379)]
    assert endpoints("redis://a:7000, redis://b:7001", 6379) == [("a", 7000), ("b", 7001)]
    assert endpoints("unix:///run/redis.sock", 6379) == []
    assert endpoints("10.0.0.5:11211,10.0.0.6:11211", 11211) == [("10.0.0.5", 11211), ("10.0.0.6", 11211)]


def _touch(path: Path, data: bytes = b"x", mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_retention_keeps_recent_days_and_every_entry_s_newest_wheel(tmp_path: Path) -> None:
    out = tmp_path / "nightly"
    old_cpu = _touch(out / "2026-01-01" / "cpu" / "torch-1-cp311.whl")
    _touch(out / "2026-01-01" / "cpu" / "build-1.log")
    newer_cpu = _touch(out / "2026-01-05" / "cpu" / "torch-2-cp311.whl")
    cuda_first = _touch(out / "2026-01-02" / "cu124" / "torch-a-cp311.whl", mtime=1_000)
    cuda_last = _touch(out / "2026-01-02" / "cu124" / "torch-b-cp311.whl", mtime=2_000)
    cuda_record = _touch(cuda_last.with_name(cuda_last.name + ".nightly.json"))
    _touch(out / "2026-01-02" / "cu124" / "build-2.json")
    _touch(out / "2026-01-02" / "nightly-20260102-030000.md")
    recent_log = _touch(out / "2026-01-09" / "cpu" / "build-9.log")
    state = _touch(out / "state.json", b"{}")
    foreign = _touch(out / "notes" / "keep-me.txt")
    not_a_date = _touch(out / "2026-13-45" / "x.whl")

    assert newest_wheels(out) == {"cpu": newer_cpu, "cu124": cuda_last}
    result = apply_retention(out, keep_days=3, today=date(2026, 1, 10))

    assert result.oldest_kept == "2026-01-08"
    assert not (out / "2026-01-01").exists() and not old_cpu.exists()
    assert newer_cpu.is_file()  # the newest cpu wheel, four days past the window
    assert cuda_last.is_file() and cuda_record.is_file() and not cuda_first.exists()
    assert sorted(p.name for p in (out / "2026-01-02").rglob("*")) == ["cu124", cuda_last.name, cuda_record.name]
    assert recent_log.is_file() and state.is_file() and foreign.is_file() and not_a_date.is_file()
    assert result.removed_folders == (str(out / "2026-01-01"),)
    assert result.kept_wheels == (str(cuda_last), str(newer_cpu))


def test_free_space_is_checked_on_the_nearest_existing_folder(tmp_path: Path) -> None:
    free = check_free_space([tmp_path / "not" / "yet" / "there", tmp_path], 0.001, "cpu", "--min-free-gb")
    assert free > 0.001
    with pytest.raises(ToolchainError) as raised:
        check_free_space([tmp_path / "clone"], 10_000_000, "cu124", "--min-free-gb")
    assert raised.value.message.startswith(
        f"entry 'cu124' needs 1e+07 GB free (--min-free-gb), and the drive of {tmp_path / 'clone'} has "
    )


MATRIX = "nightly-test.toml"
CPU = {"name": "cpu", "repo": "https://github.com/pytorch/pytorch.git", "cuda": "cpu"}


@pytest.mark.parametrize(
    ("entry", "flag", "named", "not_named"),
    [
        (CPU, 10_000_000, "--min-free-gb", "min_free_gb"),  # the flag wins over the matrix and names itself
        ({**CPU, "min_free_gb": 10_000_000}, None, f"min_free_gb of entry 'cpu' in {MATRIX}", "--min-free-gb"),
        (CPU, None, f"[settings] min_free_gb in {MATRIX}", "--min-free-gb"),
    ],
)
def test_a_full_disk_names_where_the_threshold_was_set(
    tmp_path: Path, entry: dict[str, object], flag: float | None, named: str, not_named: str
) -> None:
    """The fix names the flag or the matrix key this run took the threshold from, and nothing else."""
    data = {"settings": {"output_dir": "out", "keep_days": 7, "min_free_gb": 10_000_000}, "entry": [entry]}
    matrix = parse_matrix(data, MATRIX, load_knowledge()).with_overrides(
        output_dir=None, keep_days=None, min_free_gb=flag
    )
    [parsed] = matrix.entries
    with pytest.raises(ToolchainError) as raised:
        check_free_space([tmp_path], parsed.min_free_gb, parsed.name, parsed.min_free_gb_from)
    fix = raised.value.fix or ""
    assert fix.endswith(f"or lower {named}.") and f"({named})" in raised.value.message
    assert not_named not in fix.replace(named, "")


def test_entry_pythons(tmp_path: Path) -> None:
    """An entry's `python` becomes the build's --python; a path is asked what it is (the interpreter answers for
    itself) and joins the runner's facts, a path that is no Python is a configuration error naming the entry."""
    version = ".".join(map(str, sys.version_info[:3]))
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    data = {
        "settings": {"output_dir": "out", "keep_days": 7, "min_free_gb": 1},
        "entry": [{**CPU, "name": "default"}, {**CPU, "name": "current", "python": "current"}],
    }
    default, current = parse_matrix(data, MATRIX, load_knowledge()).entries
    assert default.python == "auto" and default.options(cache_dir=tmp_path, source_dir=tmp_path).python == AUTO
    assert current.options(cache_dir=tmp_path, source_dir=tmp_path).python == PythonRequest("path", sys.executable)
    assert entry_python(minor) == PythonRequest("release", minor)
    assert entry_python("/opt/python3.6/bin/python") == PythonRequest("path", "/opt/python3.6/bin/python")
    with pytest.raises(ConfigurationError, match=r"entry\.python '3' is neither a Python release X\.Y nor a path"):
        entry_python("3", "entry.python")

    asked = ask_python(sys.executable)  # a path: the interpreter answers for itself
    assert (asked.version, asked.bits, asked.implementation) == (version, 64, "CPython")
    # The runner's facts (a Windows machine whose only Python is 3.12.10) gain the entry's interpreter once.
    facts = load_facts(REPO_ROOT / "build_config" / "hosts" / "cpu-only.json")
    assert [p.version for p in facts.pythons] == ["3.12.10"]
    joined, executable = with_python(facts, sys.executable, "entry 'current'.python")
    assert executable == asked.executable and [p.version for p in joined.pythons] == ["3.12.10", version]
    assert with_python(joined, executable) == (joined, executable)  # already listed: not asked again

    label = f"{MATRIX}: entry 'cpu'.python"
    with pytest.raises(ConfigurationError, match=rf"{re.escape(label)} /no/such/python: no such file or command"):
        with_python(facts, "/no/such/python", label)
    with pytest.raises(ConfigurationError, match=r"/bin/false did not answer like a Python interpreter"):
        ask_python("/bin/false", label)


HEAP_LOG = """[1/2] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/aten/src/ATen/native/Convolution.cpp.obj
FAILED: caffe2/CMakeFiles/torch_cpu.dir/aten/src/ATen/native/Convolution.cpp.obj
C:\\src\\aten\\src\\ATen\\native\\Convolution.cpp(1): fatal error C1060: compiler is out of heap space
ninja: build stopped: subcommand failed.
"""


def test_a_failed_build_s_record_gives_the_entry_what_its_report_holds(tmp_path: Path) -> None:
    """The nightly takes a failed build's first error, diagnosis, cache numbers and compile time from the record
    the builder filled, not from the report it wrote: the summary gets what the report says."""
    log, report = run_paths(tmp_path, "build")
    log.write_text(HEAP_LOG, encoding="utf-8")
    record = BuildRecord("build", log, report, phases={"build": 12.5}, result="failed", exit_code=5)
    record.triage = triage_log(log, posix=False)
    raw = {"cache_location": 'Local disk: "C:\\\\sccache"', "stats": {"cache_hits": {"counts": {"C/C++": 3}}}}
    record.cache = CacheRecord.of(CacheStats("sccache", 3, 1, "sccache --show-stats --stats-format json", raw))
    record.write()
    result = EntryResult("cpu", "repo", None, "cpu", compiler_cache={"engine": "sccache"})
    _take_record(result, record)
    written = read_json(report)
    assert isinstance(written, dict)
    assert (result.log, result.report) == (written["log"], written["report"]) == (str(log), str(report))
    assert result.first_error == written["first_error"] and result.diagnosis == written["diagnosis"]
    assert [match["id"] for match in result.diagnosis] == ["compiler-out-of-heap"]
    assert result.compiler_cache == {
        "engine": "sccache",
        "hits": 3,
        "misses": 1,
        "stats": written["cache"]["summary"],
        "reported_location": written["cache"]["raw"]["cache_location"],
    }
    assert result.stages == {"compile": written["phases"]["build"]}
