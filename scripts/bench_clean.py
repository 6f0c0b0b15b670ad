#!/usr/bin/env python3
"""Benchmark `invoke clean --all --dry-run` on a large cache against its natural floor, `du -sb` of the same cache.

The cache (made once in a temporary folder, removed at the end): 20 build venvs of --venv-files files each, and a
5 GB compiler cache of 5,000 sparse 1 MB files (sizes are apparent sizes, st_size, as `du -sb` counts them, so
nothing of the 5 GB is written). `du -sb` walks the same tree without Python or Invoke; the dry run adds Python's
and Invoke's start (`invoke --version` is shown as well) and its per-kind listing. Both run side by side in
alternating rounds after one warm-up each. Goal (issue 39 point 5): dry run under 1 s. Exits 1 when missed.

    python scripts/bench_clean.py [--rounds 7] [--venv-files 2000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
GOAL_SECONDS = 1.0
CACHE_FILES = 5000
CACHE_FILE_BYTES = 1024 * 1024


def make_cache(cache: Path, venv_files: int) -> int:
    """The benchmark's cache; returns its number of files."""
    from pytorch_winbuild.deps.cache import tag_cache

    tag_cache(cache)
    for venv in range(20):
        folder = cache / "venvs" / f"2.4-py3.12-{venv:04x}"
        for index in range(venv_files):
            package = folder / "Lib" / "site-packages" / f"package{index // 100}"
            package.mkdir(parents=True, exist_ok=True)
            (package / f"module{index}.py").write_bytes(b"x" * 1000)
    for index in range(CACHE_FILES):
        folder = cache / "sccache" / f"{index % 16:x}" / f"{index // 16 % 16:x}"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"object{index}", "wb") as handle:
            handle.truncate(CACHE_FILE_BYTES)  # sparse: counted, not written
    return 20 * venv_files + CACHE_FILES


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--venv-files", type=int, default=2000)
    args = parser.parse_args()
    if shutil.which("du") is None:
        sys.exit("du is not on PATH: run the benchmark where GNU coreutils are (Linux, Git Bash).")
    root = Path(tempfile.mkdtemp(prefix="bench-clean-"))
    try:
        cache = root / "cache"
        files = make_cache(cache, args.venv_files)
        floor_command = ["du", "-sb", str(cache)]
        ours_command = [sys.executable, "-m", "invoke", "clean", "--all", "--dry-run", "--cache-dir", str(cache)]
        version_command = [sys.executable, "-m", "invoke", "--version"]
        _, shown = timed(ours_command)  # warm-up: bytecode written, the tree in the page cache
        _, floor_out = timed(floor_command)
        floor, ours, version = [], [], []
        for _ in range(args.rounds):
            floor.append(timed(floor_command)[0])
            ours.append(timed(ours_command)[0])
            version.append(timed(version_command)[0])
        total = next(line for line in shown.splitlines() if line.startswith("total:"))
        print(f"cache: 20 venvs x {args.venv_files} files + 5 GB compiler cache ({files} files)")
        print(f"du -sb (floor)                   median {statistics.median(floor):.3f} s  ({floor_out.split()[0]} B)")
        print(f"invoke --version (start alone)   median {statistics.median(version):.3f} s")
        print(f"invoke clean --all --dry-run     median {statistics.median(ours):.3f} s  ({total})")
        ratio = statistics.median(ours) / statistics.median(floor)
        print(f"ratio to du -sb {ratio:.1f}x; goal: under {GOAL_SECONDS:g} s")
        sys.exit(0 if statistics.median(ours) < GOAL_SECONDS else 1)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
