"""Pieces of probing shared by Windows and Linux: pure parsers, parallel commands, tools, CUDA folders.

The parsers take the text a real machine gives (a `host_config.h`, a `version.json`, the
output of `cmake --version`) and return plain values, so they are tested with real-format
inputs on any OS. Everything that touches the machine takes its paths and its command runner as
parameters, so the Windows probe runs against a fake Windows tree on Linux.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild import child_processes
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import CudaInstall, Facts, PythonInfo, Tool
from pytorch_winbuild.json_file import JsonValue, parse_json
from pytorch_winbuild.text.redact import redact_text
from pytorch_winbuild.text.terminal_text import echoed

# Version commands answer in milliseconds; the limit only guards against a hung tool.
TOOL_TIMEOUT = 5.0

# Tools whose `--version` is cheap and whose version the plan may check.
VERSION_COMMANDS: dict[str, tuple[str, ...]] = {
    "cmake": ("--version",),
    "ninja": ("--version",),
    "git": ("--version",),
    "sccache": ("--version",),
    "ccache": ("--version",),
}

# Facts key → executable names, first found wins. clcache and 7-Zip have no cheap version flag
# (clcache without arguments runs the compiler; 7-Zip prints its whole help).
TOOL_NAMES: dict[str, tuple[str, ...]] = {
    "cmake": ("cmake",),
    "ninja": ("ninja",),
    "git": ("git",),
    "clcache": ("clcache",),
    "sccache": ("sccache",),
    "ccache": ("ccache",),
    "7z": ("7z", "7zz", "7za"),
}


MIB = 1024 * 1024


@dataclass(frozen=True)
class MemoryInfo:
    """Physical memory and swap / page file, in MiB (None: could not be read)."""

    total_mib: int | None = None
    available_mib: int | None = None
    swap_total_mib: int | None = None


def machine_memory(notes: list[str] | None = None) -> MemoryInfo:
    """This machine's memory from psutil: `virtual_memory()` total and available (free plus
    reclaimable cache: what new processes can get without swapping) and `swap_memory().total`
    (on Windows the page files)."""
    import psutil

    try:
        virtual = psutil.virtual_memory()
    except (OSError, RuntimeError) as exc:
        if notes is not None:
            notes.append(f"physical memory could not be read ({exc}); MAX_JOBS will not be sized to it.")
        return MemoryInfo()
    try:
        swap: int | None = psutil.swap_memory().total // MIB
    except (OSError, RuntimeError):  # no /proc/vmstat in some containers
        swap = None
    return MemoryInfo(virtual.total // MIB, virtual.available // MIB, swap)


# ---------------------------------------------------------------- pure parsers

_DOTTED = re.compile(r"\d+\.\d+(?:\.\d+)*")


def parse_tool_version(output: str) -> str | None:
    """The first dotted number of a `--version` answer.

    'cmake version 3.27.4' → '3.27.4'; ninja's '1.13.2.git.kitware.jobserver-pipe-1' → '1.13.2';
    'git version 2.43.0.windows.1' → '2.43.0'; 'sccache 0.8.1' → '0.8.1'.
    """
    match = _DOTTED.search(output)
    return match.group(0) if match else None


def parse_cmake_version(output: str) -> str | None:
    """`cmake --version` → '3.27.4' (its first line is 'cmake version 3.27.4')."""
    match = re.search(r"cmake\d?\s+version\s+(\d+\.\d+(?:\.\d+)*)", output, re.IGNORECASE)
    return match.group(1) if match else None


def cuda_major_minor(full_version: str) -> str | None:
    """'9.0.176' → '9.0'; anything that is not a dotted number → None."""
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)*", full_version.strip())
    return f"{match.group(1)}.{match.group(2)}" if match else None


def parse_cuda_version_json(text: str) -> str | None:
    """CUDA ≥ 11.1 `version.json`: {"cuda": {"name": "CUDA SDK", "version": "11.8.0"}, ...} → '11.8.0'."""
    try:
        data: JsonValue = parse_json(text)
    except ValueError:
        return None
    cuda = data.get("cuda") if isinstance(data, dict) else None
    version = cuda.get("version") if isinstance(cuda, dict) else None
    if isinstance(version, str) and cuda_major_minor(version):
        return version.strip()
    return None


def parse_cuda_version_txt(text: str) -> str | None:
    """Older `version.txt`: 'CUDA Version 9.0.176' (patch lines may follow) → '9.0.176'."""
    match = re.search(r"^\s*CUDA Version\s+(\d+\.\d+(?:\.\d+)*)", text, re.MULTILINE)
    return match.group(1) if match else None


def parse_nvcc_version(output: str) -> str | None:
    """`nvcc --version` → the full version: '... release 13.0, V13.0.88' → '13.0.88' ('13.0' without a V part)."""
    match = re.search(r"release\s+(\d+\.\d+)(?:,\s*V(\d+\.\d+(?:\.\d+)*))?", output)
    if not match:
        return None
    return match.group(2) or match.group(1)


def parse_cudnn_version(text: str) -> str | None:
    """`cudnn_version.h` (cuDNN ≥ 8) or `cudnn.h` (older): the CUDNN_MAJOR/MINOR/PATCHLEVEL defines → '7.6.5'."""
    parts = []
    for name in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        match = re.search(rf"^\s*#\s*define\s+{name}\s+(\d+)\b", text, re.MULTILINE)
        if not match:
            return None
        parts.append(match.group(1))
    return ".".join(parts)


_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_MSVC_ERROR = re.compile(r"^#\s*error\b.*unsupported\s+(?:Microsoft\s+Visual\s+Studio|MSVC)\s+version", re.IGNORECASE)
_CONDITIONAL = re.compile(r"^#\s*(?:if|elif)\b(?P<condition>.*)$")
_MSC_COMPARISON = re.compile(r"_MSC_VER\s*(?P<op><=|>=|<|>)\s*(?P<value>\d+)")


def _preprocessor_lines(text: str) -> list[str]:
    """Non-blank lines with comments removed and continuations joined, as the preprocessor sees them."""
    text = _BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = _LINE_COMMENT.sub("", text)
    text = re.sub(r"\\\r?\n", " ", text)
    return [line.strip() for line in text.splitlines() if line.strip()]


def parse_host_config_msc_range(text: str) -> tuple[int, int] | None:
    """The `_MSC_VER` range a CUDA release accepts, from its `host_config.h`, as a half-open [low, high).

    The guard is the `#if` directly above `#error -- unsupported Microsoft Visual Studio version!`:
    `_MSC_VER < 1600 || _MSC_VER > 1911` (CUDA 9.0) gives (1600, 1912);
    `_MSC_VER < 1910 || _MSC_VER >= 1940` (CUDA 11.8) gives (1910, 1940).
    Comments are ignored, so a guard a user commented out, or the stale numbers NVIDIA leaves in
    `#endif /* ... */` comments, do not count. None when there is no complete guard.
    """
    lines = _preprocessor_lines(text)
    for index, line in enumerate(lines):
        if not _MSVC_ERROR.match(line) or index == 0:
            continue
        conditional = _CONDITIONAL.match(lines[index - 1])
        if not conditional:
            continue
        low = high = None
        for comparison in _MSC_COMPARISON.finditer(conditional.group("condition")):
            op, value = comparison.group("op"), int(comparison.group("value"))
            if op == "<":
                low = value
            elif op == "<=":
                low = value + 1
            elif op == ">":
                high = value + 1
            else:
                high = value
        if low is not None and high is not None and low < high:
            return (low, high)
    return None


_HOST_GUARDS = {
    # family → (the #error line NVIDIA's guard raises, the version macro its #if compares)
    "gcc": (re.compile(r"^#\s*error\b.*unsupported\s+GNU\s+version", re.IGNORECASE), "__GNUC__"),
    "clang": (re.compile(r"^#\s*error\b.*unsupported\s+clang\s+version", re.IGNORECASE), "__clang_major__"),
}


def parse_host_config_host_limits(text: str) -> dict[str, int]:
    """The newest GCC and clang majors nvcc accepts on Linux, from its `host_config.h`.

    Each guard is the `#if` directly above its `#error`: `#if __GNUC__ > 15` over `#error --
    unsupported GNU version!` gives {"gcc": 15}; `#if (__clang_major__ >= 21) || ...` over
    `#error -- unsupported clang version!` gives {"clang": 20}. The HOS and Grace clang guards
    (other platforms) do not count, and a family without a complete guard is left out.
    """
    lines = _preprocessor_lines(text)
    limits: dict[str, int] = {}
    for family, (error, macro) in _HOST_GUARDS.items():
        comparison = re.compile(rf"{macro}\s*(?P<op>>=|>)\s*(?P<value>\d+)")
        for index, line in enumerate(lines[1:], start=1):
            conditional = _CONDITIONAL.match(lines[index - 1]) if error.match(line) else None
            found = comparison.search(conditional.group("condition")) if conditional else None
            if found:
                value = int(found.group("value"))
                limits[family] = value if found.group("op") == ">" else value - 1
                break
    return limits


_GCC_BANNER = re.compile(r"^\S+ \([^)]*\) (?P<version>\d+(?:\.\d+){0,2})\b")
_CLANG_BANNER = re.compile(r"\bclang version (?P<version>\d+(?:\.\d+){0,2})\b")


def parse_compiler_version(output: str) -> tuple[str, str] | None:
    """(family, version) from a compiler's `--version`, or None when it is neither GCC nor clang.

    GCC prints `PROGRAM (PKGVERSION) VERSION`: 'gcc (Debian 12.2.0-14+deb12u1) 12.2.0' and
    'gcc (GCC) 13.2.1 20231011 (Red Hat 13.2.1-4)' → ('gcc', '12.2.0'), ('gcc', '13.2.1');
    clang prints '[VENDOR ]clang version 18.1.3 (...)' → ('clang', '18.1.3').
    """
    first = output.strip().splitlines()[0] if output.strip() else ""
    clang = _CLANG_BANNER.search(first)
    if clang:
        return "clang", clang.group("version")
    gcc = _GCC_BANNER.match(first)
    if gcc and "Free Software Foundation" in output:
        return "gcc", gcc.group("version")
    return None


# ---------------------------------------------------------------- commands


@dataclass(frozen=True)
class CommandResult:
    """What one command did; `error` says why it gave no answer (could not start, timed out)."""

    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0

    def problem(self) -> str:
        """One line for a probe note, credentials removed."""
        if self.error:
            return self.error
        detail = (self.stderr.strip() or self.stdout.strip()).splitlines()
        first = detail[0][:200] if detail else "no output"
        return redact_text(f"exit status {self.returncode}: {first}")


Runner = Callable[[Sequence[str], float], CommandResult]


def run_command(args: Sequence[str], timeout: float) -> CommandResult:
    """Run one command without a console window or stdin, in the tool's tree, its output bounded (what it runs is
    the machine's, untrusted: child_processes.run_bounded); never raises for a broken tool."""
    flags = 0
    if sys.platform == "win32":
        flags = subprocess.CREATE_NO_WINDOW
    try:
        completed = child_processes.run_bounded(list(args), timeout=timeout, creationflags=flags)
    except subprocess.TimeoutExpired:
        return CommandResult(None, error=f"timed out after {timeout:g} s")
    except OSError as exc:
        return CommandResult(None, error=f"could not start ({exc.strerror or exc})")
    return CommandResult(completed.returncode, completed.stdout, completed.stderr)


def ask_cmake(spec: str, label: str = "--cmake") -> tuple[str, str]:
    """The cmake at `spec` (a path, or a name on PATH) and the version it prints; ConfigurationError (exit 2)
    when it does not exist or does not answer like CMake."""
    fix = "pass the path of a cmake executable (e.g. C:\\Program Files\\CMake\\bin\\cmake.exe), X.Y, or auto."
    found = shutil.which(spec) or (spec if Path(spec).is_file() else None)
    if found is None:
        raise ConfigurationError(
            f"{label} {echoed(spec)}: no such file or command on PATH (or it is not executable).", fix=fix
        )
    result = run_command([found, "--version"], TOOL_TIMEOUT)
    version = parse_cmake_version(result.stdout) if result.ok else None
    if version is None:
        said = result.problem() if not result.ok else echoed(result.stdout.strip()) or "no output"
        raise ConfigurationError(f"{label} {echoed(spec)} did not answer like CMake ({said}).", fix=fix)
    return str(Path(found).absolute()), version


class Commands:
    """Runs commands in parallel threads, so the slowest command, not the sum, sets the probe's time."""

    def __init__(self, run: Runner) -> None:
        self._run = run
        self._pool = ThreadPoolExecutor(max_workers=12, thread_name_prefix="probe")
        self._futures: dict[str, Future[CommandResult]] = {}

    def start(self, key: str, args: Sequence[str], timeout: float = TOOL_TIMEOUT) -> None:
        self._futures[key] = self._pool.submit(self._run, args, timeout)

    def result(self, key: str) -> CommandResult | None:
        future = self._futures.get(key)
        return future.result() if future else None

    def __enter__(self) -> Commands:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)


# ---------------------------------------------------------------- small I/O helpers


def read_text(path: Path) -> str | None:
    """A small text file as UTF-8 (BOM tolerated), or None when it is absent or unreadable."""
    try:
        return path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return None


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def clean_env_path(value: str | None) -> str | None:
    """An environment value that names a folder, without the quotes users sometimes add."""
    if value is None:
        return None
    value = value.strip().strip('"').strip()
    return value or None


def path_key(path: Path) -> str:
    """Compare folders the way the running OS does (case-insensitive on Windows)."""
    return os.path.normcase(os.path.normpath(str(path)))


def python_info() -> PythonInfo:
    """The interpreter running pytorch-winbuild, which is the one that will run setup.py."""
    return PythonInfo(
        version=platform.python_version(),
        bits=struct.calcsize("P") * 8,
        executable=sys.executable,
        implementation=platform.python_implementation(),
    )


# ---------------------------------------------------------------- tools


def start_tool_versions(tool_paths: Mapping[str, Path], commands: Commands) -> None:
    for name, path in tool_paths.items():
        if name in VERSION_COMMANDS:
            commands.start(f"tool:{name}", [str(path), *VERSION_COMMANDS[name]])


def collect_tools(tool_paths: Mapping[str, Path], commands: Commands, notes: list[str]) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    for name, path in tool_paths.items():
        version = None
        result = commands.result(f"tool:{name}")
        if result is not None:
            if result.ok:
                output = result.stdout + "\n" + result.stderr
                version = parse_cmake_version(output) if name == "cmake" else parse_tool_version(output)
            if version is None:
                notes.append(
                    f"{name} at {path} did not report its version "
                    f"({result.problem() if not result.ok else 'unrecognised output'})."
                )
        tools[name] = Tool(path=str(path), version=version)
    return tools


# ---------------------------------------------------------------- CUDA folders


@dataclass(frozen=True)
class CudaFolder:
    """A folder that holds a CUDA toolkit, before its version is known."""

    root: Path
    nvcc: Path
    env_var: str | None
    full_version: str | None  # from version.json / version.txt; None means ask nvcc


def cuda_version_from_files(root: Path) -> str | None:
    text = read_text(root / "version.json")
    version = parse_cuda_version_json(text) if text is not None else None
    if version is None:
        text = read_text(root / "version.txt")
        version = parse_cuda_version_txt(text) if text is not None else None
    return version


def cuda_folder(root: Path, nvcc_name: str, env_var: str | None) -> CudaFolder | None:
    """A CUDA toolkit folder has nvcc and the runtime headers; anything else is a leftover."""
    nvcc = root / "bin" / nvcc_name
    if not is_file(nvcc) or not is_file(root / "include" / "cuda_runtime.h"):
        return None
    return CudaFolder(root=root, nvcc=nvcc, env_var=env_var, full_version=cuda_version_from_files(root))


def start_nvcc_versions(folders: Iterable[CudaFolder], commands: Commands) -> None:
    for folder in folders:
        if folder.full_version is None:
            commands.start(f"nvcc:{folder.root}", [str(folder.nvcc), "--version"])


def cuda_versions(folder: CudaFolder, commands: Commands, notes: list[str]) -> tuple[str, str] | None:
    """(MAJOR.MINOR, full version) from the version files, else from `nvcc --version`; None with a note."""
    full = folder.full_version
    if full is None:
        result = commands.result(f"nvcc:{folder.root}")
        full = parse_nvcc_version(result.stdout) if result is not None and result.ok else None
        if full is None:
            reason = (
                result.problem()
                if result is not None and not result.ok
                else "no version.json, version.txt or readable `nvcc --version`"
            )
            notes.append(f"CUDA at {folder.root} ignored: its version is unknown ({reason}).")
            return None
    version = cuda_major_minor(full)
    return (version, full) if version else None


def nvtx3_dir(root: Path) -> Path | None:
    """CUDA ≥ 12 ships NVTX 3 as headers only, under its own include folder."""
    folder = root / "include" / "nvtx3"
    return folder if is_dir(folder) else None


def find_cudnn(include_dirs: Iterable[Path]) -> tuple[str, Path] | None:
    """(version, the include folder holding its header) of the first cuDNN found."""
    for include in include_dirs:
        for header in ("cudnn_version.h", "cudnn.h"):
            text = read_text(include / header)
            version = parse_cudnn_version(text) if text is not None else None
            if version:
                return version, include
    return None


def cuda_install(
    folder: CudaFolder,
    versions: tuple[str, str],
    *,
    msc_range: tuple[int, int] | None,
    nvtx: Path | None,
    cudnn_include_dir: str | None,
) -> CudaInstall:
    includes = [folder.root / "include"]
    if cudnn_include_dir:
        includes.append(Path(cudnn_include_dir))
    cudnn = find_cudnn(includes)
    return CudaInstall(
        version=versions[0],
        path=str(folder.root),
        full_version=versions[1],
        env_var=folder.env_var,
        msc_range=msc_range,
        nvtx=str(nvtx) if nvtx else None,
        cudnn=cudnn[0] if cudnn else None,
        nvcc=str(folder.nvcc),
        cudnn_include=str(cudnn[1]) if cudnn else None,
    )


def version_key(version: str) -> tuple[int, ...]:
    """Sort '9.0' before '10.0' and '14.11.25503' before '14.16.27023'."""
    return tuple(int(part) for part in re.findall(r"\d+", version))


@dataclass(frozen=True)
class ProbeReport:
    """The facts of a machine plus what the probe could not make sense of, for `invoke doctor` to show."""

    facts: Facts
    notes: tuple[str, ...] = ()


def finish_notes(notes: Iterable[str]) -> tuple[str, ...]:
    """Notes quote paths and tool output from the machine: keep credentials out of them too."""
    return tuple(redact_text(note) for note in notes)
