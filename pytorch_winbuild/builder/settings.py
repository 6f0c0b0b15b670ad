"""build_config/build_runner.toml, typed and checked once per process.

The runner's knowledge of other tools (progress lines, cache commands and statistics, commands
per mode) lives in that file so a new tool version is an edit there, not here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.config_files import load_toml, optional, require, string_list

SETTINGS_FILE = "build_runner.toml"
STATS_FORMATS = ("json", "tsv", "text")
EXTENSION_METHODS = ("wrapper", "plan")


@dataclass(frozen=True)
class ProgressSettings:
    patterns: tuple[re.Pattern[str], ...]
    plain_every_percent: int
    plain_every_seconds: float
    # Descriptions of the steps Ninja runs to regenerate its own build file (CMake's re-run, its glob check),
    # each counted on its own before the build's count: not where a resumed build's count begins.
    regenerate: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunEnv:
    name: str
    value: str
    reason: str


@dataclass(frozen=True)
class StatsCommand:
    args: tuple[str, ...]
    format: str
    hits: tuple[str, ...]
    misses: tuple[str, ...]


@dataclass(frozen=True)
class CacheCommands:
    name: str
    before: tuple[tuple[str, ...], ...]
    may_fail: tuple[tuple[str, ...], ...]
    after: tuple[tuple[str, ...], ...]
    stats: StatsCommand
    stats_fallback: StatsCommand | None
    baseline: bool = False  # statistics read before the build too: this build's are the difference (no reset)


@dataclass(frozen=True)
class NvccRoute:
    """How torch.utils.cpp_extension finds nvcc, and the variable that replaces it."""

    variable: str  # PYTORCH_NVCC
    homes: tuple[str, ...]  # CUDA_HOME, CUDA_PATH: the first one set is the toolkit
    program: str  # nvcc under the toolkit (bin/nvcc)
    default_home: str  # the toolkit when no variable names one and no nvcc is on PATH


@dataclass(frozen=True)
class ExtensionCache:
    compilers: dict[str, str]  # variable → default compiler command (CC → cc)
    disable_torch_wrapper: str
    nvcc: NvccRoute
    methods: dict[str, dict[str, str]]  # cache → os → "wrapper" | "plan"


@dataclass(frozen=True)
class RunnerSettings:
    progress: ProgressSettings
    stop_grace_seconds: float
    run_env: tuple[RunEnv, ...]
    extension_commands: dict[str, tuple[str, ...]]
    caches: dict[str, CacheCommands]
    extension_cache: ExtensionCache


def _number(table: dict[str, object], key: str, where: str) -> float:
    value = require(table, key, (int, float), where)
    if value <= 0:
        raise ConfigurationError(f"{where}.{key}: expected a positive number, got {value!r}.")
    return float(value)


def _pattern(text: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(text, re.MULTILINE)
    except re.error as exc:
        raise ConfigurationError(f"{where}: invalid regular expression {text!r} ({exc}).") from None


def _argument_lists(table: dict[str, object], key: str, where: str) -> tuple[tuple[str, ...], ...]:
    value = require(table, key, list, where)
    if not all(isinstance(item, list) and item and all(isinstance(arg, str) for arg in item) for item in value):
        raise ConfigurationError(f'{where}.{key}: expected a list of argument lists such as [["-z"]], got {value!r}.')
    return tuple(tuple(item) for item in value)


def _stats(table: object, where: str) -> StatsCommand:
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where}: expected a table with args, format, hits and misses.")
    form = require(table, "format", str, where)
    if form not in STATS_FORMATS:
        raise ConfigurationError(f"{where}.format: expected one of {', '.join(STATS_FORMATS)}, got {form!r}.")
    hits = tuple(string_list(table, "hits", where))
    misses = tuple(string_list(table, "misses", where))
    if form == "text":
        for index, text in enumerate((*hits, *misses)):
            pattern = _pattern(text, f"{where}.hits/misses[{index}]")
            if pattern.groups < 1:
                raise ConfigurationError(f"{where}: the pattern {text!r} needs a group that captures the count.")
    return StatsCommand(tuple(string_list(table, "args", where)), form, hits, misses)


def _cache(name: str, table: object, where: str) -> CacheCommands:
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where}: expected a table.")
    fallback = table.get("stats_fallback")
    return CacheCommands(
        name=name,
        before=_argument_lists(table, "before", where),
        may_fail=_argument_lists(table, "may_fail", where),
        after=_argument_lists(table, "after", where),
        stats=_stats(require(table, "stats", dict, where), f"{where}.stats"),
        stats_fallback=None if fallback is None else _stats(fallback, f"{where}.stats_fallback"),
        baseline=optional(table, "baseline", bool, where, False),
    )


def _nvcc_route(table: dict[str, object], where: str) -> NvccRoute:
    return NvccRoute(
        require(table, "variable", str, where),
        tuple(string_list(table, "homes", where)),
        require(table, "program", str, where),
        require(table, "default_home", str, where),
    )


def _extension_cache(table: dict[str, object], where: str) -> ExtensionCache:
    compilers = require(table, "compilers", dict, where)
    nvcc = _nvcc_route(require(table, "nvcc", dict, where), f"{where}.nvcc")
    methods: dict[str, dict[str, str]] = {}
    for cache, per_os in table.items():
        if cache in ("compilers", "disable_torch_wrapper", "nvcc"):
            continue
        if not isinstance(per_os, dict) or not all(method in EXTENSION_METHODS for method in per_os.values()):
            raise ConfigurationError(f'{where}.{cache}: expected {{ <os> = "wrapper" | "plan" }}, got {per_os!r}.')
        methods[cache] = dict(per_os)
    return ExtensionCache(
        {str(k): str(v) for k, v in compilers.items()},
        require(table, "disable_torch_wrapper", str, where),
        nvcc,
        methods,
    )


def parse_settings(data: dict[str, object], source: str) -> RunnerSettings:
    """Check every key of the runner's settings, naming the file and key on any problem."""
    progress = require(data, "progress", dict, source)
    run = require(data, "run", dict, source)
    commands = require(data, "commands", dict, source)
    extension_commands = require(commands, "extension", dict, f"{source}: commands")
    caches = require(data, "cache", dict, source)
    run_env = []
    for index, entry in enumerate(require(run, "env", list, f"{source}: run")):
        where = f"{source}: run.env[{index}]"
        if not isinstance(entry, dict):
            raise ConfigurationError(f"{where}: expected {{ name, value, reason }}.")
        run_env.append(
            RunEnv(
                require(entry, "name", str, where),
                require(entry, "value", str, where),
                require(entry, "reason", str, where),
            )
        )
    return RunnerSettings(
        progress=ProgressSettings(
            patterns=tuple(
                _pattern(text, f"{source}: progress.patterns[{i}]")
                for i, text in enumerate(string_list(progress, "patterns", f"{source}: progress"))
            ),
            plain_every_percent=int(_number(progress, "plain_every_percent", f"{source}: progress")),
            plain_every_seconds=_number(progress, "plain_every_seconds", f"{source}: progress"),
            regenerate=tuple(string_list(progress, "regenerate", f"{source}: progress")),
        ),
        stop_grace_seconds=_number(run, "stop_grace_seconds", f"{source}: run"),
        run_env=tuple(run_env),
        extension_commands={
            mode: tuple(string_list(extension_commands, mode, f"{source}: commands.extension"))
            for mode in extension_commands
        },
        caches={name: _cache(name, table, f"{source}: cache.{name}") for name, table in caches.items()},
        extension_cache=_extension_cache(require(data, "extension_cache", dict, source), f"{source}: extension_cache"),
    )


@functools.lru_cache(maxsize=1)
def load_settings() -> RunnerSettings:
    return parse_settings(load_toml(SETTINGS_FILE), f"build_config/{SETTINGS_FILE}")
