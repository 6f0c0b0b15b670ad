"""`invoke clean` for every kind of cache content (issue 39 point 5): each flag removes its kind and nothing else,
--older-than keeps the newer logs, --dry-run removes nothing and lists sizes and paths, links are never followed out
of the cache, and a folder a running build claims (a real second process) is kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from invoke import Config, Context
from support import REPO_ROOT, run_invoke

from pytorch_winbuild.deps.cache import tag_cache
from pytorch_winbuild.deps.cache_clean import KINDS
from pytorch_winbuild.errors import BusyError, ConfigurationError
from pytorch_winbuild.faces.deps_commands import clean
from pytorch_winbuild.faces.flags import WINBUILD_DEFAULTS

OLD = time.time() - 40 * 86400
# What each flag removes from the cache _filled() makes (files under these paths).
REMOVES = {
    "deps": ["deps"],
    "downloads": ["downloads"],
    "venvs": ["venvs"],
    "sources": ["src", "nightly/src"],
    "compiler_cache": ["sccache", "ccache", "clcache", "launchers"],
    "logs": ["logs"],
    "pythons": ["deps/python.3.11.9", "downloads/python.3.11.9.nupkg"],
}
KEPT_ALWAYS = {"CACHEDIR.TAG", "deps.lock", "memory/peaks.json", "nightly/nightly.lock"}


def _filled(cache: Path) -> Path:
    files = {
        "deps/mkl_2020.2.254/lib/mkl.lib": 100,
        "deps/python.3.11.9/tools/python.exe": 50,
        "downloads/mkl_2020.2.254.7z": 70,
        "downloads/python.3.11.9.nupkg": 30,
        "venvs/1.13-py3.10-aaaa/lib/site.py": 20,
        "venvs/2.4-py3.12-bbbb/bin/python": 20,
        "venvs/last.json": 5,
        "src/pytorch/setup.py": 10,
        "nightly/src/cu121/setup.py": 10,
        "nightly/nightly.lock": 1,
        "sccache/a/obj": 4000,
        "ccache/b/obj": 4000,
        "clcache/c/obj": 4000,
        "launchers/sccache/gcc": 9,
        "logs/build-20240101-000000.log": 300,
        "logs/build-20240101-000000.json": 30,
        "logs/build-new.log": 300,
        "memory/peaks.json": 2,
        "deps.lock": 2,
    }
    for name, size in files.items():
        (cache / name).parent.mkdir(parents=True, exist_ok=True)
        (cache / name).write_bytes(b"x" * size)
    for name in ("logs/build-20240101-000000.log", "logs/build-20240101-000000.json"):
        os.utime(cache / name, (OLD, OLD))
    tag_cache(cache)
    return cache


def _files(cache: Path) -> set[str]:
    return {p.relative_to(cache).as_posix() for p in cache.rglob("*") if p.is_file() and p.name != ".lock"}


def _clean(cache: Path, *flags: str, older_than: str | None = None, dry_run: bool = False) -> None:
    context = Context(Config(defaults={"winbuild": WINBUILD_DEFAULTS}))
    kinds = {flag: True for flag in flags if flag != "all"}
    clean(context, kinds=kinds, all_kinds="all" in flags, older_than=older_than, dry_run=dry_run, cache_dir=str(cache))


def _under(name: str, roots: list[str]) -> bool:
    return any(name == root or name.startswith(root + "/") for root in roots)


@pytest.mark.parametrize("flag", [kind.flag for kind in KINDS])
def test_each_flag_removes_its_kind_and_nothing_else(tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]):
    cache = _filled(tmp_path / "cache")
    before = _files(cache)
    _clean(cache, flag)
    gone = before - _files(cache)
    assert gone == {name for name in before if _under(name, REMOVES[flag])}
    assert "removed " in capsys.readouterr().out


def test_all_removes_every_kind_and_keeps_the_cache_own_files(tmp_path: Path):
    cache = _filled(tmp_path / "cache")
    _clean(cache, "all")
    assert _files(cache) == KEPT_ALWAYS


def test_older_than_keeps_the_newer_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cache = _filled(tmp_path / "cache")
    _clean(cache, "logs", older_than="30")
    assert sorted(p.name for p in (cache / "logs").iterdir()) == ["build-new.log"]
    _clean(cache, "all", older_than="0.5", dry_run=True)
    assert "would remove" not in capsys.readouterr().out.split("--logs:")[1].split("--pythons")[0]


@pytest.mark.parametrize(
    ("flags", "older_than", "said"),
    [
        (("venvs",), "30", "applies to logs only"),
        (("logs",), "-1", "is not a number of days"),
        (("logs",), "a week", "is not a number of days"),
        (("all",), "nan", "is not a number of days"),
        (("all",), "inf", "is not a number of days"),
        ((), None, "nothing to clean was named"),
    ],
)
def test_bad_flags_are_refused_before_anything_goes(tmp_path: Path, flags: tuple[str, ...], older_than, said: str):
    cache = _filled(tmp_path / "cache")
    before = _files(cache)
    with pytest.raises(ConfigurationError, match=said) as caught:
        _clean(cache, *flags, older_than=older_than)
    assert caught.value.exit_code == 2 and _files(cache) == before


def test_dry_run_lists_each_kind_its_size_and_paths_escaped_and_removes_nothing(tmp_path: Path):
    cache = _filled(tmp_path / "cache")
    (cache / "venvs" / "red\x1b[31m").mkdir()
    before = _files(cache)
    result = run_invoke("clean", "--all", "--dry-run", "--cache-dir", str(cache))
    assert result.returncode == 0, result.stderr
    assert _files(cache) == before and (cache / "venvs" / "red\x1b[31m").is_dir()
    out = result.stdout
    assert "\x1b" not in out
    for line in (
        "--deps: 1 item, 150 B",
        "--downloads: 1 item, 100 B",
        "--venvs: 4 items, 45 B",
        "--sources: 2 items, 20 B",
        "--compiler-cache: 4 items, 11.7 KB",
        "--logs: 3 items, 630 B",
        "--pythons: removed with --deps, --downloads",
        f"  would remove {cache / 'src' / 'pytorch'} (10 B)",
        f"  would remove {cache / 'sccache'} (3.9 KB)",
    ):
        assert line in out, out
    bad = run_invoke("clean", "--venvs", "--older-than", "7", "--cache-dir", str(cache))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr, bad.stderr


@pytest.mark.skipif(os.name == "nt", reason="symbolic links need a privilege on Windows")
def test_links_are_neither_sized_nor_followed_out_of_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cache = _filled(tmp_path / "cache")
    outside = tmp_path / "home"
    (outside / "work").mkdir(parents=True)
    (outside / "work" / "thesis.pdf").write_bytes(b"y" * 10_000)
    (cache / "venvs" / "1.13-py3.10-aaaa" / "lib" / "linked").symlink_to(outside / "work")
    (cache / "venvs" / "linked-venv").symlink_to(outside / "work")
    (cache / "sccache").rename(tmp_path / "sccache-elsewhere")
    (cache / "sccache").symlink_to(tmp_path / "sccache-elsewhere")
    _clean(cache, "venvs", "compiler_cache", dry_run=True)
    assert "9.8 KB" not in capsys.readouterr().out  # the 10 000 bytes outside were not counted
    _clean(cache, "venvs", "compiler_cache")
    assert (outside / "work" / "thesis.pdf").stat().st_size == 10_000
    assert (tmp_path / "sccache-elsewhere" / "a" / "obj").is_file()
    assert not os.path.lexists(cache / "venvs" / "linked-venv") and not os.path.lexists(cache / "sccache")


def test_a_folder_a_running_build_claims_is_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cache = _filled(tmp_path / "cache")
    used = cache / "venvs" / "1.13-py3.10-aaaa"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
            "from pytorch_winbuild.deps.in_use import claimed\n"
            "with claimed(Path(sys.argv[2]), [Path(sys.argv[3])], log=print):\n"
            "    print('held', flush=True); time.sleep(30)",
            str(REPO_ROOT),
            str(cache),
            str(used),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        _clean(cache, "venvs", dry_run=True)
        assert f"kept, in use by a running build: {used}" in capsys.readouterr().out
        with pytest.raises(BusyError, match="1 folder in use by a running build was kept") as caught:
            _clean(cache, "venvs")
        assert caught.value.exit_code == 7
        assert (used / "lib" / "site.py").is_file() and not (cache / "venvs" / "2.4-py3.12-bbbb").exists()
    finally:
        holder.kill()
        holder.wait()
    _clean(cache, "venvs")  # its holder gone, the claim is stale: the folder and its claim file go
    assert sorted(os.listdir(cache / "venvs")) == []


def test_the_table_names_the_folders_their_writers_use(tmp_path: Path):
    import tomllib

    from pytorch_winbuild.builder.compiler_cache import LAUNCHERS_FOLDER
    from pytorch_winbuild.builder.pipeline import default_log_dir
    from pytorch_winbuild.builder.source import CLONES_FOLDER
    from pytorch_winbuild.nightly.entry import SOURCES_FOLDER
    from pytorch_winbuild.planning.venv_plan import venv_folder

    by_flag = {kind.flag: kind.folders for kind in KINDS}
    assert by_flag["sources"] == (CLONES_FOLDER, SOURCES_FOLDER.as_posix())
    assert by_flag["venvs"] == (venv_folder(Path("c"), "e", "3.11", "k").parent.name,)
    assert by_flag["logs"] == (default_log_dir(Path("c")).name,)
    caches = tomllib.loads((REPO_ROOT / "build_config" / "compiler_caches.toml").read_text(encoding="utf-8"))
    dirs = [
        variable["value"].removeprefix("{cache_dir}{sep}")
        for entry in caches["cache"].values()
        for variable in entry["env"]
        if variable["name"].endswith("_DIR")
    ]
    assert set(by_flag["compiler_cache"]) == {*dirs, LAUNCHERS_FOLDER}
    assert set(caches["cache"]) == set(dirs)  # build_folders claims <cache>/<name of the cache>


def test_build_ext_claims_the_venv_its_python_runs_in_and_the_compiler_cache_with_its_wrappers(tmp_path: Path):
    """build-ext builds in the Python it extends, often the cache's last build venv, and writes compiler-cache
    wrappers under <cache>/launchers: while it runs, `clean --venvs` and `clean --compiler-cache` spare them."""
    from dataclasses import replace

    from support import HOSTS_DIR, plan_options

    from pytorch_winbuild.deps.in_use import in_use
    from pytorch_winbuild.faces.commands import _claim_used
    from pytorch_winbuild.facts.model import load_facts
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.planning.plan import make_plan
    from pytorch_winbuild.planning.request import PlanRequest

    cache = _filled(tmp_path / "cache")
    venv = cache / "venvs" / "1.13-py3.10-aaaa"
    plan = make_plan(
        PlanRequest(plan_options(cuda="cpu", cache_dir=str(cache))),
        load_facts(HOSTS_DIR / "cpu-only.json"),
        load_knowledge(),
    )
    plan = replace(plan, venv=None, compiler_cache="ccache")
    used = [venv, cache / "ccache", cache / "launchers"]
    with _claim_used(plan, cache, str(venv / "bin" / "python")):
        assert all(in_use(folder) for folder in used)
        assert not in_use(cache / "venvs" / "2.4-py3.12-bbbb")
    assert not any(in_use(folder) for folder in used)
