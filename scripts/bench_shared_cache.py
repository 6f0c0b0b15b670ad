#!/usr/bin/env python3
"""Benchmark the fleet's shared compiler cache: two nightly "runners", one Redis.

Starts a real redis-server on 127.0.0.1 (with a password, passed as the runners' secret), makes
a git repository of the build tier's mini torch with --slow-files extra C++ files that take a few
seconds each to compile, and runs `invoke nightly` twice over the same matrix — an entry that
builds and one that does not compile — as two runners: each with its own cache folder (its own
clone and SCCACHE_DIR), its own sccache server port, and the same SCCACHE_REDIS_ENDPOINT. Prints
the second night's Markdown summary and, per round, the built entry's compile time (the build
command, `python setup.py bdist_wheel`), its total time and the cache's hits on both runners.

    python scripts/bench_shared_cache.py [--slow-files 4] [--constants 2] [--rounds 1] [--workdir DIR]

Target: the second runner is served entirely from the cache (100% hits) and compiles faster.
Exits 1 when it is not.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# The nightly tests' helpers: the stand-in PyTorch repository, matrix files, `invoke nightly` as
# the scheduler runs it, a free port, a raw Redis command.
sys.path.insert(0, str(REPO_ROOT / "tests" / "nightly"))
from nightly_support import (  # noqa: E402 - importable only once the line above has run
    entries_by_name,
    free_port,
    make_repo,
    redis_command,
    run_nightly,
    slow_source,
    summaries,
    wait_for_port,
    write_matrix,
)

BUILT, BROKEN = "cpu", "cpu-broken"


def start_redis(folder: Path, password: str) -> tuple[subprocess.Popen[bytes], int]:
    executable = shutil.which("redis-server")
    if executable is None:
        sys.exit("redis-server is not installed (apt-get install redis-server).")
    port = free_port()
    process = subprocess.Popen(
        [
            executable,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--requirepass",
            password,
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port)
    return process, port


def night(folder: Path, repo: Path, endpoint: str, password: str) -> tuple[dict[str, Any], Path]:
    """One runner's nightly: (its summary, its Markdown file)."""
    output = folder / "dist"
    entries = [
        {"name": BUILT, "repo": str(repo), "ref": "main", "cuda": "cpu", "compiler_cache": "sccache"},
        {"name": BROKEN, "repo": str(repo), "ref": "broken", "cuda": "cpu", "compiler_cache": "sccache"},
    ]
    matrix = write_matrix(folder / "matrix.toml", entries, output_dir=output)
    env = {
        "SCCACHE_REDIS_ENDPOINT": endpoint,
        "SCCACHE_REDIS_PASSWORD": password,
        "SCCACHE_SERVER_PORT": str(free_port()),
        "SCCACHE_IDLE_TIMEOUT": "0",
    }
    done = run_nightly("--matrix", str(matrix), "--cache-dir", str(folder / "cache"), env=env, timeout=3600)
    if done.returncode != 5:  # the broken entry fails; anything else is a problem of the bench
        sys.exit(
            f"the nightly of {folder.name} exited with {done.returncode} (expected 5):\n"
            f"{done.stdout[-3000:]}\n"
            f"{done.stderr}"
        )
    if password in done.stdout + done.stderr:
        sys.exit("the Redis password appeared in the nightly's output")
    return summaries(output)[-1], next(output.glob("*/nightly-*.md"))


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    entry = entries_by_name(summary)[BUILT]
    cache = entry["compiler_cache"]
    return {
        "compile": entry["stages"]["compile"],
        "entry": entry["seconds"],
        "hits": cache["hits"],
        "misses": cache["misses"],
        "hit_rate": entry["hit_rate"],
        "backend": cache["backends"],
        "night": summary["seconds"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--slow-files", type=int, default=4, help="extra C++ files that take seconds to compile (default 4)"
    )
    parser.add_argument(
        "--constants", type=int, default=2, help="compile work per slow file, about 2 s each (default 2)"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="runner pairs, each with fresh caches and an emptied Redis (default 1)"
    )
    parser.add_argument(
        "--workdir", type=Path, help="keep everything here (default: a temporary folder, removed at the end)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-shared-cache-"))
    work.mkdir(parents=True, exist_ok=True)
    password = secrets.token_hex(16)
    redis, port = start_redis(work, password)
    endpoint = f"redis://127.0.0.1:{port}"
    rounds: list[dict[str, Any]] = []
    try:
        repo = make_repo(
            work / "pytorch-repo",
            {
                f"slow_{i}.cpp": slow_source(args.constants).replace("spun()", f"spun_{i}()")
                for i in range(args.slow_files)
            },
        )
        for number in range(1, args.rounds + 1):
            redis_command(port, "FLUSHALL", password=password)
            first, _ = night(work / f"round-{number}" / "runner-1", repo, endpoint, password)
            second, markdown = night(work / f"round-{number}" / "runner-2", repo, endpoint, password)
            rounds.append({"runner_1": figures(first), "runner_2": figures(second)})
    finally:
        redis.terminate()
        redis.wait(timeout=10)

    print(markdown.read_text(encoding="utf-8"))
    print(
        f"{'round':>5}  {'runner':>6}  {'compile s':>9}  {'entry s':>7}  {'night s':>7}  {'hits':>4}  "
        f"{'misses':>6}  hit rate"
    )
    for number, pair in enumerate(rounds, 1):
        for runner in ("runner_1", "runner_2"):
            f = pair[runner]
            rate = "–" if f["hit_rate"] is None else f"{100 * f['hit_rate']:.0f}%"
            print(
                f"{number:>5}  {runner[-1]:>6}  {f['compile']:>9.2f}  {f['entry']:>7.2f}  {f['night']:>7.2f} "
                f" {f['hits']:>4}  {f['misses']:>6}  {rate} ({'/'.join(f['backend']) or 'local'})"
            )
    first_compile = statistics.median(pair["runner_1"]["compile"] for pair in rounds)
    second_compile = statistics.median(pair["runner_2"]["compile"] for pair in rounds)
    print(
        "\n"
        f"median compile time: runner 1 {first_compile:.2f} s, runner 2 {second_compile:.2f} s "
        f"({second_compile / first_compile:.0%} of runner 1); {args.slow_files} slow files, {sys.platform}, sccache "
        "+ Redis on 127.0.0.1"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"rounds": rounds, "median_compile": [first_compile, second_compile]}, indent=2) + "\n",
            encoding="utf-8",
        )
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    served = all(
        pair["runner_2"]["hit_rate"] == 1.0 and pair["runner_2"]["compile"] < pair["runner_1"]["compile"]
        for pair in rounds
    )
    print(
        "target met: the second runner was served entirely from the shared cache and compiled faster."
        if served
        else "TARGET MISSED"
    )
    return 0 if served else 1


if __name__ == "__main__":
    sys.exit(main())
