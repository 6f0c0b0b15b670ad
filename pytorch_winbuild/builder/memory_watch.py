"""Watch a build's memory while it runs: the peak memory of its compile jobs, and low memory.

A background thread samples the process tree (psutil; build_config/resources.toml [watch]). A compile job is the tree
under a compiler with no compiler above it; its memory, the sum of the tree's RSS, is an upper bound: the safe side
for MAX_JOBS. The figures go to the report and memory_record.py; an error ends the sampling, never the build.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil

from pytorch_winbuild.json_file import JsonObject
from pytorch_winbuild.knowledge.resources import WatchSettings

MIB = 1024 * 1024
_VERSION_SUFFIX = re.compile(r"-\d+(?:\.\d+)*$")  # g++-12, clang-17
_VMSTAT = Path("/proc/vmstat")


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def process_name(name: str) -> str:
    """A process name as the [watch] lists have it: lower case, no .exe, no version suffix."""
    name = name.lower().removesuffix(".exe")
    return _VERSION_SUFFIX.sub("", name)


def is_compiler(name: str, compilers: frozenset[str]) -> bool:
    """`name` (already through process_name) is a compiler; x86_64-linux-gnu-g++ is g++."""
    return name in compilers or name.rsplit("-", 1)[-1] in compilers


def oom_kills() -> int | None:
    """Processes the Linux kernel has killed for memory since boot (/proc/vmstat oom_kill, Linux
    4.13+, readable by anyone); None elsewhere. Its growth during a build is "the OS killed a
    compiler": a kill leaves at most "Killed signal terminated program" in the log, often nothing."""
    try:
        for line in _VMSTAT.read_text(encoding="ascii").splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


@dataclass(frozen=True)
class Job:
    """One compile job in one sample."""

    names: tuple[str, ...]  # its processes' names, the compiler at its top first
    rss_mib: float
    biggest: tuple[str, float]  # its largest compiler process: (name, MiB)


@dataclass(frozen=True)
class Sample:
    jobs: tuple[Job, ...]
    tree_mib: float  # the build's whole tree (and the compiler trees under a cache server)
    compilers: frozenset[tuple[int, str]]  # (pid, name) of the compiler processes seen


def _process_table() -> dict[int, tuple[int | None, str, psutil.Process]]:
    """Every process: pid → (parent pid, name, the process). One pass over the process list."""
    table: dict[int, tuple[int | None, str, psutil.Process]] = {}
    for process in psutil.process_iter(["ppid", "name"]):  # skips processes that vanish meanwhile
        info = process.info
        table[process.pid] = (info.get("ppid"), process_name(info.get("name") or ""), process)
    return table


def _descendants(roots: Iterable[int], children: dict[int, list[int]]) -> list[int]:
    """The roots and everything under them (once each: a process list read while PIDs are reused
    can hold a loop)."""
    found: dict[int, None] = {}
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid not in found:
            found[pid] = None
            stack.extend(children.get(pid, ()))
    return list(found)


def _rss_mib(process: psutil.Process) -> float:
    try:
        return process.memory_info().rss / MIB
    except psutil.Error:  # gone (NoSuchProcess, ZombieProcess) or not ours to read (AccessDenied)
        return 0.0


def _under_a_compiler(
    pid: int,
    table: dict[int, tuple[int | None, str, psutil.Process]],
    compilers: set[int],
    members: Collection[int],
) -> bool:
    """Whether a compiler is among the ancestors of `pid` inside the watched trees (a wrapper script
    named like its compiler that does not exec it is the top of the job, not a job of its own)."""
    parent, seen = table[pid][0], {pid}
    while parent is not None and parent in members and parent not in seen:
        if parent in compilers:
            return True
        seen.add(parent)
        parent = table[parent][0]
    return False


def sample_tree(root: int, settings: WatchSettings) -> Sample:
    """The compile jobs under `root` (and under any running cache server) now."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        if parent is not None and parent != pid:
            children.setdefault(parent, []).append(pid)
    tree = _descendants([root], children) if root in table else []
    inside = set(tree)
    served = [
        child
        for pid, (_, name, _) in table.items()
        if name in settings.cache_servers and pid not in inside
        for child in children.get(pid, ())
    ]
    members = tree + [pid for pid in _descendants(served, children) if pid not in inside]
    rss = {pid: _rss_mib(table[pid][2]) for pid in members}
    compilers = {pid for pid in members if is_compiler(table[pid][1], settings.compilers)}
    jobs = []
    for pid in compilers:
        if _under_a_compiler(pid, table, compilers, rss.keys()):
            continue  # part of the job of the compiler above it
        job = [member for member in _descendants([pid], children) if member in rss]
        biggest = max((member for member in job if member in compilers), key=lambda member: rss[member])
        jobs.append(
            Job(
                names=(table[pid][1], *sorted({table[member][1] for member in job} - {table[pid][1]})),
                rss_mib=sum(rss[member] for member in job),
                biggest=(table[biggest][1], rss[biggest]),
            )
        )
    return Sample(tuple(jobs), sum(rss.values()), frozenset((pid, table[pid][1]) for pid in compilers))


@dataclass
class LowMemory:
    """One episode of available memory under the floor."""

    started: str  # UTC time
    after_seconds: float  # into the command
    lowest_mib: int
    jobs: int  # compile jobs running when available memory was lowest
    seconds: float | None = None  # how long it lasted; None: still low when the command ended

    def to_dict(self) -> JsonObject:
        return {
            "started": self.started,
            "after_seconds": self.after_seconds,
            "lowest_mib": self.lowest_mib,
            "jobs": self.jobs,
            "seconds": self.seconds,
        }


@dataclass(frozen=True)
class MemorySummary:
    """What the watch saw during one command: for the report and the record of peaks."""

    samples: int
    total_mib: int
    floor_mib: int
    available_start_mib: int | None
    available_min_mib: int | None
    peak_job_mib: int  # the largest compile job (its tree summed)
    peak_job: tuple[str, ...]  # that job's processes, the compiler at its top first
    peak_process: tuple[str, int] | None  # the largest single compiler process: (name, MiB)
    peak_jobs: int  # compile jobs at once
    peak_tree_mib: int
    compilers: dict[str, int]  # compiler process name → how many of them ran
    low_memory: tuple[LowMemory, ...] = ()
    oom_kills: int | None = None  # processes the Linux kernel killed for memory meanwhile; None: unknown
    error: str | None = None  # why sampling stopped early

    def to_dict(self) -> JsonObject:
        """Every field in its order, the largest process as {name, rss_mib}."""
        return {
            "samples": self.samples,
            "total_mib": self.total_mib,
            "floor_mib": self.floor_mib,
            "available_start_mib": self.available_start_mib,
            "available_min_mib": self.available_min_mib,
            "peak_job_mib": self.peak_job_mib,
            "peak_job": list(self.peak_job),
            "peak_process": (
                {"name": self.peak_process[0], "rss_mib": self.peak_process[1]} if self.peak_process else None
            ),
            "peak_jobs": self.peak_jobs,
            "peak_tree_mib": self.peak_tree_mib,
            "compilers": dict(self.compilers),
            "low_memory": [episode.to_dict() for episode in self.low_memory],
            "oom_kills": self.oom_kills,
            "error": self.error,
        }

    def describe(self) -> str:
        """One line for the end-of-run summary."""
        if self.error and not self.samples:
            return f"not watched ({self.error})"
        parts = []
        if self.peak_jobs:
            parts.append(f"largest compile job {_gib(self.peak_job_mib)} ({' + '.join(self.peak_job)})")
            parts.append(f"{self.peak_jobs} job{'s' if self.peak_jobs != 1 else ''} at once")
        else:
            parts.append("no compiler seen")
        if self.available_min_mib is not None:
            parts.append(f"least available {_gib(self.available_min_mib)} of {_gib(self.total_mib)}")
        if self.low_memory:
            parts.append(f"LOW MEMORY {len(self.low_memory)}× (under {_gib(self.floor_mib)})")
        if self.oom_kills:
            parts.append(f"{self.oom_kills} process(es) killed by the OS for memory")
        if self.error:
            parts.append(f"sampling stopped early ({self.error})")
        return " · ".join(parts)


@dataclass
class _Peaks:
    """The running maxima, only touched by the watch's thread until it is joined."""

    samples: int = 0
    available_start: int | None = None
    available_min: int | None = None
    job: Job | None = None
    process: tuple[str, float] | None = None
    jobs: int = 0
    tree: float = 0.0
    compilers: set[tuple[int, str]] = field(default_factory=set)
    episodes: list[LowMemory] = field(default_factory=list)
    low_since: float | None = None  # monotonic time the current episode began


class MemoryWatch:
    """Samples a command's process tree in a background thread, from start(pid) until stop()."""

    def __init__(
        self,
        settings: WatchSettings,
        on_memory: Callable[[str | None], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`on_memory(text)` is told once when available memory falls under the floor and
        `on_memory(None)` once when it is back: the progress display shows it."""
        self.settings = settings
        self._on_memory = on_memory
        self._clock = clock
        total = psutil.virtual_memory().total
        self.total_mib = total // MIB
        self.floor_mib = int(self.total_mib * settings.low_memory_fraction)
        self._recover_mib = int(self.total_mib * settings.low_memory_recover)
        self._peaks = _Peaks()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._root = 0
        self._started = clock()
        self._oom_before: int | None = None
        self._oom_after: int | None = None
        self._error: str | None = None

    def start(self, pid: int) -> None:
        """Watch the tree of process `pid` from now on."""
        self._root, self._started = pid, self._clock()
        self._oom_before = oom_kills()
        self._thread = threading.Thread(target=self._run, name="pytorch-winbuild memory watch", daemon=True)
        self._thread.start()

    def stop(self) -> MemorySummary:
        """End the sampling (waits for the thread) and return what it saw; safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self._oom_after = oom_kills()
        return self.summary()

    def _run(self) -> None:
        try:
            while True:
                self.observe(sample_tree(self._root, self.settings), psutil.virtual_memory().available // MIB)
                if self._stop.wait(self.settings.interval_seconds):
                    return
        except Exception as error:  # the watch must never end the build: stop sampling, say why in the report
            self._error = f"{type(error).__name__}: {error}"

    def observe(self, sample: Sample, available_mib: int) -> None:
        """Take one sample into the peaks and the low-memory episodes (the thread's step; public so
        a test can feed it figures a real machine will not produce on demand)."""
        peaks = self._peaks
        peaks.samples += 1
        if peaks.available_start is None:
            peaks.available_start = available_mib
        if peaks.available_min is None or available_mib < peaks.available_min:
            peaks.available_min = available_mib
        for job in sample.jobs:
            if peaks.job is None or job.rss_mib > peaks.job.rss_mib:
                peaks.job = job
            if peaks.process is None or job.biggest[1] > peaks.process[1]:
                peaks.process = job.biggest
        peaks.jobs = max(peaks.jobs, len(sample.jobs))
        peaks.tree = max(peaks.tree, sample.tree_mib)
        peaks.compilers |= sample.compilers
        self._low_memory(available_mib, len(sample.jobs))

    def _low_memory(self, available_mib: int, jobs: int) -> None:
        """Open an episode under the floor, follow its lowest point, close it over the recovery level."""
        peaks, now = self._peaks, self._clock()
        if peaks.low_since is None:
            if available_mib >= self.floor_mib:
                return
            peaks.low_since = now
            peaks.episodes.append(
                LowMemory(
                    started=datetime.now(UTC).isoformat(timespec="seconds"),
                    after_seconds=round(now - self._started, 1),
                    lowest_mib=available_mib,
                    jobs=jobs,
                )
            )
            self._tell(
                f"LOW MEMORY: {_gib(available_mib)} available, under the floor of {_gib(self.floor_mib)} "
                f"({self.settings.low_memory_fraction:.0%} of {_gib(self.total_mib)}), with {jobs} compile "
                f"job{'s' if jobs != 1 else ''} running; if the build fails for memory, run it again with fewer "
                "(--jobs N) or close other programs."
            )
            return
        episode = peaks.episodes[-1]
        if available_mib < episode.lowest_mib:
            episode.lowest_mib, episode.jobs = available_mib, jobs
        if available_mib >= self._recover_mib:
            episode.seconds = round(now - peaks.low_since, 1)
            peaks.low_since = None
            self._tell(None)

    def _tell(self, text: str | None) -> None:
        if self._on_memory is not None:
            self._on_memory(text)

    def summary(self) -> MemorySummary:
        """What was seen so far (call after stop(), which joins the thread)."""
        peaks = self._peaks
        names: dict[str, int] = {}
        for _, name in peaks.compilers:
            names[name] = names.get(name, 0) + 1
        kills = None
        if self._oom_before is not None and self._oom_after is not None:
            kills = self._oom_after - self._oom_before
        return MemorySummary(
            samples=peaks.samples,
            total_mib=self.total_mib,
            floor_mib=self.floor_mib,
            available_start_mib=peaks.available_start,
            available_min_mib=peaks.available_min,
            peak_job_mib=round(peaks.job.rss_mib) if peaks.job else 0,
            peak_job=peaks.job.names if peaks.job else (),
            peak_process=(peaks.process[0], round(peaks.process[1])) if peaks.process else None,
            peak_jobs=peaks.jobs,
            peak_tree_mib=round(peaks.tree),
            compilers=dict(sorted(names.items())),
            low_memory=tuple(peaks.episodes),
            oom_kills=kills,
            error=self._error,
        )
