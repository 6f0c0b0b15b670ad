"""The archives a plan takes from the cache that fetch-deps fills: MKL/MAGMA and the variables that point the
build at them, and where a fetched CPython's interpreter lies.

Kept apart so the plan knows only the catalog's entries and a locator; the catalog itself loads only when needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import CudaInstall, Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.planning.context import PlanContext
from pytorch_winbuild.planning.plan_model import ArchiveLocator, PlanBuilder, PlannedArchive, plan_paths
from pytorch_winbuild.planning.python_choice import PythonLocator

if TYPE_CHECKING:  # the catalog module loads when a plan places an archive
    from pytorch_winbuild.knowledge.catalog import Archive


def archive_changes(archives: list[PlannedArchive], facts: Facts, plan: PlanBuilder, fetch_step: int = 1) -> None:
    """The variables build_config/deps.toml names for each archive (CMAKE_INCLUDE_PATH, LIB, MAGMA_HOME); a missing
    one's warning points at the fetch-deps line, Commands step `fetch_step`."""
    path_type = plan_paths(facts.os)
    for archive in archives:
        label = f"{archive.name.upper()} {archive.version}"
        for name, sub_path in archive.set_vars:
            plan.set(
                name,
                str(path_type(archive.folder) / sub_path) if sub_path else archive.folder,
                f"{label}: {sub_path or 'its folder'}",
            )
        for name, sub_path in archive.prepend_vars:
            plan.prepend(name, str(path_type(archive.folder) / sub_path), f"{label}: {sub_path} first")
        if not archive.present:
            plan.warnings.append(
                f"{archive.file_name} is not in the cache yet: the `invoke fetch-deps` line of Commands (step "
                f"{fetch_step}) downloads exactly the plan's archives, or `invoke build` does."
            )


def plan_archives(
    context: PlanContext, cuda: CudaInstall | None, locate: ArchiveLocator | None
) -> list[PlannedArchive]:
    """MKL for every Windows build and MAGMA for CUDA builds, where fetch-deps puts them."""
    knowledge, era, facts, options, plan = context.knowledge, context.era, context.facts, context.options, context.plan
    if locate is None:
        return []
    if facts.os != Platform.WINDOWS:
        plan.decisions.append(
            "MKL/MAGMA archives: none (they are Windows builds; on Linux PyTorch finds MKL and MAGMA from the "
            "system or pip)."
        )
        return []
    from pytorch_winbuild.knowledge.catalog import magma_preference, select_archives

    def select(no_magma: bool) -> list[Archive]:
        return select_archives(
            cuda=knowledge.cuda_release(cuda.version) if cuda else None,  # the chosen CUDA is one cuda.toml lists
            mkl_version=options.mkl_version or era.mkl,
            magma_versions=magma_preference(options.magma_version) or list(era.magma),
            magma_debug=options.magma_debug,
            no_magma=no_magma,
        )

    archives = select(no_magma=True)  # MKL; validates the versions
    if cuda is not None and not options.no_magma:
        try:
            archives = select(no_magma=False)
        except ConfigurationError as error:
            if options.magma_version or options.magma_debug:
                raise
            plan.warnings.append(
                f"{error.message} This build goes on without MAGMA (GPU linear algebra falls back to slower "
                "paths); --no-magma says so explicitly."
            )
    planned = []
    for archive in archives:
        folder, present = locate(archive)
        planned.append(
            PlannedArchive(
                archive.name,
                archive.version,
                archive.file_name,
                folder,
                present,
                archive,
                archive.set_vars,
                archive.prepend_vars,
            )
        )
        plan.decisions.append(
            f"{archive.name.upper()}: {archive.file_name} → {folder} ({'in the cache' if present else 'to fetch'})."
        )
    return planned


def python_locator(os_name: Platform, cache_dir: str, locate_archive: ArchiveLocator | None) -> PythonLocator:
    """Where a NuGet CPython's interpreter is in the cache: inside the folder fetch-deps extracts it to, as the
    caller's archive locator says (and whether it is there); without one, <cache>/deps/<package folder>."""

    def locate(archive: Archive) -> tuple[str, bool]:
        from pytorch_winbuild.knowledge.catalog import (
            python_interpreter,  # the catalog loads only when a Python is fetched
        )

        paths = plan_paths(os_name)
        folder, present = (
            locate_archive(archive) if locate_archive else (str(paths(cache_dir, "deps", archive.folder_name)), False)
        )
        return str(python_interpreter(paths(folder))), present

    return locate
