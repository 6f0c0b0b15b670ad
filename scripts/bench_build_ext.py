"""Benchmark an unchanged `invoke build-ext` against `invoke --version` (issue 39, point 1).

An unchanged build-ext used to run setup.py, which imports torch (3.6-3.9 s for a CPU extension, 21.9x
`invoke --version`); now it compares its key with the last successful build's (builder/extension_key.py) and
stops. Side by side in one run, through `python -m invoke` as a user runs it: the stable-ABI CPU extension
(tests/build/fixtures/torch_ops) is built once into a fresh copy, then N rounds alternate an unchanged build-ext
and `invoke --version`. Target: the median build-ext at most 3x the median --version.

Needs torch in the interpreter that runs this script (the CPU wheel will do) and a C++ compiler.

Usage (from the repo root):  python scripts/bench_build_ext.py [--rounds 15]
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
FIXTURE = REPO_ROOT / "tests" / "build" / "fixtures" / "torch_ops"
RATIO_TARGET = 3.0


def run(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall-clock seconds and output of one run; a failed run stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(
            f"`{' '.join(command)}` failed with exit status {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr}"
        )
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    invoke = [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT)]
    with tempfile.TemporaryDirectory(prefix="bench-build-ext-") as work:
        source = Path(work) / "torch_ops"
        shutil.copytree(FIXTURE, source)
        build_ext = [*invoke, "build-ext", str(source), "--cuda", "cpu", "--compiler-cache", "none"]
        build_ext += ["--cache-dir", str(Path(work) / "cache")]
        first, _ = run(build_ext, env)
        print(f"first build-ext (compiles): {first:.2f} s")
        skipped, versions = [], []
        for _ in range(rounds):
            seconds, output = run(build_ext, env)
            if "up to date" not in output:
                sys.exit(f"build-ext built again although nothing changed:\n{output[-3000:]}")
            skipped.append(seconds)
            versions.append(run([*invoke, "--version"], env)[0])
    unchanged, version = statistics.median(skipped), statistics.median(versions)
    ratio = unchanged / version
    print(f"unchanged build-ext: median {unchanged:.3f} s (min {min(skipped):.3f}, max {max(skipped):.3f}, n={rounds})")
    print(f"invoke --version:    median {version:.3f} s (min {min(versions):.3f}, max {max(versions):.3f}, n={rounds})")
    print(f"ratio: {ratio:.2f}x (target <= {RATIO_TARGET:.0f}x): {'met' if ratio <= RATIO_TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
