"""What a build needs from the machine (build_config/resources.toml): memory per compile job and
free disk space, each figure with its source and whether it is an estimate; and how the build
runner watches memory while a build runs ([watch])."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.config_files import load_toml, optional, require, string_list


@dataclass(frozen=True)
class Figure:
    gib: float
    source: str
    estimate: bool


@dataclass(frozen=True)
class WatchSettings:
    """The memory watch of a running build (resources.toml [watch]; builder/memory_watch.py)."""

    interval_seconds: float
    compilers: frozenset[str]  # process names, lower case, without .exe
    cache_servers: frozenset[str]  # compiler caches whose server, not the build, runs the compilers
    low_memory_fraction: float  # of total memory: under it available memory is low
    low_memory_recover: float  # of total memory: over it again, the low-memory episode has ended
    low_memory_source: str
    keep_runs: int  # measured runs kept per machine and configuration
    margin: float  # added to the measured peak (a fraction of it) for the next plan's figure
    margin_source: str
    oom_rules: tuple[str, ...]  # diagnosis rule ids that mean the build ran out of memory


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
    watch: WatchSettings


def _figure(table: Mapping[str, object], key: str, where: str) -> Figure:
    entry = require(table, key, dict, where)
    where = f"{where}.{key}"
    gib = require(entry, "gib", (float, int), where)
    if isinstance(gib, bool) or gib < 0:
        raise ConfigurationError(f"{where}.gib: expected a number of GiB (0 or more), got {gib!r}.")
    source = require(entry, "source", str, where)
    if not source.strip():
        raise ConfigurationError(f"{where}.source: every figure names where it comes from.")
    return Figure(float(gib), source, optional(entry, "estimate", bool, where, True))


def _fraction(table: Mapping[str, object], key: str, where: str) -> float:
    value = require(table, key, (float, int), where)
    if isinstance(value, bool) or not 0 < value <= 1:
        raise ConfigurationError(f"{where}.{key}: expected a fraction of the machine's memory (0 to 1), got {value!r}.")
    return float(value)


def _names(table: Mapping[str, object], key: str, where: str) -> frozenset[str]:
    names = string_list(table, key, where)
    if not names or any(name != name.strip().lower() or not name.strip() for name in names):
        raise ConfigurationError(f"{where}.{key}: expected process names in lower case, without spaces around them.")
    require(table, f"{key}_source", str, where)
    return frozenset(names)


def _watch(table: Mapping[str, object], where: str) -> WatchSettings:
    interval = require(table, "interval_seconds", (float, int), where)
    if isinstance(interval, bool) or interval <= 0:
        raise ConfigurationError(f"{where}.interval_seconds: expected a number of seconds over 0, got {interval!r}.")
    low, recover = _fraction(table, "low_memory_fraction", where), _fraction(table, "low_memory_recover", where)
    if recover < low:
        raise ConfigurationError(f"{where}.low_memory_recover ({recover:g}) is under low_memory_fraction ({low:g}).")
    keep = require(table, "keep_runs", int, where)
    margin = require(table, "margin", (float, int), where)
    if keep < 1 or isinstance(margin, bool) or margin < 0:
        raise ConfigurationError(f"{where}: keep_runs must be 1 or more and margin 0 or more.")
    return WatchSettings(
        interval_seconds=float(interval),
        compilers=_names(table, "compilers", where),
        cache_servers=_names(table, "cache_servers", where),
        low_memory_fraction=low,
        low_memory_recover=recover,
        low_memory_source=require(table, "low_memory_source", str, where),
        keep_runs=keep,
        margin=float(margin),
        margin_source=require(table, "margin_source", str, where),
        oom_rules=tuple(string_list(table, "oom_rules", where)),
    )


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
        watch=_watch(require(data, "watch", dict, path.name), f"{path.name}: watch"),
    )
