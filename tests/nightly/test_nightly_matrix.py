"""The matrix file: the shipped one loads; every mistake is named by file, entry and key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from nightly_support import run_nightly

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.config_files import config_dir
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.nightly.matrix import load_matrix, parse_matrix
from pytorch_winbuild.nightly.shared_cache import load_engines
from pytorch_winbuild.planning.python_choice import PythonRequest

KNOWLEDGE = load_knowledge()
SOURCE = "matrix.toml"
SETTINGS = {"output_dir": "dist/nightly", "keep_days": 7, "min_free_gb": 30}
ENTRY = {"name": "cpu", "repo": "https://github.com/pytorch/pytorch.git", "ref": "main", "cuda": "cpu"}


def _parse(*entries: dict[str, Any], **top: Any) -> Any:
    data = {"settings": SETTINGS, "entry": list(entries), **top}
    return parse_matrix(data, SOURCE, KNOWLEDGE)


def test_the_shipped_matrix_and_backends_load() -> None:
    matrix = load_matrix(None, KNOWLEDGE)
    assert matrix.source == "build_config/nightly.toml"
    assert [entry.name for entry in matrix.entries] == ["cpu-py311", "cu124-py311"]
    assert all(entry.mode == "wheel" and entry.repo.startswith("https://") for entry in matrix.entries)
    assert matrix.entries[0].min_free_gb == 25 and matrix.entries[1].min_free_gb == matrix.settings.min_free_gb == 40
    assert matrix.shared_cache_env == ()
    engines = load_engines()
    assert {"redis", "memcached", "s3", "gcs", "azure", "gha", "webdav"} <= {
        backend.name for backend in engines["sccache"].backends
    }
    assert [backend.name for backend in engines["clcache"].backends] == ["memcached"]
    assert set(engines) >= set(KNOWLEDGE.compiler_caches)  # every compiler cache the plan can choose is described


def test_defaults_and_options() -> None:
    matrix = _parse(
        {
            **ENTRY,
            "python": "3.11",
            "env": {"BUILD_TEST": "0"},
            "jobs": 4,
            "arch_list": "8.6",
            "compiler_cache": "sccache",
        }
    )
    [entry] = matrix.entries
    assert (
        entry.python == "3.11"
        and entry.mode == "wheel"
        and entry.env == (("BUILD_TEST", "0"),)
        and entry.min_free_gb == 30.0
    )
    options = entry.options(cache_dir=Path("/c"), source_dir=Path("/s"))
    assert (
        options.cuda,
        options.mode,
        options.jobs,
        str(options.arch_list),
        options.compiler_cache,
        options.cache_dir,
        options.source_dir,
        options.python,
    ) == ("cpu", "wheel", 4, "8.6", "sccache", Path("/c"), Path("/s"), PythonRequest("release", "3.11"))
    bare = _parse({**ENTRY, "ref": ""}).entries[0]
    # No `python`: the build Python is chosen as `invoke build` does without --python (auto), not the runner's own.
    assert bare.python == "auto" and bare.ref is None and bare.plan_options == ()
    assert bare.options(cache_dir=Path("/c"), source_dir=Path("/s")).python == PythonRequest()
    current = _parse({**ENTRY, "python": "current"}).entries[0]
    assert current.options(cache_dir=Path("/c"), source_dir=Path("/s")).python == PythonRequest("path", sys.executable)
    assert _parse(ENTRY).select(("cpu",)) == _parse(ENTRY).entries


def test_overrides_from_flags() -> None:
    matrix = _parse(ENTRY, {**ENTRY, "name": "big", "min_free_gb": 80}).with_overrides(
        output_dir=Path("/o"), keep_days=3, min_free_gb=5
    )
    assert matrix.settings.output_dir == Path("/o") and matrix.settings.keep_days == 3
    assert [entry.min_free_gb for entry in matrix.entries] == [5.0, 5.0]
    with pytest.raises(
        ConfigurationError, match=r"--keep-days: expected a whole number of days from 1 to 36500 \(100 years\), got 0"
    ):
        _parse(ENTRY).with_overrides(output_dir=None, keep_days=0, min_free_gb=None)


@pytest.mark.parametrize(
    ("entries", "top", "message"),
    [
        ([{**ENTRY, "cudaa": "9.0"}], {}, "matrix.toml: entry 'cpu': unknown key(s) cudaa."),
        (
            [{k: v for k, v in ENTRY.items() if k != "cuda"}],
            {},
            "matrix.toml: entry 'cpu': missing required key 'cuda'.",
        ),
        ([{k: v for k, v in ENTRY.items() if k != "name"}], {}, "matrix.toml: entry[0]: missing required key 'name'."),
        ([{**ENTRY, "name": "cpu/py311"}], {}, "matrix.toml: entry[0].name: 'cpu/py311' must be letters, digits"),
        ([ENTRY, ENTRY], {}, "matrix.toml: entry 'cpu' appears twice."),
        (
            [{**ENTRY, "cuda": "7.5"}],
            {},
            "matrix.toml: entry 'cpu'.cuda 7.5 is not a CUDA release pytorch-winbuild knows.",
        ),
        (
            [{**ENTRY, "cuda": "auto"}],
            {},
            "matrix.toml: entry 'cpu'.cuda: 'auto' would let the runner's installs decide",
        ),
        ([{**ENTRY, "mode": "install"}], {}, "matrix.toml: entry 'cpu'.mode: 'install'; the nightly builds wheels"),
        ([{**ENTRY, "jobs": "4"}], {}, "matrix.toml: entry 'cpu'.jobs: expected int, got str '4'."),
        ([{**ENTRY, "jobs": 0}], {}, "matrix.toml: entry 'cpu'.jobs 0 must be a positive number"),
        ([{**ENTRY, "generator": "make"}], {}, "matrix.toml: entry 'cpu'.generator 'make' is not one of"),
        (
            [{**ENTRY, "env": {"MAX_JOBS": 2}}],
            {},
            "matrix.toml: entry 'cpu'.env.MAX_JOBS: expected a string, got int 2.",
        ),
        (
            [{**ENTRY, "env": {"BAD-NAME": "1"}}],
            {},
            "matrix.toml: entry 'cpu'.env: 'BAD-NAME' is not a valid environment variable name",
        ),
        (
            [{**ENTRY, "env": {"SCCACHE_REDIS_PASSWORD": "x"}}],
            {},
            "matrix.toml: entry 'cpu'.env.SCCACHE_REDIS_PASSWORD: looks like a credential",
        ),
        (
            [{**ENTRY, "min_free_gb": -1}],
            {},
            "matrix.toml: entry 'cpu'.min_free_gb: expected a number of GB, 0 or more, got -1.",
        ),
        (
            [ENTRY],
            {"shared_cache": {"env": {"SCCACHE_REDIS": "redis://:pw@cache:6379"}}},
            "matrix.toml: shared_cache.env.SCCACHE_REDIS: looks like a credential",
        ),
        ([ENTRY], {"shared_cache": {"environment": {}}}, "matrix.toml: shared_cache: unknown key(s) environment."),
        (
            [ENTRY],
            {"settings": {**SETTINGS, "keep_days": 0}},
            "matrix.toml: settings.keep_days: expected a whole number of days from 1 to 36500 (100 years), got 0.",
        ),
        ([ENTRY], {"settings": {**SETTINGS, "retention": 3}}, "matrix.toml: settings: unknown key(s) retention."),
        ([], {}, "matrix.toml: the matrix has no [[entry]]."),
    ],
)
def test_every_mistake_names_file_entry_and_key(
    entries: list[dict[str, Any]], top: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        _parse(*entries, **top)
    assert raised.value.message.startswith(message), raised.value.message


def test_configuration_hash_follows_the_entry_and_the_plan() -> None:
    [entry] = _parse({**ENTRY, "env": {"BUILD_TEST": "0"}}).entries
    [other_env] = _parse({**ENTRY, "env": {"BUILD_TEST": "1"}}).entries
    plan = {"compiler_cache": "sccache", "changes": [{"name": "USE_CUDA", "value": "0", "action": "set"}]}
    assert entry.config_hash(plan) == entry.config_hash(dict(plan))
    assert entry.config_hash(plan) != other_env.config_hash(plan)
    assert entry.config_hash(plan) != entry.config_hash({**plan, "compiler_cache": "none"})
    [roomier] = _parse({**ENTRY, "env": {"BUILD_TEST": "0"}, "min_free_gb": 99}).entries
    assert roomier.config_hash(plan) == entry.config_hash(plan)  # the disk threshold does not change the wheel


def test_the_cli_reports_a_broken_matrix_with_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "matrix.toml"
    broken.write_text(
        "[settings]\n"
        'output_dir = "out"\n'
        "keep_days = 7\n"
        "min_free_gb = 1\n"
        "\n"
        "[[entry]]\n"
        'name = "cpu"\n'
        'repo = "x"\n'
        'cuda = "cpu"\n'
        "python = 3.11\n"
    )
    done = run_nightly("--matrix", str(broken), "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 2
    assert done.stderr.strip() == f"configuration error: {broken}: entry 'cpu'.python: expected str, got float 3.11."
    unknown = run_nightly(
        "--matrix",
        str(config_dir() / "nightly.toml"),
        "--only",
        "cpu-py311",
        "--only",
        "nope",
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    assert (
        unknown.returncode == 2
        and "--only nope: no such entry in " in unknown.stderr
        and "pass one of cpu-py311, cu124-py311." in unknown.stderr
    )
    assert not (tmp_path / "cache").exists()  # checked before the lock is taken


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('name = "cu124\\n"', "entry[0].name: 'cu124\\n' must be letters, digits, '.', '_' and '-'"),
        (
            'name = "cpu"\nenv = {"FOO\\n" = "bar"}',
            "entry 'cpu'.env: 'FOO\\n' is not a valid environment variable name",
        ),
    ],
)
def test_the_cli_refuses_a_name_ending_in_a_newline(tmp_path: Path, entry: str, message: str) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(
        '[settings]\noutput_dir = "out"\nkeep_days = 7\nmin_free_gb = 1\n\n'
        f'[[entry]]\n{entry}\nrepo = "https://github.com/pytorch/pytorch.git"\nref = "main"\ncuda = "cpu"\n',
        encoding="utf-8",
    )
    done = run_nightly("--matrix", str(matrix), "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"configuration error: {matrix}: {message}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one paragraph
    assert not (tmp_path / "cache").exists()  # refused before the lock, the clone or any folder


def test_an_entry_pins_a_cmake_release_and_never_a_path() -> None:
    """`cmake` in an entry is --cmake for its build: a PyPI release the build venv installs on whichever runner takes
    the entry (part of the entry's table, so changing it builds the entry again); a path is refused (exit 2)."""
    from support import HOSTS_DIR

    from pytorch_winbuild.facts.model import load_facts
    from pytorch_winbuild.planning.plan import make_plan
    from pytorch_winbuild.planning.request import PlanRequest

    [entry] = _parse({**ENTRY, "cmake": "3.31"}).entries
    [unpinned] = _parse(ENTRY).entries
    assert (entry.request.cmake.kind, entry.request.cmake.value) == ("release", "3.31")
    assert entry.table_hash() != unpinned.table_hash()
    plan = make_plan(PlanRequest(entry.request), load_facts(HOSTS_DIR / "cpu-only.json"), KNOWLEDGE)
    assert plan.cmake is not None and plan.cmake.version == "3.31.10"
    with pytest.raises(ConfigurationError) as error:
        _parse({**ENTRY, "cmake": "C:\\Program Files\\CMake\\bin\\cmake.exe"})
    assert error.value.exit_code == 2 and "matrix.toml: entry 'cpu'.cmake" in error.value.message
