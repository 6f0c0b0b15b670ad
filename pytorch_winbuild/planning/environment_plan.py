"""The build-wide part of a plan's environment: the parallel job limit, the build venv's activation, the
switches an era needs on Windows, and warnings about paths.

These depend on no single toolchain choice, so they sit apart from the compiler, CUDA and generator modules.
"""

from __future__ import annotations

from pytorch_winbuild.facts.model import CudaInstall, Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.model import Era
from pytorch_winbuild.planning.context import PlanContext
from pytorch_winbuild.planning.jobs import (
    JobConfiguration,
    Measured,
    MeasuredJobs,
    default_jobs,
    job_memory,
)
from pytorch_winbuild.planning.plan_model import CompilerChoice, PlanBuilder, plan_paths
from pytorch_winbuild.planning.venv_plan import VenvPlan


def jobs_changes(
    context: PlanContext, cuda: CudaInstall | None, compiler: CompilerChoice | None, measured_jobs: MeasuredJobs | None
) -> None:
    """MAX_JOBS: --jobs wins; otherwise min(cores, available memory / memory per job), the memory per job measured
    by earlier builds of this configuration when `measured_jobs` has a figure, else the cited one."""
    knowledge, era, facts, options, plan = context.knowledge, context.era, context.facts, context.options, context.plan
    archs = plan.archs
    measured = Measured()
    if measured_jobs is not None:
        configuration = JobConfiguration(
            era.name, cuda.version if cuda else None, archs, compiler.short if compiler else None
        )
        measured = measured_jobs(configuration)
        if measured.gib is None or measured.note is None:
            measured = Measured(warning=measured.warning)  # a figure only with the note that says where it is from
        else:
            plan.decisions.append(measured.note)
        if measured.warning:
            plan.warnings.append(measured.warning)
    memory = job_memory(knowledge.resources, era.name, cuda is not None, archs, measured.gib)
    if options.jobs:
        plan.set(
            "MAX_JOBS",
            str(options.jobs),
            f"at most {options.jobs} parallel compile jobs ({options.label('jobs')}; about {memory.gib:g} GiB per "
            f"{memory.what})",
        )
        return
    decision = default_jobs(facts, memory)
    if decision.jobs is None:
        plan.decisions.append(decision.reason)
    else:
        plan.set("MAX_JOBS", str(decision.jobs), decision.reason)
        plan.decisions.append(
            f"MAX_JOBS {decision.jobs}: {decision.reason}; --jobs N overrides it ({decision.source})."
        )
    if decision.warning:
        plan.warnings.append(decision.warning)


def own_cmake_jobs(tree_backend: str, plan: PlanBuilder) -> None:
    """MAX_JOBS is tools/setup_helpers' (its cmake.py passes it to `cmake --build` as -j); a tree without them
    gets the same limit through CMake's own CMAKE_BUILD_PARALLEL_LEVEL (CMake 3.12+)."""
    jobs = next((c.value for c in reversed(plan.changes) if c.name == "MAX_JOBS"), None)
    if jobs is not None:
        plan.set(
            "CMAKE_BUILD_PARALLEL_LEVEL",
            jobs,
            f"MAX_JOBS for CMake itself (CMake 3.12+): the tree builds through {tree_backend}, and MAX_JOBS is "
            "read only by tools/setup_helpers",
        )


def path_warnings(context: PlanContext) -> None:
    knowledge, facts, options, plan = context.knowledge, context.facts, context.options, context.plan
    limits = knowledge.path_limits
    source_dir = str(options.source_dir) if options.source_dir is not None else None
    checked = {"source folder": source_dir, "cache folder": str(options.cache_dir), "TEMP": facts.temp_dir}
    for what, path in checked.items():  # the build runs the venv's Python, which lies in the cache folder
        if path and not path.isascii():
            plan.warnings.append(
                f"The {what} path {path!r} has non-ASCII characters; some build tools (nvcc, older CMake, "
                "clcache) fail on them. Use a plain ASCII path (for TEMP: set TEMP and TMP to e.g. C:\\tmp)."
            )
    if facts.os != Platform.WINDOWS or facts.long_paths_enabled:
        return
    for what, path, suffix in (
        ("source folder", source_dir, limits.deepest_build_suffix),
        ("cache folder", str(options.cache_dir), limits.deepest_cache_suffix),
    ):
        if path and len(path) + suffix > limits.max_path:
            plan.warnings.append(
                f"The {what} {path} is {len(path)} characters long; with the ~{suffix} characters the build adds "
                f"under it, paths pass Windows' {limits.max_path}-character limit and long paths are not enabled. "
                "Move it to a short path such as C:\\src, or enable long paths (LongPathsEnabled=1)."
            )


def windows_switches(era: Era, plan: PlanBuilder) -> None:
    """The switches the era needs off on Windows, and what its torch.distributed needs there."""
    for switch in era.windows_off:
        plan.set(switch.name, switch.value, switch.reason)
    if era.distributed == "libuv":
        plan.warnings.append(
            f"torch.distributed on Windows (PyTorch {era.name}) builds only when CMake finds libuv; without "
            "it distributed is switched off silently. "
            "To have it: conda install -c conda-forge libuv, then set libuv_ROOT to that environment's "
            "Library folder before building."
        )


def venv_changes(facts: Facts, venv: VenvPlan, plan: PlanBuilder) -> None:
    """The build venv's activation, as its activate script does it."""
    plan.set("VIRTUAL_ENV", venv.folder, "the build venv, as its activate script sets it")
    plan.prepend(
        "PATH",
        str(plan_paths(facts.os)(venv.python).parent),
        "the build venv's scripts first, as its activate script does: the plan's cmake and ninja are the ones found",
    )
