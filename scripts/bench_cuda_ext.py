"""Benchmark the compiler cache on a real PyTorch CUDA extension (tests/build/fixtures/cuda_ext).

For each cache, side by side in one run, through `invoke build-ext` exactly as a user runs it:
a cold build (empty cache, fresh copy) against a warm one (`--clean`: build folder removed, cache
full). nvcc reaches the cache through $PYTORCH_NVCC (pytorch_winbuild/builder/compiler_cache.py),
the .cpp file through $CXX. Target: warm at least 10x faster than cold.

Needs a CUDA build of torch in the interpreter that runs this script (e.g. torch==2.14.1, CUDA
13.0) and the toolkit's nvcc. No GPU: nothing is run, only compiled. When the toolkit is the
minimal one that comes with nvcc alone, the headers and libraries of the pip CUDA wheels
(<site-packages>/nvidia/cu<major>) fill in, through CPATH and LIBRARY_PATH.

Usage (from the repo root):  python scripts/bench_cuda_ext.py [--caches sccache ccache] [--arch-list 9.0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE = REPO_ROOT / "tests" / "build" / "fixtures" / "cuda_ext"
SPEEDUP_TARGET = 10.0


def timed(command: list[str], env: dict[str, str]) -> float:
    """Wall-clock seconds of one run; a failed run stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(
            f"`{' '.join(command)}` failed with exit status {done.returncode}:\n"
            f"{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    return seconds


def last_report(log_dir: Path) -> dict[str, Any]:
    return json.loads(sorted(log_dir.glob("*.json"))[-1].read_text(encoding="utf-8"))


def free_port() -> int:
    """A port of its own for this run's sccache server, so no other server on the machine is reused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cuda_wheel_env(cuda_major: str) -> dict[str, str]:
    """CPATH/LIBRARY_PATH for the pip CUDA wheels' headers and libraries, when they are installed."""
    wheels = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / f"cu{cuda_major}"
    if not wheels.is_dir():
        return {}
    return {
        name: os.pathsep.join(filter(None, [str(wheels / folder), os.environ.get(name)]))
        for name, folder in (("CPATH", "include"), ("LIBRARY_PATH", "lib"))
    }


def describe_cache(report: dict[str, Any]) -> str:
    """The report's summary, plus sccache's counts per kind (it also counts nvcc's inner steps)."""
    cache = report["cache"]
    raw = cache.get("raw") or {}
    if cache.get("name") != "sccache" or "stats" not in raw:
        return cache["summary"]
    hits, misses = raw["stats"]["cache_hits"]["counts"], raw["stats"]["cache_misses"]["counts"]
    kinds = sorted(set(hits) | set(misses))
    return f"{cache['summary']}; per kind hit/miss: " + ", ".join(
        f"{kind} {hits.get(kind, 0)}/{misses.get(kind, 0)}" for kind in kinds
    )


def bench(cache: str, cuda: str, arch_list: str, env: dict[str, str]) -> float:
    """Cold then warm build-ext of the fixture through one cache; the speed-up."""
    with tempfile.TemporaryDirectory(prefix="pytorch-winbuild-bench-cuda-") as folder:
        work = Path(folder)
        source = work / "cuda_ext"
        shutil.copytree(FIXTURE, source)
        cache_dir = work / "cache"
        invoke = [
            sys.executable,
            "-m",
            "invoke",
            "--search-root",
            str(REPO_ROOT),
            "build-ext",
            str(source),
            "--cuda",
            cuda,
            "--arch-list",
            arch_list,
            "--compiler-cache",
            cache,
            "--cache-dir",
            str(cache_dir),
        ]
        cold = timed(invoke, env)
        report = last_report(cache_dir / "logs")
        print(f"{cache}: cold build (empty cache)          {cold:8.2f} s   ({describe_cache(report)})", flush=True)
        print(
            "        " + next(note for note in report["notes"] if note.startswith("Compiler cache for the extension")),
            flush=True,
        )
        warm = timed([*invoke, "--clean"], env)
        print(
            f"{cache}: warm build (--clean, cache full)  {warm:8.2f} s   "
            f"({describe_cache(last_report(cache_dir / 'logs'))})",
            flush=True,
        )
    speedup = cold / warm
    print(
        f"{cache}: warm is {speedup:.1f}x faster than cold (target >= {SPEEDUP_TARGET:.0f}x: "
        f"{'met' if speedup >= SPEEDUP_TARGET else 'MISSED'})",
        flush=True,
    )
    return speedup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--caches",
        nargs="+",
        default=["sccache", "ccache"],
        choices=["sccache", "ccache"],
        help="the caches to compare (default: both)",
    )
    parser.add_argument(
        "--arch-list", default="9.0", help="TORCH_CUDA_ARCH_LIST: one GPU keeps the builds short (default 9.0)"
    )
    options = parser.parse_args()

    import torch  # the CUDA version the extension is built for is the one torch was built with

    if torch.version.cuda is None:
        sys.exit(
            f"torch {torch.__version__} is a CPU build: install a CUDA build (e.g. torch==2.14.1) to "
            "benchmark a CUDA extension."
        )
    cuda = ".".join(torch.version.cuda.split(".")[:2])
    env = {
        **os.environ,
        "PYTHONIOENCODING": "utf-8",
        "SCCACHE_SERVER_PORT": str(free_port()),
        **cuda_wheel_env(cuda.split(".")[0]),
    }
    print(
        f"extension: {FIXTURE.relative_to(REPO_ROOT)} (one .cu kernel + one .cpp binding, both including "
        f"torch/extension.h); torch {torch.__version__}, CUDA {cuda}, arch {options.arch_list}, "
        f"{os.cpu_count()} CPUs",
        flush=True,
    )
    for cache in options.caches:
        bench(cache, cuda, options.arch_list, env)


if __name__ == "__main__":
    main()
