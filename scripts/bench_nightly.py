#!/usr/bin/env python3
"""Benchmark a nightly where nothing changed against its natural floor.

Makes mini torch a git repository, writes a matrix of ENTRIES entries on it, runs the nightly
once to build them all (setup, not timed), then times side by side in alternating rounds:

  floor     python -m invoke --version, then ENTRIES × `git ls-remote REPO refs/heads/main`
  nightly   python -m invoke nightly (every entry unchanged, so every entry skipped)

and prints the medians and their ratio. Goal (issue 13): nightly ≤ 2 × floor. Exits 1 when the
goal is missed or when an entry was not skipped.

    python scripts/bench_nightly.py [--entries 20] [--rounds 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests" / "nightly"))
from nightly_support import entries_by_name, make_repo, run_nightly, summaries, write_matrix  # noqa: E402

GOAL = 2.0


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-nightly-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    repo = make_repo(work / "repo")
    output, cache = work / "out", work / "cache"
    names = [f"e{index:02d}" for index in range(args.entries)]
    entries = [{"name": n, "repo": str(repo), "ref": "main", "cuda": "cpu", "compiler_cache": "none"} for n in names]
    matrix = write_matrix(work / "matrix.toml", entries, output_dir=output)
    nightly = ("--matrix", str(matrix), "--cache-dir", str(cache))
    print(f"setup: building {args.entries} entries once ...", flush=True)
    first = run_nightly(*nightly, env=env, timeout=3600)
    if first.returncode != 0:
        sys.exit(f"the setup nightly failed:\n{first.stdout[-3000:]}{first.stderr[-3000:]}")
    floor_command = [sys.executable, "-m", "invoke", "--version"]
    ls_remote = ["git", "ls-remote", "--", str(repo), "refs/heads/main"]
    floor, ours = [], []
    for _ in range(args.rounds):
        time.sleep(1.0)  # summaries are named by the second
        floor.append(timed(floor_command, env) + sum(timed(ls_remote, env) for _ in names))
        started = time.perf_counter()
        done = run_nightly(*nightly, env=env)
        ours.append(time.perf_counter() - started)
        results = {name: entry["result"] for name, entry in entries_by_name(summaries(output)[-1]).items()}
        if done.returncode != 0 or set(results.values()) != {"skipped"}:
            sys.exit(f"not every entry was skipped: {results}\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    ratio = statistics.median(ours) / statistics.median(floor)
    print(f"invoke --version + {args.entries} x git ls-remote   median {statistics.median(floor):.2f} s")
    print(f"invoke nightly (all unchanged)            median {statistics.median(ours):.2f} s")
    print(f"ratio {ratio:.2f}x (goal <= {GOAL:g}x)")
    sys.exit(0 if ratio <= GOAL else 1)


if __name__ == "__main__":
    main()
