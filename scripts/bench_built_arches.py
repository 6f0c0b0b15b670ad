"""Benchmark build-ext's check of the GPU code it built against its floor, side by side in one run.

The project: builder/built_arches.check_built_archs on a folder holding one CUDA library (find it, run
cuobjdump, judge it against a GPU). The floor: the same `cuobjdump --list-elf --list-ptx` run by hand.
The library is built once with CUDA's nvcc from tests/build/fixtures/cuobjdump/kernels.cu (sm_80 cubin and
compute_90 PTX). Target: the check costs at most 10 ms more than the bare cuobjdump: a millisecond-scale
step after a compile of seconds, so the absolute cost is what a user feels (the ratio is printed too).

Usage (from the repo root, CUDA at /usr/local/cuda, cuobjdump from CUDA or `pip install nvidia-cuda-cuobjdump`):
    python scripts/bench_built_arches.py [--rounds 11]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from pytorch_winbuild.builder.built_arches import check_built_archs, find_cuobjdump  # noqa: E402
from pytorch_winbuild.facts.model import Gpu  # noqa: E402

CUDA = "/usr/local/cuda"
SOURCE = REPO_ROOT / "tests" / "build" / "fixtures" / "cuobjdump" / "kernels.cu"
TARGET_MS = 10.0


def _median_seconds(run, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    rounds = parser.parse_args().rounds
    cuobjdump = find_cuobjdump(CUDA)
    if cuobjdump is None:
        print("cuobjdump not found: pip install nvidia-cuda-cuobjdump", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        library = Path(folder) / "libkernels.so"
        gencode = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=compute_90"]
        subprocess.run(
            [f"{CUDA}/bin/nvcc", "-shared", "-Xcompiler", "-fPIC", *gencode, str(SOURCE), "-o", str(library)],
            check=True,
        )
        gpus = [Gpu(index=0, name="NVIDIA H100 80GB HBM3", compute_capability="9.0")]
        ours = _median_seconds(lambda: check_built_archs(Path(folder), gpus, CUDA, "linux"), rounds)
        floor = _median_seconds(
            lambda: subprocess.run(
                [cuobjdump, "--list-elf", "--list-ptx", str(library)], capture_output=True, check=True
            ),
            rounds,
        )
        print(f"library: {library.name}, {library.stat().st_size} bytes; cuobjdump: {cuobjdump}")
        print(f"build-ext's check (find, cuobjdump, judge)  {ours * 1000:8.1f} ms (median of {rounds})")
        print(f"bare cuobjdump --list-elf --list-ptx       {floor * 1000:8.1f} ms (median of {rounds})")
        extra_ms = (ours - floor) * 1000
        verdict = "met" if extra_ms <= TARGET_MS else "not met"
        print(f"ratio: {ours / floor:.2f}x; extra: {extra_ms:+.1f} ms (target <= {TARGET_MS:g} ms more: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
