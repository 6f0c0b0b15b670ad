"""Measured compiler memory, reused: the record of peaks per machine and configuration, the next plan
sizing MAX_JOBS with it, a broken record ignored with a warning, the low-memory watch with a floor
given as data, and the out-of-memory advice.

The sampler against real compiles is in tests/build/test_memory_watch.py (build tier: g++)."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import sys
from pathlib import Path

import psutil
import pytest
from invoke import Config, Context
from support import HOSTS_DIR, plan_options, run_invoke

from pytorch_winbuild.builder.memory_record import (
    PeakBook,
    configuration_key,
    facts_machine,
    job_configuration,
    measured_jobs,
    memory_diagnosis,
    this_machine,
)
from pytorch_winbuild.builder.memory_watch import Job, LowMemory, MemorySummary, MemoryWatch, Sample, process_name
from pytorch_winbuild.builder.pipeline import stream_command
from pytorch_winbuild.builder.progress import ProgressDisplay
from pytorch_winbuild.builder.report import BuildRecord, run_paths, summary
from pytorch_winbuild.builder.settings import load_settings
from pytorch_winbuild.diagnosis.rules import default_rules
from pytorch_winbuild.faces.flags import WINBUILD_DEFAULTS, cache_choice
from pytorch_winbuild.faces.plan_request import plan_from_flags
from pytorch_winbuild.facts.model import Facts, load_facts
from pytorch_winbuild.facts.probe import probe
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.knowledge.resources import WatchSettings
from pytorch_winbuild.nightly.entry import RunContext, entry_request
from pytorch_winbuild.nightly.matrix import load_matrix
from pytorch_winbuild.nightly.state import NightlyState
from pytorch_winbuild.paths import peaks_file
from pytorch_winbuild.planning.jobs import Measured
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.request import PlanRequest

KNOWLEDGE = load_knowledge()
WATCH = KNOWLEDGE.resources.watch
CPU_HOST = "cpu-only"  # 16 cores, 32607 MiB total, 21890 MiB available


def _facts(name: str = CPU_HOST) -> Facts:
    return load_facts(HOSTS_DIR / f"{name}.json")


def _plan(facts: Facts, record: Path | None = None, **options: object) -> Plan:
    """The plan `invoke build` makes, with the cache folder `record` holding the measured peaks it looks up."""
    return make_plan(
        PlanRequest(
            plan_options(cuda="cpu", pytorch_version="2.13.0", **options),
            measured_jobs=measured_jobs("build", facts, record, WATCH) if record else None,
        ),
        facts,
        KNOWLEDGE,
    )


def measured_job(plan: Plan, kind: str, facts: Facts, cache: Path, watch: WatchSettings) -> Measured:
    """The figure the record holds for the configuration `plan` decided."""
    return measured_jobs(kind, facts, cache, watch)(job_configuration(plan))


def _summary(peak_job_mib: int, *, jobs: int = 4, available_start_mib: int = 20000, **changes: object) -> MemorySummary:
    base = MemorySummary(
        samples=100,
        total_mib=32607,
        floor_mib=3260,
        available_start_mib=available_start_mib,
        available_min_mib=available_start_mib - jobs * peak_job_mib,
        peak_job_mib=peak_job_mib,
        peak_job=("g++", "cc1plus"),
        peak_process=("cc1plus", peak_job_mib - 10),
        peak_jobs=jobs,
        peak_tree_mib=jobs * peak_job_mib + 300,
        compilers={"cc1plus": 40, "g++": 40},
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _book(cache: Path, facts: Facts, plan: Plan, kind: str = "build") -> PeakBook:
    return PeakBook(peaks_file(cache), facts_machine(facts), configuration_key(plan, kind), WATCH)


def _max_jobs_decision(plan: Plan) -> str:
    return next(decision for decision in plan.decisions if decision.startswith("MAX_JOBS"))


# ---------------------------------------------------------------- record → next plan


def test_a_recorded_peak_sizes_the_next_plan_and_the_plan_says_so(tmp_path: Path) -> None:
    facts = _facts()
    cited = _plan(facts)
    assert "per C++ job" in _max_jobs_decision(cited)
    assert _book(tmp_path, facts, cited).remember(_summary(3000), result="success", max_jobs="10") is None

    measured = measured_job(cited, "build", facts, tmp_path, WATCH)
    per_job = 3000 * (1 + WATCH.margin) / 1024
    assert measured.gib == round(per_job, 2) and measured.warning is None
    assert measured.note is not None and "g++ + cc1plus" in measured.note and str(peaks_file(tmp_path)) in measured.note
    plan = _plan(facts, tmp_path)
    expected = min(facts.cpu_count or 0, math.floor(facts.memory_available_mib / 1024 / measured.gib))  # type: ignore[operator]
    assert plan.final_env()["MAX_JOBS"] == str(expected) != cited.final_env()["MAX_JOBS"]
    assert f"/ {measured.gib:g} GiB per job (measured) → {expected} jobs" in _max_jobs_decision(plan)
    assert measured.note in plan.decisions  # which figure, and why: the run, the margin, the file
    # --jobs still wins
    assert _plan(facts, tmp_path, jobs=3).final_env()["MAX_JOBS"] == "3"


def test_the_nightly_sizes_max_jobs_from_the_record_as_invoke_build_does(tmp_path: Path) -> None:
    """Both edges build their request with planning/request.py's build_request: a nightly entry's plan (which
    ignored the record before issue 37) and `invoke build`'s plan of the same tree read the same recorded peak.
    The machine is cpu-only.json as a Linux one: a record is read only for plans of the machine that runs."""
    host = tmp_path / "linux.json"
    data = json.loads((HOSTS_DIR / f"{CPU_HOST}.json").read_text(encoding="utf-8"))
    host.write_text(json.dumps({**data, "os": "linux", "visual_studio": []}), encoding="utf-8")
    facts, cache = load_facts(host), tmp_path / "cache"
    cited = _plan(facts)
    assert _book(cache, facts, cited).remember(_summary(3000), result="success", max_jobs="10") is None
    source = tmp_path / "src"
    (source / "torch").mkdir(parents=True)
    (source / "setup.py").write_text("from setuptools import setup\nsetup(name='torch')\n", encoding="utf-8")
    (source / "version.txt").write_text("2.13.0\n", encoding="utf-8")
    matrix_file = tmp_path / "matrix.toml"
    matrix_file.write_text(
        f"[settings]\noutput_dir = {json.dumps(str(tmp_path / 'out'))}\nkeep_days = 14\nmin_free_gb = 1\n\n"
        '[[entry]]\nname = "cpu"\nrepo = "https://github.com/pytorch/pytorch.git"\nref = "v2.13.0"\ncuda = "cpu"\n',
        encoding="utf-8",
    )
    matrix = load_matrix(matrix_file, KNOWLEDGE)
    context = RunContext(
        matrix, facts, KNOWLEDGE, cache, tmp_path / "out" / "d", "d", NightlyState(tmp_path / "out"), False, None, ""
    )
    request, entry_facts = entry_request(matrix.entries[0], context, source)
    nightly = make_plan(request, entry_facts, KNOWLEDGE)
    invoke_context = Context(Config(defaults={"winbuild": WINBUILD_DEFAULTS}))
    build = plan_from_flags(
        invoke_context,
        host=str(host),
        source=str(source),
        cache=cache_choice(invoke_context, str(cache)),
        arguments={"cuda": "cpu"},
        measured_for="build",
    )
    measured = measured_job(cited, "build", facts, cache, WATCH)
    expected = min(facts.cpu_count or 0, math.floor(facts.memory_available_mib / 1024 / measured.gib))  # type: ignore[operator]
    assert nightly.final_env()["MAX_JOBS"] == build.final_env()["MAX_JOBS"] == str(expected)
    assert str(expected) != cited.final_env()["MAX_JOBS"]
    assert measured.note in nightly.decisions and measured.note in build.decisions


def test_a_tiny_recorded_job_still_plans(tmp_path: Path) -> None:
    """A compile of a few MiB (mini torch's) rounded to 0.00 GiB, and the next plan divided by it
    (CI run of 2026-11-24: ZeroDivisionError, exit 70). The figure stays a positive 0.01 GiB."""
    facts = _facts()
    cited = _plan(facts)
    assert _book(tmp_path, facts, cited).remember(_summary(3), result="success", max_jobs="2") is None
    measured = measured_job(cited, "build", facts, tmp_path, WATCH)
    assert measured.gib == 0.01
    plan = _plan(facts, tmp_path)
    assert plan.final_env()["MAX_JOBS"] == str(facts.cpu_count)  # bound by the cores, not the memory


def test_a_summary_is_written_with_every_field_in_order_and_json_values_only() -> None:
    episode = LowMemory("2025-01-02T03:04:05+00:00", 12.5, 900, 3)
    data = _summary(1000, low_memory=(episode,)).to_dict()
    assert list(data) == [field.name for field in dataclasses.fields(MemorySummary)]
    assert json.loads(json.dumps(data)) == data  # lists, never tuples: what the report reads back is the same
    assert data["peak_job"] == ["g++", "cc1plus"] and data["peak_process"] == {"name": "cc1plus", "rss_mib": 990}
    assert data["low_memory"] == [dataclasses.asdict(episode)]


def test_the_figure_is_the_largest_of_the_last_runs_of_that_machine_and_configuration(tmp_path: Path) -> None:
    facts = _facts()
    plan = _plan(facts)
    book = _book(tmp_path, facts, plan)
    for peak in [5000, *range(1000, 1000 + 10 * 10, 10)]:  # 11 runs: the 5000 MiB one falls out
        book.remember(_summary(peak), result="success", max_jobs="10")
    runs, _ = book.runs()
    assert len(runs) == WATCH.keep_runs and max(run["peak_job_mib"] for run in runs) == 1090
    assert book.figure().gib == round(1090 * (1 + WATCH.margin) / 1024, 2)
    # another machine (other cores and memory), or another configuration, has no figure
    assert measured_job(plan, "build", _facts("vs2017-cuda90-cuda100"), tmp_path, WATCH).gib is None
    assert measured_job(plan, "build-ext", facts, tmp_path, WATCH).gib is None
    # a run that ran no compiler (a no-op rebuild) is not recorded
    book.remember(_summary(0, jobs=0, peak_process=None), result="success", max_jobs="10")
    assert len(book.runs()[0]) == WATCH.keep_runs
    data = json.loads(peaks_file(tmp_path).read_text(encoding="utf-8"))
    assert list(data["machines"]) == ["windows, 16 cores, 32 GiB"]
    assert list(data["machines"]["windows, 16 cores, 32 GiB"]) == ["build, era 2.9+, CPU, MSVC 14.44"]


@pytest.mark.parametrize(
    ("content", "replaced"),
    [
        ("{not json", True),
        ('["a list"]', True),
        ('{"format": 1, "machines": {"m": {"c": [{"peak_job_mib": "big"}]}}}', True),
        ('{"format": 99, "machines": {}}', False),
    ],
)
def test_a_corrupt_or_foreign_record_is_ignored_with_a_warning(tmp_path: Path, content: str, replaced: bool) -> None:
    facts = _facts()
    cited = _plan(facts)
    file = peaks_file(tmp_path)
    file.parent.mkdir(parents=True)
    file.write_text(content, encoding="utf-8")
    measured = measured_job(cited, "build", facts, tmp_path, WATCH)
    assert measured.gib is None and measured.note is None
    assert measured.warning is not None and f"{file} is ignored" in measured.warning
    assert "per C++ job" in _max_jobs_decision(_plan(facts, tmp_path))  # the cited figure
    warning = _book(tmp_path, facts, cited).remember(_summary(2000), result="success", max_jobs="8")
    if replaced:  # the next build writes a new record over the broken one
        assert warning is None and measured_job(cited, "build", facts, tmp_path, WATCH).gib is not None
    else:  # another version's record is left as it is
        assert warning is not None and file.read_text(encoding="utf-8") == content
    assert not list(file.parent.glob("*.tmp"))


def test_build_dry_run_on_this_machine_uses_the_record_of_the_cache(tmp_path: Path) -> None:
    """The faces' path: `invoke build --dry-run` reads <cache>/memory/peaks.json for this machine."""
    facts = probe()
    plan = _plan(facts)
    PeakBook(peaks_file(tmp_path), this_machine(facts.os), configuration_key(plan, "build"), WATCH).remember(
        _summary(1500), result="success", max_jobs="2"
    )
    dry_run = ("build", "--dry-run", "--cuda", "cpu", "--pytorch-version", "2.13.0", "--cache-dir", str(tmp_path))
    done = run_invoke(*dry_run)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "GiB per job (measured)" in text and "Memory per compile job: 1.76 GiB, measured on this machine" in text
    file = peaks_file(tmp_path)
    file.write_text("{broken", encoding="utf-8")
    done = run_invoke(*dry_run)
    assert done.returncode == 0 and "per C++ job" in " ".join(done.stdout.split())
    assert "is ignored: it cannot be read as JSON" in " ".join(done.stdout.split())


# ---------------------------------------------------------------- low memory


def test_low_memory_is_said_once_in_the_progress_and_kept_in_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A floor of the whole memory is always above what is available: the real machine, no mock."""
    total_mib = psutil.virtual_memory().total // (1024 * 1024)
    watch = dataclasses.replace(
        WATCH, interval_seconds=0.05, low_memory_fraction=1.0, low_memory_recover=1.0, cache_servers=frozenset()
    )
    log, report = run_paths(tmp_path, "build-ext", "low")
    record = BuildRecord("build-ext", log, report)
    # a second between lines: on a loaded 2-core machine the 0.05 s sampler still gets in before the last one
    program = "import time\nfor n in (1, 2):\n    print(f'[{n}/2] step', flush=True)\n    time.sleep(1.0)\n"
    code = stream_command(record, [sys.executable, "-c", program], tmp_path, {}, load_settings(), watch)
    assert code == 0
    out = capsys.readouterr().out
    assert out.count("-- LOW MEMORY:") == 1, out  # once per episode, though every sample is under the floor
    assert f"under the floor of {total_mib / 1024:.1f} GiB (100% of" in out
    assert "-- progress: 2/2 (100%)" in out and out.rstrip().endswith(", LOW MEMORY")
    assert record.memory is not None and record.memory.samples >= 5
    data = json.loads(record.write().read_text(encoding="utf-8"))["memory"]
    (episode,) = data["low_memory"]
    assert episode["seconds"] is None and 0 < episode["lowest_mib"] < total_mib and episode["jobs"] == 0
    assert data["floor_mib"] == total_mib and data["peak_jobs"] == 0
    text = summary(record)
    assert "LOW MEMORY 1×" in text and "GiB available at the lowest, with 0 compile jobs running, until the end" in text


def test_an_episode_ends_over_the_recovery_level_and_a_new_one_is_said_again() -> None:
    told: list[str | None] = []
    watch = MemoryWatch(WATCH, told.append)
    floor, recover = watch.floor_mib, int(watch.total_mib * WATCH.low_memory_recover)
    job = Job(("g++", "cc1plus"), 900.0, ("cc1plus", 880.0))
    for available in [floor * 3, floor - 10, floor - 500, floor + 10, recover - 1, floor - 20, recover + 1, floor - 1]:
        watch.observe(Sample((job, job), 2000.0, frozenset({(1, "g++"), (2, "cc1plus")})), available)
    result = watch.stop()
    assert [text is not None for text in told] == [True, False, True]  # start, end, start: no repeats meanwhile
    assert [episode.lowest_mib for episode in result.low_memory] == [floor - 500, floor - 1]
    assert result.low_memory[0].seconds is not None and result.low_memory[1].seconds is None
    assert (result.peak_jobs, result.peak_job_mib, result.peak_process) == (2, 900, ("cc1plus", 880))
    assert result.available_min_mib == floor - 500 and result.compilers == {"cc1plus": 1, "g++": 1}


def test_the_bar_says_low_memory_while_the_episode_lasts() -> None:
    out = io.StringIO()
    display = ProgressDisplay(load_settings().progress, out, interactive=True)
    display.line("[1/3] Building CXX object a.o")
    display.memory("LOW MEMORY: 1.0 GiB available, under the floor")
    display.line("[2/3] Building CXX object b.o")
    display.memory(None)
    display.line("[3/3] Linking CXX shared library c.so")
    display.close()
    text = out.getvalue()
    assert text.count("-- LOW MEMORY: 1.0 GiB available") == 1
    assert "\rLOW MEMORY:  33%" in text  # the bar's label from the episode's start
    assert text.rstrip().split("\r")[-1].startswith("100%")  # and no more once it has ended


def test_process_names_as_the_lists_have_them() -> None:
    assert [process_name(n) for n in ("CL.EXE", "g++-12", "clang-17", "cudafe++", "cc1plus")] == [
        "cl",
        "g++",
        "clang",
        "cudafe++",
        "cc1plus",
    ]


# ---------------------------------------------------------------- out of memory


def test_out_of_memory_advice_names_the_max_jobs_that_would_have_fitted() -> None:
    # 8 jobs of 3 GiB (3.6 with the margin) started with 20 GiB available: 5 would have fitted
    oom = _summary(3072, jobs=8, available_start_mib=20480)
    text = memory_diagnosis(oom, ["out-of-memory"], WATCH, 3072 * (1 + WATCH.margin) / 1024)
    assert text is not None and "[out-of-memory]" in text
    assert "MAX_JOBS 5 would have fitted: run it again with --jobs 5" in text
    # the OS killed a compiler and left nothing in the log: the kill count and the floor are the evidence
    killed = dataclasses.replace(oom, oom_kills=1, low_memory=(LowMemory("2025-01-01T00:00:00+00:00", 30.0, 200, 8),))
    text = memory_diagnosis(killed, [], WATCH, 3.6)
    assert text is not None and "the OS killed 1 process(es)" in text and "fell to 0.2 GiB" in text
    # the measured jobs fitted: something else took the memory
    fitted = memory_diagnosis(_summary(512, jobs=4), ["compiler-out-of-heap"], WATCH, 0.6)
    assert fitted is not None and "something else took the memory" in fitted and "--jobs 3." in fitted
    # nothing points at memory: no advice
    assert memory_diagnosis(_summary(512), ["cmake-too-old"], WATCH, 0.6) is None


def test_the_oom_rules_are_rules_of_the_diagnosis() -> None:
    ids = {rule.id for rule in default_rules()}
    assert set(WATCH.oom_rules) <= ids and "out-of-memory" in WATCH.oom_rules
