"""Probe this machine: the only code that looks at a machine; everything after it reads `Facts`.

`probe()` answers for the machine it runs on: Windows through probe_windows.py, Linux here (the
same facts without a Visual Studio layer, so `invoke doctor` reports a Linux machine honestly).
`probe_report()` also returns the notes — what the probe found but could not use — for doctor.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.facts.model import Facts, HostCompiler, PythonInfo
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.facts.probe_common import (
    TOOL_NAMES,
    Commands,
    CudaFolder,
    MemoryInfo,
    ProbeReport,
    Runner,
    clean_env_path,
    collect_tools,
    cuda_folder,
    cuda_install,
    cuda_versions,
    finish_notes,
    is_file,
    machine_memory,
    nvtx3_dir,
    parse_compiler_version,
    parse_host_config_host_limits,
    read_text,
    run_command,
    start_nvcc_versions,
    start_tool_versions,
    version_key,
)
from pytorch_winbuild.facts.probe_gpu import GpuProbe, NvmlReader, read_nvml
from pytorch_winbuild.facts.probe_pythons import WinregPythonRegistry, search_linux
from pytorch_winbuild.facts.version_cache import VersionCache
from pytorch_winbuild.paths import default_cache_dir
from pytorch_winbuild.text.redact import redact_text

__all__ = ["ProbeReport", "probe", "probe_linux", "probe_report"]


def linux_cuda_folders(environ: Mapping[str, str], usr_local: Path, notes: list[str]) -> list[CudaFolder]:
    """CUDA_HOME, CUDA_PATH, /usr/local/cuda*, and the toolkit around nvcc on PATH, each folder once."""
    candidates: list[Path] = []
    for name in ("CUDA_HOME", "CUDA_PATH"):
        value = clean_env_path(environ.get(name))
        if value:
            candidates.append(Path(value))
    candidates.append(usr_local / "cuda")
    with contextlib.suppress(OSError):
        candidates.extend(sorted(usr_local.glob("cuda-*"), key=lambda p: version_key(p.name)))
    nvcc_on_path = shutil.which("nvcc", path=environ.get("PATH", os.defpath))
    if nvcc_on_path:
        candidates.append(Path(os.path.realpath(nvcc_on_path)).parent.parent)

    seen: set[str] = set()
    folders = []
    for root in candidates:
        real = os.path.realpath(root)
        if real in seen:
            continue
        seen.add(real)
        folder = cuda_folder(root, "nvcc", None)
        if folder is not None:
            folders.append(folder)
    if nvcc_on_path and not folders:
        notes.append(
            f"nvcc is on PATH at {nvcc_on_path}, but no CUDA toolkit folder (bin/nvcc with "
            "include/cuda_runtime.h) was found around it."
        )
    return folders


def linux_nvtx(root: Path, major: int) -> Path | None:
    """CUDA ≥ 12: the header-only nvtx3 folder; older toolkits carry libnvToolsExt in their own lib64."""
    if major >= 12:
        return nvtx3_dir(root)
    return root if is_file(root / "lib64" / "libnvToolsExt.so") else None


# Compilers a plan may hand nvcc instead of the default one (the newest it accepts wins).
_ALTERNATIVE_COMPILER = re.compile(r"(?:g\+\+|clang\+\+)(?:-\d+)?")


def linux_host_compilers(environ: Mapping[str, str], notes: list[str]) -> list[tuple[str, Path]]:
    """(found_as, path) of every compiler nvcc could be given: CUDAHOSTCXX and CC from the
    environment, `gcc` (nvcc's own default) and `cc` (FindCUDA's, through CMake's C compiler) on
    PATH, and the versioned g++-N / clang++(-N) on PATH a plan may choose instead."""
    search = environ.get("PATH", os.defpath)
    found: list[tuple[str, Path]] = []
    for variable in ("CUDAHOSTCXX", "CC"):
        words = shlex.split(environ.get(variable, ""), posix=True) if environ.get(variable, "").strip() else []
        located = shutil.which(words[0], path=search) if words else None
        if located:
            found.append((variable, Path(located)))
        elif words:
            notes.append(
                f"{variable} is set to {words[0]!r}, which is not an executable file (nor one on PATH); the build "
                f"will fail to start it as a compiler: point {variable} at one, or unset it."
            )
    for name in ("gcc", "cc"):
        located = shutil.which(name, path=search)
        if located:
            found.append((name, Path(located)))
    seen: set[str] = set()
    for folder in search.split(os.pathsep):
        with contextlib.suppress(OSError):
            for name in sorted(os.listdir(folder or ".")):
                if name not in seen and _ALTERNATIVE_COMPILER.fullmatch(name):
                    located = shutil.which(name, path=search)
                    if located:
                        seen.add(name)
                        found.append((name, Path(located)))
    return found


def host_config_limits(root: Path) -> dict[str, int]:
    text = read_text(root / "include" / "crt" / "host_config.h") or read_text(root / "include" / "host_config.h")
    return parse_host_config_host_limits(text) if text is not None else {}


def collect_host_compilers(
    compilers: list[tuple[str, Path]], commands: Commands, notes: list[str]
) -> tuple[HostCompiler, ...]:
    result = []
    for found_as, path in compilers:
        answer = commands.result(f"compiler:{path}")
        parsed = parse_compiler_version(answer.stdout) if answer is not None and answer.ok else None
        if parsed is None:
            why = answer.problem() if answer is not None and not answer.ok else "not GCC or clang"
            notes.append(f"{found_as} at {path} is not a host compiler nvcc is checked against ({why}).")
            continue
        result.append(HostCompiler(found_as=found_as, path=str(path), family=parsed[0], version=parsed[1]))
    return tuple(result)


def probe_linux(
    environ: Mapping[str, str],
    *,
    run: Runner = run_command,
    python: PythonInfo | None = None,
    cpu_count: int | None = None,
    usr_local: Path = Path("/usr/local"),
    nvml: NvmlReader | None = None,
    memory: MemoryInfo | None = None,
    gpus: bool = True,
) -> ProbeReport:
    """Facts of a Linux machine: Pythons, tools, CUDA and GPUs; no Visual Studio, no MSVC range.

    `python` describes the running interpreter (default: this one, asked in-process); the other Pythons
    are found through PYENV_ROOT (or HOME), conda and PATH (probe_pythons.py). `nvml` reads this
    machine's driver in-process, so only the real probe passes it. `gpus` False leaves the GPUs
    unknown (None) without asking the driver.
    """
    environ = {name: redact_text(value) for name, value in environ.items()}  # no credential gets past this line
    notes: list[str] = []
    search = environ.get("PATH", os.defpath)
    tool_paths: dict[str, Path] = {}
    for key, names in TOOL_NAMES.items():
        found = next((path for path in (shutil.which(name, path=search) for name in names) if path), None)
        if found:
            tool_paths[key] = Path(found)
    smi = shutil.which("nvidia-smi", path=search)
    with Commands(run) as commands:
        gpu_probe = GpuProbe(nvml, Path(smi) if smi else None, commands, ask=gpus)
        start_tool_versions(tool_paths, commands)
        folders = linux_cuda_folders(environ, usr_local, notes)
        start_nvcc_versions(folders, commands)
        compilers = linux_host_compilers(environ, notes)
        for path in {path for _, path in compilers}:
            commands.start(f"compiler:{path}", [str(path), "--version"])
        python_search = search_linux(environ, commands, python)
        cudnn_include = clean_env_path(environ.get("CUDNN_INCLUDE_DIR"))
        cuda = []
        for folder in folders:
            versions = cuda_versions(folder, commands, notes)
            if versions is not None:
                major = int(versions[0].split(".")[0])
                limits = host_config_limits(folder.root)
                install = cuda_install(
                    folder,
                    versions,
                    msc_range=None,
                    nvtx=linux_nvtx(folder.root, major),
                    cudnn_include_dir=cudnn_include,
                )
                cuda.append(replace(install, gcc_max=limits.get("gcc"), clang_max=limits.get("clang")))
        tools = collect_tools(tool_paths, commands, notes)
        host_compilers = collect_host_compilers(compilers, commands, notes)
        gpu_facts = gpu_probe.result(notes)
        pythons = python_search.result(notes)
    cuda_path = clean_env_path(environ.get("CUDA_PATH"))
    memory = memory if memory is not None else machine_memory(notes)
    facts = Facts(
        os=Platform.LINUX,
        python=python_search.running,
        pythons=pythons,
        cuda=tuple(sorted(cuda, key=lambda c: version_key(c.version))),
        cuda_path=cuda_path,
        tools=tools,
        temp_dir=clean_env_path(environ.get("TMPDIR")) or "/tmp",
        cpu_count=cpu_count if cpu_count is not None else os.cpu_count(),
        memory_total_mib=memory.total_mib,
        memory_available_mib=memory.available_mib,
        swap_total_mib=memory.swap_total_mib,
        gpus=gpu_facts.gpus,
        driver_version=gpu_facts.driver_version,
        driver_cuda=gpu_facts.driver_cuda,
        host_compilers=host_compilers,
    )
    return ProbeReport(facts=facts, notes=finish_notes(notes))


def probe_report(environ: Mapping[str, str] | None = None, *, gpus: bool = True) -> ProbeReport:
    """Facts and notes for the machine this runs on; `gpus` False: the GPUs are not asked for.

    Tools' version answers and the Pythons' descriptions are kept in the cache folder (version_cache.py):
    an unchanged cmake, ninja, git, nvcc or Python is not started again."""
    environ = os.environ if environ is None else environ
    versions = VersionCache(default_cache_dir() / "probe" / "versions.json")
    if sys.platform == "win32":
        from pytorch_winbuild.facts.probe_windows import WindowsRegistry, probe_windows  # not needed on Linux

        report = probe_windows(
            environ,
            registry=WindowsRegistry(),
            python_registry=WinregPythonRegistry(),
            nvml=read_nvml,
            run=versions,
            gpus=gpus,
        )
    elif sys.platform.startswith("linux"):
        report = probe_linux(environ, nvml=read_nvml, run=versions, gpus=gpus)
    else:
        raise ToolchainError(
            f"pytorch-winbuild probes Windows and Linux machines, not {sys.platform}.",
            fix="run `invoke doctor --json --output facts.json` on the Windows machine and pass that file with --host "
            "here.",
        )
    versions.save()
    return report


def probe(environ: Mapping[str, str] | None = None, *, gpus: bool = True) -> Facts:
    """What is installed on this machine, as plain data (see facts.py)."""
    return probe_report(environ, gpus=gpus).facts
