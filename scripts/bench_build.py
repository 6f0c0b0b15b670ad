"""Benchmark the build runner on a real PyTorch C++ extension (tests/build/fixtures/torch_ext).

Side by side, in one run:

1. cold build (empty ccache) vs warm build (build folder removed, ccache full): what the
   compiler cache saves. Target: warm at least 10x faster.
2. a no-op rebuild through `invoke build-ext` vs the bare `python setup.py build_ext --inplace`
   in the same environment: what the orchestrator itself costs (probe, plan, cache statistics,
   log, report). Target: at most 1 s more.

Usage (from the repo root, with torch installed):  python scripts/bench_build.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE = REPO_ROOT / "tests" / "build" / "fixtures" / "torch_ext"
SPEEDUP_TARGET = 10.0
OVERHEAD_TARGET_SECONDS = 1.0


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Wall-clock seconds of one run, and its output; a failed run stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(
            f"`{' '.join(command)}` failed with exit status {done.returncode}:\n"
            f"{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    return seconds, done.stdout + done.stderr


def last_report(log_dir: Path) -> dict[str, Any]:
    return json.loads(sorted(log_dir.glob("*.json"))[-1].read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each no-op rebuild (the median counts)")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="pytorch-winbuild-bench-") as folder:
        work = Path(folder)
        source = work / "torch_ext"
        shutil.copytree(FIXTURE, source)
        cache = work / "cache"
        env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
        invoke = [
            sys.executable,
            "-m",
            "invoke",
            "--search-root",
            str(REPO_ROOT),
            "build-ext",
            str(source),
            "--cuda",
            "cpu",
            "--compiler-cache",
            "ccache",
            "--cache-dir",
            str(cache),
        ]

        print(
            f"extension: {FIXTURE.relative_to(REPO_ROOT)} (3 translation units including torch/extension.h), "
            f"{os.cpu_count()} CPUs",
            flush=True,
        )
        cold, _ = timed(invoke, REPO_ROOT, env)
        cold_report = last_report(cache / "logs")
        print(f"cold build (empty ccache)              {cold:8.2f} s   ({cold_report['cache']['summary']})", flush=True)
        warm, _ = timed([*invoke, "--clean"], REPO_ROOT, env)
        warm_report = last_report(cache / "logs")
        print(f"warm build (--clean, ccache full)      {warm:8.2f} s   ({warm_report['cache']['summary']})", flush=True)

        orchestrated = []
        for _ in range(options.repeat):
            seconds, output = timed(invoke, REPO_ROOT, env)
            if "ninja: no work to do." not in Path(last_report(cache / "logs")["log"]).read_text(encoding="utf-8"):
                sys.exit(
                    "the rebuild through invoke compiled something: it is not a no-op, so the comparison "
                    "would be wrong."
                )
            orchestrated.append(seconds)
        # The bare run gets exactly the environment the orchestrator gave the build (from its report),
        # so Ninja sees the same compile commands and has nothing to do either.
        build_env = last_report(cache / "logs")["environment"]
        bare = []
        for _ in range(options.repeat):
            seconds, output = timed([sys.executable, "setup.py", "build_ext", "--inplace"], source, build_env)
            if "ninja: no work to do." not in output:
                sys.exit("the bare rebuild compiled something: it is not a no-op, so the comparison would be wrong.")
            bare.append(seconds)

    speedup = cold / warm
    invoke_median, bare_median = statistics.median(orchestrated), statistics.median(bare)
    overhead = invoke_median - bare_median
    print(
        f"no-op rebuild, invoke build-ext        {invoke_median:8.2f} s   (median of {options.repeat}: "
        f"{', '.join(f'{s:.2f}' for s in orchestrated)})"
    )
    print(
        f"no-op rebuild, bare setup.py build_ext {bare_median:8.2f} s   (median of {options.repeat}: "
        f"{', '.join(f'{s:.2f}' for s in bare)})"
    )
    print()
    print(
        f"compiler cache: warm is {speedup:.1f}x faster than cold (target >= {SPEEDUP_TARGET:.0f}x: "
        f"{'met' if speedup >= SPEEDUP_TARGET else 'MISSED'})"
    )
    print(
        f"orchestrator overhead on a no-op rebuild: {overhead:+.2f} s (target <= "
        f"{OVERHEAD_TARGET_SECONDS:.0f} s: {'met' if overhead <= OVERHEAD_TARGET_SECONDS else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
