"""A fleet's shared compiler cache, real: two "runners" build the same revision in their own
folders against one Redis, and the second is served from it.

Each runner has its own cache folder (its own SCCACHE_DIR and clone), its own sccache server port
(SCCACHE_SERVER_PORT, so they never share a local server) and the server's idle timeout off, as
two machines would. Runner 1 gets the Redis endpoint from its environment, runner 2 from the
matrix's [shared_cache] table; the password comes from the environment only, as a CI secret does,
and must not appear anywhere the nightly writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nightly_support import (
    REDIS_PASSWORD,
    Redis,
    entries_by_name,
    free_port,
    make_repo,
    run_nightly,
    slow_source,
    summaries,
    write_matrix,
)

ENTRY = {"name": "cpu", "ref": "main", "cuda": "cpu", "compiler_cache": "sccache"}


def _runner(
    tmp_path: Path, name: str, repo: Path, env: dict[str, str], shared_env: dict[str, str] | None = None
) -> tuple[dict, Path, str]:
    """One runner's night: its summary entry, its output folder, and everything it printed."""
    cache, output = tmp_path / name / "cache", tmp_path / name / "dist"
    matrix = write_matrix(
        tmp_path / name / "matrix.toml", [{**ENTRY, "repo": str(repo)}], output_dir=output, shared_env=shared_env
    )
    runner_env = {"SCCACHE_SERVER_PORT": str(free_port()), "SCCACHE_IDLE_TIMEOUT": "0", **env}
    done = run_nightly("--matrix", str(matrix), "--cache-dir", str(cache), env=runner_env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    return entries_by_name(summaries(output)[-1])["cpu"], output, done.stdout + done.stderr


def _written_text(*folders: Path) -> str:
    return "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for folder in folders
        for path in folder.rglob("*")
        if path.is_file() and path.suffix in (".json", ".md", ".log")
    )


@pytest.mark.services
@pytest.mark.build
def test_the_second_runner_is_served_from_the_shared_redis(redis_server: Redis, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "pytorch-repo", {"slow.cpp": slow_source(2)})
    secret = {"SCCACHE_REDIS_PASSWORD": REDIS_PASSWORD}

    first, first_out, first_printed = _runner(
        tmp_path, "runner-1", repo, {**secret, "SCCACHE_REDIS_ENDPOINT": redis_server.endpoint}
    )
    keys_after_first = int(redis_server.command("DBSIZE").lstrip(":"))
    second, second_out, second_printed = _runner(
        tmp_path, "runner-2", repo, secret, shared_env={"SCCACHE_REDIS_ENDPOINT": redis_server.endpoint}
    )

    assert first["result"] == second["result"] == "success" and first["revision"] == second["revision"]
    one, two = first["compiler_cache"], second["compiler_cache"]
    assert (
        one["backends"] == two["backends"] == ["redis"] and one["location"] == two["location"] == redis_server.endpoint
    )
    assert f"redis, name: {redis_server.endpoint}" in two["reported_location"]  # sccache's own word for where it stored
    assert one["hits"] == 0 and one["misses"] >= 5 and keys_after_first >= one["misses"]
    assert two["hits"] == one["misses"] and two["misses"] == 0 and second["hit_rate"] == 1.0
    assert summaries(second_out)[-1]["compiler_cache"] == {"hits": one["misses"], "misses": 0, "hit_rate": 1.0}
    assert (
        second["stages"]["compile"] < first["stages"]["compile"] - 2.0
    )  # the slow file alone takes seconds to compile
    markdown = next(second_out.glob("*/nightly-*.md")).read_text(encoding="utf-8")
    assert f"| {one['misses']}/{one['misses']} (100%, sccache redis) |" in markdown

    # Separate folders, separate local caches and servers, one shared store.
    report = json.loads(Path(second["report"]).read_text(encoding="utf-8"))
    source = report["source"]["path"]
    assert source == str(tmp_path / "runner-2" / "cache" / "nightly" / "src" / "cpu")
    assert report["environment"]["SCCACHE_DIR"] == str(tmp_path / "runner-2" / "cache" / "sccache")
    assert report["environment"]["SCCACHE_BASEDIRS"] == source and report["cache"]["raw"]["basedirs"] == [
        source + "/"
    ]  # sccache took it
    assert report["environment"]["SCCACHE_REDIS_ENDPOINT"] == redis_server.endpoint
    assert report["environment"]["SCCACHE_REDIS_PASSWORD"] == "***"
    assert {
        "name": "SCCACHE_REDIS_ENDPOINT",
        "value": redis_server.endpoint,
        "action": "set",
        "reason": f"shared compiler cache ({tmp_path / 'runner-2' / 'matrix.toml'} [shared_cache])",
    } in report["plan"]["changes"]
    # The runner's secret is nowhere: not in what was printed, nor in logs, reports, summaries.
    for text in (first_printed, second_printed, _written_text(first_out, second_out)):
        assert REDIS_PASSWORD not in text


@pytest.mark.build
def test_an_unreachable_shared_cache_builds_with_the_local_one(mini_repo: Path, tmp_path: Path) -> None:
    endpoint = f"redis://127.0.0.1:{free_port()}"  # nothing listens there
    entry, output, _ = _runner(tmp_path, "runner", mini_repo, {"SCCACHE_REDIS_ENDPOINT": endpoint})

    assert (
        entry["result"] == "success"
        and entry["compiler_cache"]["backends"] == []
        and entry["compiler_cache"]["misses"] > 0
    )
    assert entry["compiler_cache"]["fallback"].startswith(
        f"the shared redis cache {endpoint} is unreachable (127.0.0.1:"
    )
    assert "Local disk" in entry["compiler_cache"]["reported_location"]
    report = json.loads(Path(entry["report"]).read_text(encoding="utf-8"))
    assert "SCCACHE_REDIS_ENDPOINT" not in report["environment"]
    markdown = next(output.glob("*/nightly-*.md")).read_text(encoding="utf-8")
    assert f"- **cpu**: warning: the shared redis cache {endpoint} is unreachable" in markdown
