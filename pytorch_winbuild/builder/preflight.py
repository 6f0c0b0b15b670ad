"""Before a build starts: is there disk for what it writes, and memory for at least one compile?

A full disk or a machine that cannot hold one compile job is found an hour into a build otherwise.
The figures come from build_config/resources.toml. A shortfall against a documented figure (a
compiler cache's size limit, a measured or reported job size) refuses the build with exit 3; one
against an estimate is a warning, because the estimate may be wrong for this build.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.knowledge.model import Knowledge
from pytorch_winbuild.planning.jobs import JobMemory, job_memory
from pytorch_winbuild.planning.plan_model import Plan

GIB = 1024**3


@dataclass(frozen=True)
class DiskNeed:
    what: str  # "build folder of a CUDA build"
    folder: Path  # where it is written (its drive is checked)
    gib: float
    estimate: bool
    source: str


def _existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def folder_size(folder: Path) -> int:
    """Bytes of the files under `folder` (0 when it does not exist); unreadable entries are skipped."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def disk_needs(plan: Plan, knowledge: Knowledge, build_root: Path, cache_dir: Path) -> list[DiskNeed]:
    """What this configuration writes: the build folder (unless one is there to build on) and the
    compiler cache up to its size limit (less what it already holds)."""
    resources = knowledge.resources
    needs = []
    if not (build_root / "build").is_dir():
        figure = resources.build_cuda if plan.cuda else resources.build_cpu
        kind = "a CUDA build" if plan.cuda else "a CPU-only build"
        needs.append(DiskNeed(f"build folder of {kind}", build_root, figure.gib, figure.estimate, figure.source))
    cache = resources.compiler_cache.get(plan.compiler_cache)
    if cache is not None:
        folder = cache_dir / plan.compiler_cache
        left = max(0.0, cache.gib - folder_size(folder) / GIB)
        if left > 0:
            needs.append(
                DiskNeed(
                    f"{plan.compiler_cache} cache (grows to {cache.gib:g} GiB)",
                    folder,
                    left,
                    cache.estimate,
                    cache.source,
                )
            )
    return needs


def checkout_needs(destination: Path, knowledge: Knowledge) -> list[DiskNeed]:
    """A recursive clone of PyTorch, when `destination` is not there yet (a clone that exists is fetched)."""
    if destination.exists():
        return []
    figure = knowledge.resources.checkout
    return [DiskNeed("a recursive clone of PyTorch", destination, figure.gib, figure.estimate, figure.source)]


def check_disk(needs: list[DiskNeed]) -> list[str]:
    """Group the needs by drive and compare with its free space: ToolchainError when the documented
    needs do not fit, a warning when only the estimates do not."""
    drives: dict[int, tuple[Path, list[DiskNeed]]] = {}
    for need in needs:
        anchor = _existing(need.folder)
        drives.setdefault(anchor.stat().st_dev, (anchor, []))[1].append(need)
    warnings = []
    for anchor, group in drives.values():
        free = shutil.disk_usage(anchor).free / GIB
        message = decide_disk(free, group, anchor)
        if message:
            warnings.append(message)
    return warnings


def decide_disk(free_gib: float, needs: list[DiskNeed], where: Path) -> str | None:
    """The decision for one drive with `free_gib` free: raise, warn (returned) or None."""
    documented = sum(need.gib for need in needs if not need.estimate)
    total = sum(need.gib for need in needs)
    parts = "; ".join(
        f"{need.what}: {need.gib:.1f} GiB ({'estimate' if need.estimate else 'documented'}: {need.source})"
        for need in needs
    )
    fix = (
        "free space on that drive (old build folders, `invoke clean --downloads`, the compiler cache), or move "
        "the source, the cache (--cache-dir) or the compiler cache's size limit"
    )
    if free_gib < documented:
        raise ToolchainError(
            f"the drive of {where} has {free_gib:.1f} GiB free, and this build needs at least {documented:.1f} GiB "
            f"there ({parts}).",
            fix=fix + ", then run again.",
        )
    if free_gib < total:
        return (
            f"The drive of {where} has {free_gib:.1f} GiB free; this build may need about {total:.1f} GiB there "
            f"({parts}). If it stops with 'No space left on device' or C1083/LNK1104 write errors: {fix}."
        )
    return None


def decide_memory(available_mib: int | None, memory: JobMemory) -> str | None:
    """Enough memory for one compile job: raise against a documented figure, warn against an estimate."""
    if available_mib is None:
        return None
    available = available_mib / 1024
    if available >= memory.gib:
        return None
    text = (
        f"only {available:.1f} GiB of memory is available, and one {memory.what} takes about {memory.gib:g} GiB "
        f"({'estimate' if memory.estimate else 'documented'}: {memory.source})"
    )
    fix = "close other programs (browsers, IDEs, other builds), or add memory or page file, then run again"
    if not memory.estimate:
        raise ToolchainError(text[0].upper() + text[1:] + "; the compiler would run out of heap space.", fix=fix + ".")
    return f"{text[0].upper() + text[1:]}: the build may swap or fail with C1060 / 'cicc died'. To be safe: {fix}."


def plan_job_memory(plan: Plan, knowledge: Knowledge, measured_gib: float | None = None) -> JobMemory:
    """The memory per compile job the plan sized MAX_JOBS with."""
    archs = plan.archs
    return job_memory(knowledge.resources, plan.era.name, plan.cuda is not None, archs, measured_gib)


def available_memory_mib() -> int | None:
    """This machine's available physical memory now (psutil), in MiB."""
    import psutil

    try:
        return int(psutil.virtual_memory().available // (1024 * 1024))
    except (OSError, RuntimeError):
        return None


def preflight(
    plan: Plan, knowledge: Knowledge, build_root: Path, cache_dir: Path, measured_gib: float | None = None
) -> list[str]:
    """Disk and memory checks before a build or build-ext; the warnings to print (raises on a refusal).
    `measured_gib`: the memory per job this machine's record of compiler peaks gives, as the plan used."""
    warnings = check_disk(disk_needs(plan, knowledge, build_root, cache_dir))
    memory = decide_memory(available_memory_mib(), plan_job_memory(plan, knowledge, measured_gib))
    return warnings + ([memory] if memory else [])
