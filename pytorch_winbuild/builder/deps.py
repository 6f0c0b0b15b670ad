"""The plan's MKL/MAGMA archives (and a NuGet CPython): fetched before the build when the cache does not hold them yet.

The plan already points CMAKE_INCLUDE_PATH, LIB and MAGMA_HOME at the cache folders; a build
that started without them would fail an hour later at the first MKL include, so the missing
ones are fetched (verified, extracted) first, exactly as `invoke fetch-deps` does.
"""

from __future__ import annotations

from pathlib import Path

from pytorch_winbuild.planning.plan_model import Plan


def fetch_missing_archives(
    plan: Plan, cache_dir: Path, mirror: str | None = None, mirror_label: str = "winbuild.mirror"
) -> str | None:
    """Fetch the archives the plan marks missing; what was done (fetch-deps' summary), or None when none was.
    `mirror_label` is how messages name the mirror: the build takes it from winbuild.mirror, the nightly
    also from its --mirror."""
    python_missing = not plan.build_python.present
    if all(archive.present for archive in plan.archives) and not python_missing:
        return None
    from pytorch_winbuild.deps.fetch import fetch_archives, format_summary

    archives = [archive.catalog_archive for archive in plan.archives]
    nuget = plan.build_python.fetch_archive
    if python_missing and nuget is not None:  # CPython from NuGet, with the same guarantees as MKL/MAGMA
        archives.append(nuget)
    result = fetch_archives(archives, cache_dir=cache_dir, mirror=mirror, mirror_label=mirror_label)
    return format_summary(result)
