"""Benchmark build-ext at its floors (issue 39, points 1 and 3), side by side in one run, through `python -m invoke`.

1. An unchanged build-ext vs `invoke --version`. It used to run setup.py, which imports torch (3.6-3.9 s for a
   CPU extension, 21.9x `invoke --version`); now it compares its key with the last successful build's
   (builder/extension_key.py) and stops. The stable-ABI CPU extension (tests/build/fixtures/torch_ops) is built once
   into a fresh copy, then N rounds alternate an unchanged build-ext and `invoke --version`. Target: <= 3x.
2. A warm `build-ext --clean` (the compiler cache holds every object: built once, then each round removes build/ and
   builds again) vs `python -c "import torch.utils.cpp_extension"`, the import setup.py itself cannot avoid.
   Target: <= 1.3x. Each round's report splits the time: setup.py (its "build" phase) and the rest, ours.

The runs write and read bytecode as a default Python does (PYTHONDONTWRITEBYTECODE is dropped from their
environment; --no-bytecode keeps it, and then every run compiles the modules it imports from source).
Needs torch in the interpreter that runs this script (the CPU wheel will do), a C++ compiler and the compiler cache.

Usage (from the repo root):  python scripts/bench_build_ext.py [--rounds 15] [--clean-rounds 5]
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

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE = REPO_ROOT / "tests" / "build" / "fixtures" / "torch_ops"
RATIO_TARGET = 3.0
CLEAN_TARGET = 1.3


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


def median_line(label: str, seconds: list[float]) -> str:
    return (
        f"{label} median {statistics.median(seconds):.3f} s (min {min(seconds):.3f}, max {max(seconds):.3f}, "
        f"n={len(seconds)})"
    )


def ratio_line(ratio: float, target: float) -> str:
    return f"ratio: {ratio:.2f}x (target <= {target}x): {'met' if ratio <= target else 'NOT met'}"


def unchanged(invoke: list[str], work: Path, env: dict[str, str], rounds: int) -> None:
    """Part 1: an unchanged build-ext vs `invoke --version`."""
    source = work / "torch_ops"
    shutil.copytree(FIXTURE, source)
    build_ext = [*invoke, "build-ext", str(source), "--cuda", "cpu", "--compiler-cache", "none"]
    build_ext += ["--cache-dir", str(work / "cache")]
    first, _ = run(build_ext, env)
    print(f"first build-ext (compiles): {first:.2f} s")
    skipped, versions = [], []
    for _ in range(rounds):
        seconds, output = run(build_ext, env)
        if "up to date" not in output:
            sys.exit(f"build-ext built again although nothing changed:\n{output[-3000:]}")
        skipped.append(seconds)
        versions.append(run([*invoke, "--version"], env)[0])
    print(median_line("unchanged build-ext:", skipped))
    print(median_line("invoke --version:   ", versions))
    print(ratio_line(statistics.median(skipped) / statistics.median(versions), RATIO_TARGET))


def _phases(output: str) -> dict[str, float]:
    """The phases of the report a build-ext printed the path of."""
    report = next(line.split(None, 1)[1] for line in output.splitlines() if line.strip().startswith("report "))
    phases = json.loads(Path(report.strip()).read_text(encoding="utf-8"))["phases"]
    return {name: float(seconds) for name, seconds in phases.items()}


def warm_clean(invoke: list[str], work: Path, env: dict[str, str], rounds: int, cache: str) -> None:
    """Part 2: a warm `build-ext --clean` vs the import of torch.utils.cpp_extension."""
    source = work / "warm" / "torch_ops"
    shutil.copytree(FIXTURE, source)
    build_ext = [*invoke, "build-ext", str(source), "--cuda", "cpu", "--compiler-cache", cache]
    build_ext += ["--cache-dir", str(work / "warm" / "cache")]
    first, _ = run(build_ext, env)
    print(f"first build-ext, {cache} cold: {first:.2f} s")
    builds, imports, setup_py = [], [], []
    for _ in range(rounds):
        seconds, output = run([*build_ext, "--clean"], env)
        if " 0 misses" not in output:
            sys.exit(f"the warm --clean build missed the compiler cache:\n{output[-3000:]}")
        builds.append(seconds)
        setup_py.append(_phases(output)["build"])
        imports.append(run([sys.executable, "-c", "import torch.utils.cpp_extension"], env)[0])
    ours = [total - inside for total, inside in zip(builds, setup_py, strict=True)]
    print(median_line("warm build-ext --clean:              ", builds))
    print(median_line("  of which setup.py (phase 'build'): ", setup_py))
    print(median_line("  of which ours (the rest):          ", ours))
    print(median_line("import torch.utils.cpp_extension:    ", imports))
    print(ratio_line(statistics.median(builds) / statistics.median(imports), CLEAN_TARGET))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="rounds of part 1 (unchanged build-ext)")
    parser.add_argument("--clean-rounds", type=int, default=5, help="rounds of part 2 (warm --clean); 0: skip it")
    parser.add_argument("--compiler-cache", default="ccache", help="part 2's compiler cache (build-ext's flag)")
    parser.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE in the runs")
    arguments = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    if not arguments.no_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"bytecode: {'not written (PYTHONDONTWRITEBYTECODE)' if 'PYTHONDONTWRITEBYTECODE' in env else 'kept'}")
    invoke = [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT)]
    with tempfile.TemporaryDirectory(prefix="bench-build-ext-") as work:
        if arguments.rounds:
            unchanged(invoke, Path(work), env, arguments.rounds)
        if arguments.clean_rounds:
            warm_clean(invoke, Path(work), env, arguments.clean_rounds, arguments.compiler_cache)


if __name__ == "__main__":
    main()
