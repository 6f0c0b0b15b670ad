#!/usr/bin/env python3
"""Benchmark how fast the CLI answers: `invoke build --cuda cpu --dry-run` against `invoke --version`.

`invoke --version` is the floor: Python and Invoke starting, nothing of ours. The dry run adds
loading our tasks, the facts of this machine and the plan. Both run side by side in alternating
rounds, with bytecode caching on as on a user's machine (PYTHONDONTWRITEBYTECODE is dropped for
both), after one warm-up run of each. Goal (issue 13): dry run ≤ 1.5 × floor. Exits 1 when missed.

    python scripts/bench_cli.py [--rounds 21]   (the two medians move by tens of ms run to run)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.5
FLOOR = [sys.executable, "-m", "invoke", "--version"]
DRY_RUN = [sys.executable, "-m", "invoke", "build", "--cuda", "cpu", "--dry-run"]


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[1:])} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    timed(FLOOR, env), timed(DRY_RUN, env)  # warm-up: bytecode written, files in the page cache
    floor, ours = [], []
    for _ in range(args.rounds):
        floor.append(timed(FLOOR, env))
        ours.append(timed(DRY_RUN, env))
    ratio = statistics.median(ours) / statistics.median(floor)
    print(f"invoke --version                     median {statistics.median(floor):.3f} s")
    print(f"invoke build --cuda cpu --dry-run    median {statistics.median(ours):.3f} s")
    print(f"ratio {ratio:.2f}x (goal <= {GOAL:g}x)")
    sys.exit(0 if ratio <= GOAL else 1)


if __name__ == "__main__":
    main()
