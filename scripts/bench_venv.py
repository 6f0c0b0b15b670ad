#!/usr/bin/env python3
"""Benchmark the build venv (issue 26): pytorch-winbuild's ensure_build_venv against doing it by hand.

The floor is what a user types: `<python> -m venv DIR`, then `DIR/bin/python -m pip install` of the same pins
(pip first, then the rest, as the venv's bundled pip may be too old for the pins' wheels). Cold: a new
folder each round, both from the same warm pip cache (so the network is not measured). Warm: a second
call on an unchanged venv (the marker's key matches and its python runs) against the floor's cheapest
check that a venv is usable, `DIR/bin/python -c pass`. Rounds alternate; medians are printed with the
ratios. Goals: cold <= 1.1 x the floor (the tool adds only its checks), warm <= 3 x `python -c pass`.

    python scripts/bench_venv.py [--python /root/.pyenv/versions/3.9.18/bin/python] [--era 1.7-1.10] [--rounds 3]
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

from pytorch_winbuild.builder.build_venv import ensure_build_venv
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.venv_plan import venv_key

FLOOR_PIP = ("-m", "pip", "install", "--disable-pip-version-check")  # as a user types it (pip byte-compiles)
COLD_GOAL = 1.1
WARM_GOAL = 3.0


def floor_cold(python: str, folder: Path, specs: tuple[str, ...]) -> float:
    started = time.perf_counter()
    subprocess.run([python, "-m", "venv", str(folder)], check=True, capture_output=True)
    venv_python = str(folder / "bin" / "python")
    pips = [s for s in specs if s.startswith("pip==")]
    rest = [s for s in specs if s not in pips]
    for group in (pips, rest):
        if group:
            subprocess.run([venv_python, *FLOOR_PIP, *group], check=True, capture_output=True)
    return time.perf_counter() - started


def ours(python: str, version: str, folder: Path, specs: tuple[str, ...]) -> float:
    started = time.perf_counter()
    ensure_build_venv(python, folder, specs, venv_key(python, version, specs), log=lambda line: None)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="/root/.pyenv/versions/3.9.18/bin/python")
    parser.add_argument("--era", default="1.7-1.10")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    version = subprocess.run(
        [args.python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    minor = ".".join(version.split(".")[:2])
    specs = tuple(r.spec for r in load_knowledge().build_requirements.requirements_for(args.era, minor))
    print(f"Python {version}, era {args.era}: {' '.join(specs)}")
    work = Path(tempfile.mkdtemp(prefix="bench-venv-"))
    try:
        floor_cold(args.python, work / "warm-up", specs)  # fills pip's cache for both sides
        cold_floor, cold_ours, warm_floor, warm_ours = [], [], [], []
        for round_number in range(args.rounds):
            cold_floor.append(floor_cold(args.python, work / f"floor-{round_number}", specs))
            ours_folder = work / f"ours-{round_number}"
            cold_ours.append(ours(args.python, version, ours_folder, specs))
            started = time.perf_counter()
            subprocess.run([str(work / f"floor-{round_number}" / "bin" / "python"), "-c", "pass"], check=True)
            warm_floor.append(time.perf_counter() - started)
            warm_ours.append(ours(args.python, version, ours_folder, specs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [
        ("cold: -m venv + pip install (floor)", cold_floor, "cold: ensure_build_venv", cold_ours, COLD_GOAL),
        ("warm: venv python -c pass (floor)", warm_floor, "warm: ensure_build_venv (reused)", warm_ours, WARM_GOAL),
    ]
    missed = False
    for floor_name, floor, our_name, our, goal in rows:
        ratio = statistics.median(our) / statistics.median(floor)
        missed = missed or ratio > goal
        print(f"{floor_name:<40} median {statistics.median(floor):.3f} s")
        print(f"{our_name:<40} median {statistics.median(our):.3f} s")
        print(f"ratio {ratio:.2f}x (goal <= {goal}x)")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
