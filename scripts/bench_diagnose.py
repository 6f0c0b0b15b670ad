#!/usr/bin/env python3
"""Benchmark `invoke diagnose` on a big build log against its natural floor, `grep -c error`.

Writes a log shaped like a failed PyTorch build under Ninja (compile lines with long command
lines, warnings, CMake chatter), MEGABYTES long, with the first real error near its end, then
runs side by side in alternating rounds:

  floor      grep -c error LOG               (one pass over the file, nothing else)
  diagnose   python -m invoke diagnose LOG   (first error block + every diagnosis rule)

and prints the medians and their ratio, after one warm-up run of each (the log in the page cache,
bytecode written: PYTHONDONTWRITEBYTECODE is dropped, as on a user's machine). Goal (issue 13):
diagnose ≤ 3 × grep. Exits 1 when the goal is missed, or when diagnose does not find the planted
error.

    python scripts/bench_diagnose.py [--megabytes 200] [--rounds 5] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
GOAL = 3.0
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
ERROR = "C:\\pytorch\\aten\\src\\ATen/native/cuda/Loss.cu(42): fatal error C1060: compiler is out of heap space"


def write_log(path: Path, megabytes: int) -> None:
    """A Ninja build log of about `megabytes` MB whose first error is in its last 1 %."""
    rng = random.Random(1234)
    target = megabytes * 1024 * 1024
    sources = [f"aten/src/ATen/native/{name}.cpp" for name in ("Activation", "BinaryOps", "Conv", "Loss", "Sort")]
    written = 0
    with path.open("w", encoding="utf-8", newline="\n") as log:
        log.write("-- The CXX compiler identification is MSVC 19.29.30133.0\n-- Configuring done\n")
        step = 0
        while written < target * 0.99:
            step += 1
            source = rng.choice(sources)
            line = (
                f"[{step}/40000] C:\\PROGRA~2\\MICROS~1\\2019\\BUILDT~1\\VC\\Tools\\MSVC\\1429~1.301\\bin\\Hostx64\\x64"
                f"\\cl.exe /nologo /TP -DUSE_CUDA -DTORCH_API_INCLUDE_EXTENSION_H -IC:\\pytorch\\aten\\src "
                f"-IC:\\pytorch\\build\\aten\\src /MD /O2 /Ob2 /DNDEBUG /w /EHsc /bigobj -std:c++17 "
                f"/showIncludes /Fo{source}.obj /Fd{source}.pdb /FS -c C:\\pytorch\\{source}\n"
            )
            if step % 50 == 0:
                line += f"C:\\pytorch\\{source}(120): warning C4267: 'argument': conversion from 'size_t' to 'int'\n"
            log.write(line)
            written += len(line)
        log.write(f"FAILED: caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/Loss.cu.obj\n{ERROR}\n")
        while written < target:
            line = f"[{step}/40000] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/x{written}.cpp.obj\n"
            log.write(line)
            written += len(line)
        log.write("ninja: build stopped: subcommand failed.\n")


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, encoding="utf-8", check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):  # grep -c exits 1 on no match
        sys.exit(f"{command[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "pytorch-winbuild-bench")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    log = args.workdir / f"build-{args.megabytes}mb.log"
    if not log.is_file():
        write_log(log, args.megabytes)
    print(f"log: {log} ({log.stat().st_size / 1e6:.0f} MB)")
    grep, diagnose = ["grep", "-c", "error", str(log)], [sys.executable, "-m", "invoke", "diagnose", str(log)]
    timed(grep), timed(diagnose)  # warm-up
    floor, ours = [], []
    for _ in range(args.rounds):
        seconds, _ = timed(grep)
        floor.append(seconds)
        seconds, output = timed(diagnose)
        ours.append(seconds)
        if "C1060" not in output:
            sys.exit(f"diagnose did not report the planted error:\n{output[-2000:]}")
    ratio = statistics.median(ours) / statistics.median(floor)
    print(f"grep -c error     median {statistics.median(floor):.2f} s  ({', '.join(f'{s:.2f}' for s in floor)})")
    print(f"invoke diagnose   median {statistics.median(ours):.2f} s  ({', '.join(f'{s:.2f}' for s in ours)})")
    print(f"ratio {ratio:.1f}x (goal <= {GOAL:g}x)")
    sys.exit(0 if ratio <= GOAL else 1)


if __name__ == "__main__":
    main()
