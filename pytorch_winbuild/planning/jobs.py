"""How many compiles run at once: MAX_JOBS = min(cores, available memory / memory per job).

Without MAX_JOBS PyTorch's build starts one compile per core, and a CUDA build on a machine with
many cores and little memory dies with C1060 / "cicc died" or swaps for hours. The memory a job
takes comes from build_config/resources.toml (cited figures; C++ vs CUDA, the era, the number of
architectures), or from a measurement of this machine's earlier builds when there is one.
Pure: no psutil here; the facts carry the memory the probe saw.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.knowledge.resources import Resources

MIB_PER_GIB = 1024


@dataclass(frozen=True)
class JobMemory:
    """The memory one compile job is expected to take, and what the figure rests on."""

    gib: float
    what: str  # "CUDA job (2 architectures)"
    source: str
    estimate: bool


@dataclass(frozen=True)
class JobsDecision:
    jobs: int | None  # None: leave MAX_JOBS to PyTorch (one job per core)
    reason: str  # for the MAX_JOBS change, or the decision when it is not set
    warning: str | None = None
    source: str = ""  # where the memory-per-job figure comes from, for the plan's decisions


@dataclass(frozen=True)
class JobConfiguration:
    """What sizes one compile job: the key under which earlier runs' measured peaks are recorded
    (builder/memory_record.py), decided by the plan (era, CUDA, architectures, toolset)."""

    era: str
    cuda: str | None  # None: a CPU build
    archs: int
    msvc: str | None  # the toolset's short version on Windows

    def key(self, kind: str) -> str:
        """ "build, era 2.9+, CUDA 12.4, 2 architectures, MSVC 14.44" for task `kind` (build, build-ext)."""
        parts = [kind, f"era {self.era}"]
        if self.cuda is not None:
            parts += [f"CUDA {self.cuda}", f"{self.archs} architecture{'s' if self.archs != 1 else ''}"]
        else:
            parts.append("CPU")
        if self.msvc is not None:
            parts.append(f"MSVC {self.msvc}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Measured:
    """The figure for the plan from the record of earlier runs, or why there is none."""

    gib: float | None = None  # memory per compile job, margin included
    note: str | None = None  # for the plan's decisions: the figure and where it comes from
    warning: str | None = None  # the record could not be read


# The caller's look-up of measured figures (builder/memory_record.py measured_jobs): an input of the plan, asked
# once the plan has decided the configuration, so a plan is made once.
MeasuredJobs = Callable[[JobConfiguration], Measured]


def arch_count(arch_list: str | None) -> int:
    """Entries of a TORCH_CUDA_ARCH_LIST ("7.5;8.6+PTX" → 2); 1 when the plan leaves it to PyTorch."""
    if not arch_list:
        return 1
    return max(1, len([entry for entry in arch_list.replace(";", " ").split() if entry]))


def job_memory(
    resources: Resources, era_name: str, cuda: bool, archs: int, measured_gib: float | None = None
) -> JobMemory:
    """Memory per compile job for this configuration."""
    if measured_gib is not None:
        return JobMemory(
            measured_gib,
            "job (measured)",
            "the peak compiler memory recorded by an earlier build of this configuration on this machine",
            estimate=False,
        )
    if not cuda:
        figure = resources.cpp_job
        return JobMemory(figure.gib, "C++ job", figure.source, figure.estimate)
    flash = era_name in resources.flash_eras
    base = resources.cuda_job_flash if flash else resources.cuda_job
    extra = resources.cuda_extra_arch
    gib = base.gib + extra.gib * (archs - 1)
    what = f"CUDA job ({archs} architecture{'s' if archs != 1 else ''}"
    what += ", FlashAttention kernels)" if flash else ")"
    source = base.source + (f"; + {extra.gib:g} GiB per further architecture ({extra.source})" if archs > 1 else "")
    return JobMemory(gib, what, source, base.estimate or (archs > 1 and extra.estimate))


def _gib(mib: int) -> str:
    return f"{mib / MIB_PER_GIB:.1f} GiB"


def default_jobs(facts: Facts, memory: JobMemory) -> JobsDecision:
    """MAX_JOBS from the facts' available memory and cores; no figure → PyTorch's default, said so."""
    if facts.memory_available_mib is None:
        return JobsDecision(
            None,
            "MAX_JOBS: not set: the facts do not record the machine's memory (written before schema 3), so "
            "PyTorch starts one compile per core; pass --jobs N if the build runs out of memory (about "
            f"{memory.gib:g} GiB per {memory.what}).",
        )
    available_gib = facts.memory_available_mib / MIB_PER_GIB
    by_memory = math.floor(available_gib / memory.gib)
    cores = facts.cpu_count
    jobs = max(1, min(by_memory, cores) if cores else by_memory)
    kind = "estimate" if memory.estimate else "figure"
    reason = (
        f"{_gib(facts.memory_available_mib)} available / {memory.gib:g} GiB per {memory.what} → {jobs} "
        f"job{'s' if jobs != 1 else ''} (cores: {cores if cores else 'unknown'})"
    )
    warning = None
    if by_memory < 1:
        warning = (
            f"Only {_gib(facts.memory_available_mib)} of memory was available, less than one {memory.what} "
            f"needs (about {memory.gib:g} GiB): even one compile at a time may swap or fail with C1060/'cicc "
            "died'. Close other programs, or add memory or page file."
        )
    return JobsDecision(jobs, reason, warning, f"{kind}: {memory.source}")
