"""The environment a build runs in: vcvars first (Windows), then the plan's changes in order.

The order matters: CUDA's bin folder and MKL's lib folder must end up in front of what vcvars
put on PATH and LIB, exactly as the plan's .bat rendering does it. Windows treats variable
names case-insensitively (PATH is Path), so changes there find the existing spelling.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from pytorch_winbuild.builder.settings import RunEnv
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.planning.plan_model import EnvChange, Plan
from pytorch_winbuild.text.quoting import refuse_control_characters

VCVARS_CACHE_FOLDER = "vcvars"


class VcvarsEntry(TypedDict):
    """How vcvars was entered, as the build report writes it."""

    command_line: str
    cl: str
    from_cache: bool
    seconds: float
    changed: list[str]  # the variables it added or changed


@dataclass(frozen=True)
class BuildEnvironment:
    env: dict[str, str]
    vcvars: VcvarsEntry | None  # how vcvars was entered: command line, from cache, seconds
    added: tuple[RunEnv, ...]  # what the runner itself added, with reasons


def _key(env: Mapping[str, str], name: str, windows: bool) -> str:
    if windows:
        return next((key for key in env if key.upper() == name.upper()), name)
    return name


def apply_change(env: dict[str, str], change: EnvChange, separator: str, *, windows: bool) -> None:
    """One planned change: set, prepend (onto the current value, when there is one) or unset."""
    key = _key(env, change.name, windows)
    if change.action == "set":
        env[key] = change.value
    elif change.action == "unset":
        env.pop(key, None)
    else:
        current = env.get(key)
        env[key] = change.value + separator + current if current else change.value


def build_environment(
    plan: Plan, cache_dir: Path, run_env: tuple[RunEnv, ...], base: Mapping[str, str] | None = None
) -> BuildEnvironment:
    """This process's environment, through the plan's vcvars call and changes, plus the runner's own.

    A planned or added value with a control character is refused (exit 2) as the emitted scripts
    refuse it: the build's own .bat files expand these variables with %NAME%, where a line break
    cuts the command short, and no environment can hold a NUL.
    """
    for name, value in [
        *((change.name, change.value) for change in plan.changes),
        *((extra.name, extra.value) for extra in run_env),
    ]:
        refuse_control_characters(value, name)
    env = dict(os.environ if base is None else base)
    windows = plan.os == Platform.WINDOWS
    vcvars: VcvarsEntry | None = None
    if plan.vcvars is not None:
        from pytorch_winbuild.facts.vcvars import capture_vcvars

        result = capture_vcvars(
            plan.vcvars.script, list(plan.vcvars.args), base_env=env, cache_dir=cache_dir / VCVARS_CACHE_FOLDER
        )
        env = dict(result.env)
        vcvars = {
            "command_line": result.command_line,
            "cl": result.cl,
            "from_cache": result.from_cache,
            "seconds": round(result.seconds, 3),
            "changed": sorted(result.changes),
        }
    for change in plan.changes:
        apply_change(env, change, plan.path_separator, windows=windows)
    for extra in run_env:
        env[_key(env, extra.name, windows)] = extra.value
    return BuildEnvironment(env, vcvars, run_env)
