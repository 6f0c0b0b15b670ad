"""The compiler cache around a build: reset before, statistics after, and reaching extension builds (nvcc included).

Statistics are zeroed before the build, or read before it (ccache: `baseline`, cheaper than its reset), so the
numbers after it are this build's alone (a warm rebuild shows its hits, a cold one its misses). sccache's server is
restarted with the build's environment first, because a server that is already running keeps the configuration it
started with (cache folder, idle timeout), whatever the build's variables say.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from pytorch_winbuild.builder.settings import CacheCommands, ExtensionCache, NvccRoute, StatsCommand
from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.json_file import JsonObject, JsonValue, parse_json
from pytorch_winbuild.text import quoting_sh
from pytorch_winbuild.text.redact import redact_text

COMMAND_TIMEOUT_SECONDS = 120
LAUNCHERS_FOLDER = "launchers"


@dataclass(frozen=True)
class CacheStats:
    name: str
    hits: int | None
    misses: int | None
    command: str | None
    raw: JsonValue  # the parsed JSON, the key/value table or the text the tool printed
    error: str | None = None

    def to_dict(self) -> JsonObject:
        return {
            "name": self.name,
            "hits": self.hits,
            "misses": self.misses,
            "command": self.command,
            "raw": self.raw,
            "error": self.error,
        }

    def since(self, before: CacheStats) -> CacheStats:
        """The counts of what ran after `before` was read: these totals less those; `raw` stays the totals."""
        if self.error or before.error:
            return replace(self, hits=None, misses=None, error=self.error or f"before the build: {before.error}")
        hits = None if self.hits is None or before.hits is None else self.hits - before.hits
        misses = None if self.misses is None or before.misses is None else self.misses - before.misses
        if (hits or 0) < 0 or (misses or 0) < 0:  # someone zeroed them meanwhile
            return replace(self, hits=None, misses=None, error="the statistics were reset during the build")
        return replace(self, hits=hits, misses=misses)

    def describe(self) -> str:
        if self.error:
            return f"{self.name}: statistics unavailable ({self.error})"
        if self.hits is None or self.misses is None:
            return f"{self.name}: statistics read, but no hit/miss counts found"
        total = self.hits + self.misses
        rate = f" ({100 * self.hits / total:.0f}% hits)" if total else ""
        return f"{self.name}: {self.hits} hits, {self.misses} misses{rate}"


def _json_count(data: JsonValue, path: str) -> int | None:
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    if isinstance(data, dict):
        return sum(value for value in data.values() if isinstance(value, int))
    return data if isinstance(data, int) else None


def _sum(values: list[int | None]) -> int | None:
    found = [value for value in values if value is not None]
    return sum(found) if found else None


def parse_stats(text: str, spec: StatsCommand) -> tuple[int | None, int | None, JsonValue]:
    """(hits, misses, raw) from what a stats command printed, in the spec's format."""
    if spec.format == "json":
        data: JsonValue = parse_json(text)
        return _sum([_json_count(data, p) for p in spec.hits]), _sum([_json_count(data, p) for p in spec.misses]), data
    if spec.format == "tsv":
        table: dict[str, int] = {}
        for line in text.splitlines():
            key, _, value = line.partition("\t")
            if value.strip().isascii() and value.strip().isdigit():
                table[key.strip()] = int(value)
        raw: JsonObject = dict(table)
        return _sum([table.get(k) for k in spec.hits]), _sum([table.get(k) for k in spec.misses]), raw

    def count(patterns: tuple[str, ...]) -> int | None:
        matches = [re.search(p, text, re.MULTILINE) for p in patterns]
        return _sum([int(m.group(1)) if m else None for m in matches])

    return count(spec.hits), count(spec.misses), text


class _Capture:
    """A temporary file that collects a command's output."""

    def __enter__(self) -> _Capture:
        self.file = tempfile.TemporaryFile()
        return self

    def text(self) -> str:
        self.file.seek(0)
        return self.file.read().decode("utf-8", errors="replace")

    def __exit__(self, *exc: object) -> None:
        self.file.close()


class CacheSession:
    """One compiler cache, driven with the build's own environment."""

    def __init__(self, commands: CacheCommands, env: Mapping[str, str]) -> None:
        self.commands = commands
        self.env = dict(env)
        path = next((value for key, value in env.items() if key.upper() == "PATH"), None)
        executable = shutil.which(commands.name, path=path)
        if executable is None:
            raise ToolchainError(
                f"the plan uses the compiler cache {commands.name}, but it is not on the build's PATH.",
                fix=f"install {commands.name} (or pass --compiler-cache none), then run again.",
            )
        self.executable = executable
        self._baseline: CacheStats | None = None

    def _run(self, args: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
        # stdout/stderr to files, not pipes: `sccache --start-server` leaves a server behind that
        # inherits them, and a pipe would then never reach end-of-file.
        with open(os.devnull, "rb") as stdin, _Capture() as out, _Capture() as err:
            try:
                status = subprocess.run(
                    [self.executable, *args],
                    env=self.env,
                    stdin=stdin,
                    stdout=out.file,
                    stderr=err.file,
                    timeout=COMMAND_TIMEOUT_SECONDS,
                    check=False,
                ).returncode
            except subprocess.TimeoutExpired:
                status = -1
            return subprocess.CompletedProcess([self.executable, *args], status, out.text(), err.text())

    def start(self) -> None:
        """Reset the cache's statistics (restarting its server where it has one), or read them as the baseline
        `finish` subtracts."""
        for args in self.commands.before:
            completed = self._run(args)
            if completed.returncode != 0 and args not in self.commands.may_fail:
                output = (completed.stderr or completed.stdout).strip().splitlines()
                message = redact_text(output[-1]) if output else "no output"
                raise ToolchainError(
                    f"`{self.commands.name} {' '.join(args)}` failed with exit status {completed.returncode}: "
                    f"{message}",
                    fix="run the same command by hand to see why, or pass --compiler-cache none.",
                )
        self._baseline = self._stats() if self.commands.baseline else None

    def finish(self) -> CacheStats:
        """This build's statistics, then the cache's closing steps; never fails the build."""
        stats = self._stats()
        if self._baseline is not None:
            stats = stats.since(self._baseline)
        for args in self.commands.after:
            self._run(args)
        return stats

    def _stats(self) -> CacheStats:
        problems = []
        for spec in (self.commands.stats, self.commands.stats_fallback):
            if spec is None:
                continue
            completed = self._run(spec.args)
            command = f"{self.commands.name} {' '.join(spec.args)}"
            if completed.returncode != 0:
                problems.append(f"`{command}` exited with status {completed.returncode}")
                continue
            try:
                hits, misses, raw = parse_stats(completed.stdout, spec)
            except ValueError as exc:
                problems.append(f"`{command}` printed something unreadable ({exc})")
                continue
            return CacheStats(self.commands.name, hits, misses, command, raw)
        return CacheStats(self.commands.name, None, None, None, None, "; ".join(problems))


def _wrapper_text(launcher: str, compiler: str) -> str:
    note = quoting_sh.comment(
        f"Written by pytorch-winbuild: runs {os.path.basename(compiler)} through {os.path.basename(launcher)}.",
        "the compiler's file name",
    )
    return f'#!/bin/sh\n{note}\nexec {shlex.quote(launcher)} {shlex.quote(compiler)} "$@"\n'


def _nvcc_wrapper_text(launcher: str, nvcc: str, hosts: Mapping[str, str]) -> str:
    """Like _wrapper_text, but a host compiler wrapper passed as an argument becomes the real compiler.

    torch adds `-ccbin $CC` to nvcc's flags, and $CC is the cache's wrapper: sccache fails
    ("Failed to preprocess host compiler properties") when nvcc runs it inside sccache, and the
    cache already keeps nvcc's whole output, host code included.
    """
    name = os.path.basename(launcher)
    cases = "".join(f"    {shlex.quote(wrapper)}) arg={shlex.quote(real)} ;;\n" for wrapper, real in hosts.items())
    return (
        "#!/bin/sh\n"
        + quoting_sh.comment(
            f"Written by pytorch-winbuild: runs nvcc through {name}, with the real host compiler in place of "
            f"its {name} wrapper.",
            "the compiler cache's file name",
        )
        + "\n"
        f'for arg do\n  shift\n  case $arg in\n{cases}  esac\n  set -- "$@" "$arg"\ndone\n'
        f'exec {shlex.quote(launcher)} {shlex.quote(nvcc)} "$@"\n'
    )


def _write_wrapper(folder: Path, name: str, text: str) -> Path:
    """An executable script, rewritten only when its text changes."""
    wrapper = folder / name
    if not wrapper.is_file() or wrapper.read_text(encoding="utf-8") != text:
        wrapper.write_text(text, encoding="utf-8")
        wrapper.chmod(0o755)
    return wrapper


def find_nvcc(env: Mapping[str, str], path: str | None, route: NvccRoute) -> str | None:
    """The nvcc torch.utils.cpp_extension would run for a .cu file (its _find_cuda_home), if any."""
    home = next((env[name] for name in route.homes if env.get(name)), None)
    if home is None:
        on_path = shutil.which("nvcc", path=path)
        if on_path is not None:
            return on_path
        home = route.default_home
    nvcc = os.path.join(home, route.program)
    return nvcc if os.path.isfile(nvcc) else None


def extension_cache_env(
    cache: str, os_name: str, env: Mapping[str, str], cache_dir: Path, settings: ExtensionCache
) -> tuple[dict[str, str], str]:
    """Variables that put the plan's cache in front of an extension's compilers, and what was done.

    Setuptools and torch.utils.cpp_extension call $CC/$CXX and never read CMake's launcher
    variables; torch (Linux) would also pick ccache by itself when it is installed, so its
    own wrapper is switched off and the plan's choice is the only one. With it off, torch runs
    nvcc bare unless $PYTORCH_NVCC names another, so .cu files get a wrapper of their own.
    """
    variables = {settings.disable_torch_wrapper: "1"} if os_name != Platform.WINDOWS else {}
    if cache == "none":
        return variables, "no compiler cache (--compiler-cache none or none installed)"
    method = settings.methods.get(cache, {}).get(os_name)
    if method is None:
        return (
            variables,
            f"{cache} does not reach extension builds on {os_name} (torch.utils.cpp_extension calls the "
            "compiler directly), so this build is not cached",
        )
    if method == "plan":
        return (
            variables,
            f"{cache} through the plan's CC/CXX; nvcc is not cached ({cache} caches only the C/C++ "
            "compiler), so .cu files compile again every build",
        )
    path = next((value for key, value in env.items() if key.upper() == "PATH"), None)
    launcher = shutil.which(cache, path=path)
    if launcher is None:
        raise ToolchainError(
            f"the plan uses the compiler cache {cache}, but it is not on the build's PATH.",
            fix=f"install {cache} (or pass --compiler-cache none), then run again.",
        )
    folder = cache_dir / LAUNCHERS_FOLDER / cache
    if any(character.isspace() for character in str(folder)):
        raise ConfigurationError(
            f"the compiler-cache wrappers would live in {folder}, and setuptools splits $CC and $CXX at blanks, so "
            "the extension build would run the first word of that path as its compiler.",
            fix="pass a --cache-dir whose path has no blanks (or --compiler-cache none).",
        )
    folder.mkdir(parents=True, exist_ok=True)
    wrapped = []
    hosts: dict[str, str] = {}  # wrapper → the real compiler it runs
    for variable, default in settings.compilers.items():
        wanted = env.get(variable) or default
        compiler = shutil.which(wanted, path=path)
        if compiler is None:
            raise ToolchainError(
                f"the compiler {wanted} (${variable}) is not on the build's PATH.",
                fix="install a C/C++ compiler (e.g. `apt-get install g++`), then run again.",
            )
        real = os.path.realpath(compiler)
        # Named after the real compiler: torch checks that the name says gcc/g++/clang.
        wrapper = _write_wrapper(folder, os.path.basename(real), _wrapper_text(launcher, real))
        hosts[str(wrapper)] = real
        variables[variable] = str(wrapper)
        wrapped.append(f"{variable}={wrapper.name}")
    nvcc_variables, nvcc_how = _nvcc_wrapper(cache, launcher, hosts, env, path, folder, settings.nvcc)
    variables.update(nvcc_variables)
    return variables, f"{cache} through wrapper scripts in {folder} ({', '.join(wrapped)}); {nvcc_how}"


def _nvcc_wrapper(
    cache: str,
    launcher: str,
    hosts: Mapping[str, str],
    env: Mapping[str, str],
    path: str | None,
    folder: Path,
    route: NvccRoute,
) -> tuple[dict[str, str], str]:
    """$PYTORCH_NVCC pointing at a wrapper of the nvcc torch would run, and what was done."""
    if env.get(route.variable):
        return {}, f"nvcc is left to the {route.variable} already set ({env[route.variable]})"
    nvcc = find_nvcc(env, path, route)
    if nvcc is None:
        return {}, f"no nvcc found ({', '.join(route.homes)}, PATH, {route.default_home}), so no nvcc wrapper"
    wrapper = _write_wrapper(folder, "nvcc", _nvcc_wrapper_text(launcher, nvcc, hosts))
    # torch writes the value unquoted into a shell command line: a path with spaces needs quotes.
    return (
        {route.variable: shlex.quote(str(wrapper))},
        f"nvcc ({nvcc}) goes through {cache} too, as {route.variable}={wrapper.name} (torch reads it in "
        "Ninja builds, its default)",
    )
