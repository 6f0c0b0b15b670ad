"""What a build needs from the machine (build_config/resources.toml): memory per compile job and
free disk space, each figure with its source and whether it is an estimate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.config_files import load_toml, optional, require, string_list


@dataclass(frozen=True)
class Figure:
    gib: float
    source: str
    estimate: bool


@dataclass(frozen=True)
class Resources:
    cpp_job: Figure
    cuda_job: Figure
    cuda_job_flash: Figure
    flash_eras: tuple[str, ...]  # eras.toml names whose CUDA jobs take cuda_job_flash
    cuda_extra_arch: Figure
    checkout: Figure
    build_cpu: Figure
    build_cuda: Figure
    compiler_cache: dict[str, Figure]  # cache name → its default size limit


def _figure(table: dict[str, Any], key: str, where: str) -> Figure:
    entry = require(table, key, dict, where)
    where = f"{where}.{key}"
    gib = require(entry, "gib", (float, int), where)
    if isinstance(gib, bool) or gib < 0:
        raise ConfigurationError(f"{where}.gib: expected a number of GiB (0 or more), got {gib!r}.")
    source = require(entry, "source", str, where)
    if not source.strip():
        raise ConfigurationError(f"{where}.source: every figure names where it comes from.")
    return Figure(float(gib), source, optional(entry, "estimate", bool, where, True))


def load_resources(path: Path, era_names: tuple[str, ...]) -> Resources:
    data = load_toml(path)
    memory = require(data, "memory", dict, path.name)
    disk = require(data, "disk", dict, path.name)
    caches = require(disk, "compiler_cache", dict, f"{path.name}: disk")
    flash = require(memory, "cuda_job_flash", dict, f"{path.name}: memory")
    eras = tuple(string_list(flash, "eras", f"{path.name}: memory.cuda_job_flash"))
    unknown = [name for name in eras if name not in era_names]
    if unknown:
        raise ConfigurationError(
            f"{path.name}: memory.cuda_job_flash.eras: {', '.join(unknown)} are not eras of eras.toml."
        )
    where = f"{path.name}: memory"
    return Resources(
        cpp_job=_figure(memory, "cpp_job", where),
        cuda_job=_figure(memory, "cuda_job", where),
        cuda_job_flash=_figure(memory, "cuda_job_flash", where),
        flash_eras=eras,
        cuda_extra_arch=_figure(memory, "cuda_extra_arch", where),
        checkout=_figure(disk, "checkout", f"{path.name}: disk"),
        build_cpu=_figure(disk, "build_cpu", f"{path.name}: disk"),
        build_cuda=_figure(disk, "build_cuda", f"{path.name}: disk"),
        compiler_cache={name: _figure(caches, name, f"{path.name}: disk.compiler_cache") for name in caches},
    )
