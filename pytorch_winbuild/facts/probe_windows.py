"""Probe a Windows machine: Visual Studio (vswhere, VS140COMNTOOLS), CUDA, NVTX, cuDNN, tools, registry.

Every path is built from the environment it is given, with the running OS's pathlib, and the
registry and command runner are parameters: on Linux the tests point `ProgramFiles(x86)` at a
temporary tree laid out like a real Windows install and run the same code.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytorch_winbuild.facts.model import CudaInstall, Facts, PythonInfo, VisualStudio
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.facts.probe_common import (
    TOOL_NAMES,
    CommandResult,
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
    is_dir,
    is_file,
    machine_memory,
    nvtx3_dir,
    parse_host_config_msc_range,
    path_key,
    read_text,
    run_command,
    start_nvcc_versions,
    start_tool_versions,
    version_key,
)
from pytorch_winbuild.facts.probe_gpu import GpuProbe, NvmlReader
from pytorch_winbuild.facts.probe_pythons import PythonRegistry, PythonSearch, search_windows
from pytorch_winbuild.json_file import JsonValue, parse_json
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.text.redact import redact_text

# vswhere reads the installer's state; a cold start on a slow disk takes a few seconds.
VSWHERE_TIMEOUT = 15.0

VC_TOOLS_COMPONENT = "Microsoft.VisualStudio.Component.VC.Tools.x86.x64"

# `-products *` is what lists Build Tools instances; `-requires` keeps only those with a compiler.
VSWHERE_ARGS = ("-products", "*", "-requires", VC_TOOLS_COMPONENT, "-prerelease", "-format", "json", "-utf8", "-nologo")

VCVARS_SCRIPTS = ("vcvarsall.bat", "vcvarsx86_amd64.bat", "vcvars64.bat", "vcvars32.bat")

# Where VS 2015 keeps each script, relative to its VC folder.
VS2015_VCVARS = {
    "vcvarsall.bat": ("vcvarsall.bat",),
    "vcvarsx86_amd64.bat": ("bin", "x86_amd64", "vcvarsx86_amd64.bat"),
    "vcvars64.bat": ("bin", "amd64", "vcvars64.bat"),
    "vcvars32.bat": ("bin", "vcvars32.bat"),
}

# VS 2015 records its edition only in the registry (32-bit view), as documented by Microsoft.
VS2015_EDITION_KEYS = {
    "Enterprise": r"SOFTWARE\Microsoft\DevDiv\vs\Servicing\14.0\enterprise",
    "Professional": r"SOFTWARE\Microsoft\DevDiv\vs\Servicing\14.0\professional",
    "Community": r"SOFTWARE\Microsoft\DevDiv\vs\Servicing\14.0\community",
}

LONG_PATHS_KEY = r"SYSTEM\CurrentControlSet\Control\FileSystem"

# catalog.productLineVersion is a year up to VS 2022; VS 2026 reports "18". Map the major version then.
PRODUCT_LINES = {"15": "2017", "16": "2019", "17": "2022", "18": "2026"}

_TOOLSET = re.compile(r"14\.\d+\.\d+")
_CUDA_PATH_VAR = re.compile(r"CUDA_PATH_V\d+_\d+")


# ---------------------------------------------------------------- vswhere (pure)


@dataclass(frozen=True)
class VswhereInstance:
    """One instance as vswhere describes it, before its folders are inspected."""

    path: str
    version: str
    product_line: str
    product: str
    display_name: str
    prerelease: bool


def product_line(catalog_line: object, installation_version: str) -> str:
    if isinstance(catalog_line, str) and re.fullmatch(r"20\d\d", catalog_line):
        return catalog_line
    major = installation_version.split(".")[0]
    return PRODUCT_LINES.get(major, catalog_line if isinstance(catalog_line, str) and catalog_line else major)


def parse_vswhere(text: str) -> list[VswhereInstance]:
    """`vswhere -format json` output → instances; ValueError when it is not a JSON list.

    Entries without an installation path (vswhere's legacy entries) are skipped.
    """
    start = re.search(r"^\s*\[", text.lstrip("\ufeff"), re.MULTILINE)  # after a logo, if vswhere printed one
    if start is None:
        raise ValueError("no JSON list in vswhere's output")
    data: JsonValue = parse_json(text.lstrip("\ufeff")[start.start() :])
    if not isinstance(data, list):
        raise ValueError("vswhere's JSON is not a list")
    instances = []
    for entry in data:
        if not isinstance(entry, dict):
            continue
        path = entry.get("installationPath")
        version = entry.get("installationVersion")
        if not isinstance(path, str) or not path or not isinstance(version, str) or not version:
            continue
        catalog = entry.get("catalog")
        catalog = catalog if isinstance(catalog, dict) else {}
        product_id = entry.get("productId")
        product_id = product_id if isinstance(product_id, str) else ""
        display_name = entry.get("displayName")
        display_name = display_name if isinstance(display_name, str) else ""
        instances.append(
            VswhereInstance(
                path=path,
                version=version,
                product_line=product_line(catalog.get("productLineVersion"), version),
                product=product_id.rsplit(".", 1)[-1] if product_id else "",
                display_name=display_name,
                prerelease=entry.get("isPrerelease") is True,
            )
        )
    return instances


# ---------------------------------------------------------------- machine access


class Registry(Protocol):
    """Read-only HKEY_LOCAL_MACHINE."""

    def value(self, key: str, name: str) -> object | None:
        """The value, or None when the key or value is absent."""

    def has_key(self, key: str) -> bool:
        """Whether the key exists in the 64-bit or the 32-bit view."""


class WindowsRegistry:
    """The real registry, through winreg (Windows only)."""

    def value(self, key: str, name: str) -> object | None:
        if sys.platform != "win32":  # what `import winreg` raises elsewhere; mypy then checks the rest for win32 only
            raise ModuleNotFoundError("No module named 'winreg'", name="winreg")
        import winreg

        try:
            with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, key, 0, winreg.KEY_READ | winreg.KEY_WOW64_64KEY) as handle:
                return winreg.QueryValueEx(handle, name)[0]
        except OSError:
            return None

    def has_key(self, key: str) -> bool:
        if sys.platform != "win32":  # what `import winreg` raises elsewhere; mypy then checks the rest for win32 only
            raise ModuleNotFoundError("No module named 'winreg'", name="winreg")
        import winreg

        for view in (winreg.KEY_WOW64_64KEY, winreg.KEY_WOW64_32KEY):
            try:
                with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, key, 0, winreg.KEY_READ | view):
                    return True
            except OSError:
                continue
        return False


class WindowsEnvironment:
    """Environment variables looked up the Windows way: names are case-insensitive.

    Values are redacted on the way in, so a credential in, say, CUDA_PATH cannot reach a fact or a note.
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._values = {name.upper(): redact_text(value) for name, value in environ.items()}

    def get(self, name: str) -> str | None:
        return self._values.get(name.upper())

    def folder(self, name: str) -> Path | None:
        value = clean_env_path(self.get(name))
        return Path(value) if value else None

    def names(self) -> list[str]:
        return sorted(self._values)

    def program_files(self) -> Path | None:
        """The 64-bit Program Files: a 32-bit Python on 64-bit Windows sees `ProgramFiles` as the x86 one."""
        return self.folder("ProgramW6432") or self.folder("ProgramFiles")

    def program_files_x86(self) -> Path | None:
        """32-bit Windows has no `ProgramFiles(x86)`: everything is under `ProgramFiles` there."""
        return self.folder("ProgramFiles(x86)") or self.program_files()

    def search_path(self, filename: str) -> Path | None:
        """The first PATH folder holding `filename`, as cmd.exe would find it."""
        for entry in (self.get("PATH") or "").split(";"):
            folder = clean_env_path(entry)
            if folder and is_file(Path(folder) / filename):
                return Path(folder) / filename
        return None


# ---------------------------------------------------------------- Visual Studio


def find_vswhere(env: WindowsEnvironment) -> Path | None:
    base = env.program_files_x86()
    if base is not None:
        installed = base / "Microsoft Visual Studio" / "Installer" / "vswhere.exe"
        if is_file(installed):
            return installed
    return env.search_path("vswhere.exe")


def vswhere_instances(vswhere: Path | None, result: CommandResult | None, notes: list[str]) -> list[VswhereInstance]:
    """A failing or confused vswhere means no VS 2017+ instances and a note, never a crash."""
    if vswhere is None:
        notes.append(
            "vswhere.exe was not found (it comes with the Visual Studio Installer, in "
            "%ProgramFiles(x86)%\\Microsoft Visual Studio\\Installer): Visual Studio 2017 and newer cannot be listed."
        )
        return []
    if result is None or not result.ok:
        problem = result.problem() if result is not None else "did not run"
        notes.append(f"vswhere.exe at {vswhere} failed ({problem}): Visual Studio 2017 and newer cannot be listed.")
        return []
    try:
        return parse_vswhere(result.stdout)
    except ValueError as exc:
        notes.append(
            f"vswhere.exe at {vswhere} returned output that is not its JSON list ({exc}): Visual Studio 2017 "
            "and newer cannot be listed."
        )
        return []


def toolset_folders(root: Path) -> tuple[str, ...]:
    msvc = root / "VC" / "Tools" / "MSVC"
    try:
        names = [child.name for child in msvc.iterdir() if child.is_dir() and _TOOLSET.fullmatch(child.name)]
    except OSError:
        return ()
    return tuple(sorted(names, key=version_key))


def inspect_visual_studio(instance: VswhereInstance, notes: list[str]) -> VisualStudio | None:
    """Read an instance's toolsets, default toolset and vcvars scripts off its folders."""
    root = Path(instance.path)
    if not is_dir(root):
        notes.append(
            f"vswhere lists {instance.display_name or 'an instance'} at {root}, but that folder does not exist."
        )
        return None
    build = root / "VC" / "Auxiliary" / "Build"
    default_text = read_text(build / "Microsoft.VCToolsVersion.default.txt")
    default = default_text.strip() if default_text is not None else None
    toolsets = toolset_folders(root)
    if not toolsets:
        notes.append(f"{instance.display_name or root} has no toolset folders under VC\\Tools\\MSVC.")
    display_name = instance.display_name
    if instance.prerelease and "preview" not in display_name.lower():
        display_name = f"{display_name} (Preview)".strip()
    return VisualStudio(
        product_line=instance.product_line,
        version=instance.version,
        product=instance.product,
        path=str(root),
        toolsets=toolsets,
        vcvars={name: str(build / name) for name in VCVARS_SCRIPTS if is_file(build / name)},
        default_toolset=default if default and _TOOLSET.fullmatch(default) else None,
        display_name=display_name,
    )


def vs2015_edition(root: Path, registry: Registry | None) -> str:
    if registry is not None:
        for edition, key in VS2015_EDITION_KEYS.items():
            if registry.has_key(key):
                return edition
    if not is_file(root / "Common7" / "IDE" / "devenv.exe"):
        return "BuildTools"
    return "Unknown"


def visual_studio_2015(env: WindowsEnvironment, registry: Registry | None, notes: list[str]) -> VisualStudio | None:
    """VS 2015 predates vswhere: VS140COMNTOOLS (…\\Common7\\Tools\\) or its default folder."""
    candidates = []
    comntools = env.folder("VS140COMNTOOLS")
    if comntools is not None:
        candidates.append(comntools.parent.parent)
    base = env.program_files_x86()
    if base is not None:
        candidates.append(base / "Microsoft Visual Studio 14.0")
    for root in candidates:
        vc = root / "VC"
        if not is_file(vc / "vcvarsall.bat"):
            continue
        edition = vs2015_edition(root, registry)
        cl_x64 = vc / "bin" / "amd64" / "cl.exe"
        display = {"BuildTools": "Visual C++ Build Tools 2015", "Unknown": "Visual Studio 2015"}.get(
            edition, f"Visual Studio {edition} 2015"
        )
        return VisualStudio(
            product_line="2015",
            version="14.0",
            product=edition,
            path=str(root),
            toolsets=("14.0",),
            vcvars={
                name: str(vc.joinpath(*parts)) for name, parts in VS2015_VCVARS.items() if is_file(vc.joinpath(*parts))
            },
            default_toolset="14.0",
            cl_x64=str(cl_x64) if is_file(cl_x64) else None,
            display_name=display,
        )
    if comntools is not None:
        notes.append(
            f"VS140COMNTOOLS is {comntools}, but there is no ..\\..\\VC\\vcvarsall.bat next to it: Visual "
            "Studio 2015 is not usable."
        )
    return None


# ---------------------------------------------------------------- CUDA


def windows_cuda_folders(env: WindowsEnvironment, notes: list[str]) -> list[CudaFolder]:
    """CUDA_PATH, every CUDA_PATH_V<maj>_<min>, and the installer's default folder, each folder once."""
    candidates: dict[str, tuple[Path, str | None, str]] = {}  # folder key → (folder, CUDA_PATH_V* name, who named it)

    def add(root: Path, env_var: str | None, source: str) -> None:
        key = path_key(root)
        if key not in candidates:
            candidates[key] = (root, env_var, source)
        elif env_var and candidates[key][1] is None:
            candidates[key] = (candidates[key][0], env_var, candidates[key][2])

    cuda_path = env.folder("CUDA_PATH")
    if cuda_path is not None:
        add(cuda_path, None, "CUDA_PATH")
    for name in sorted((n for n in env.names() if _CUDA_PATH_VAR.fullmatch(n)), key=version_key):
        root = env.folder(name)
        if root is not None:
            add(root, name, name)
    base = env.program_files()
    if base is not None:
        default = base / "NVIDIA GPU Computing Toolkit" / "CUDA"
        try:
            children = sorted(
                (child for child in default.iterdir() if child.is_dir() and child.name.startswith("v")),
                key=lambda p: version_key(p.name),
            )
        except OSError:
            children = []
        for child in children:
            add(child, None, str(default))

    folders = []
    for root, env_var, source in candidates.values():
        folder = cuda_folder(root, "nvcc.exe", env_var)
        if folder is None:
            notes.append(
                f"{source} names {root}, which is not a CUDA toolkit (no bin\\nvcc.exe and "
                "include\\cuda_runtime.h); ignored."
            )
        else:
            folders.append(folder)
    return folders


def host_config_range(root: Path) -> tuple[int, int] | None:
    """CUDA ≥ 9 keeps the guard in include\\crt\\host_config.h; CUDA 8 in include\\host_config.h."""
    for header in (root / "include" / "crt" / "host_config.h", root / "include" / "host_config.h"):
        text = read_text(header)
        found = parse_host_config_msc_range(text) if text is not None else None
        if found:
            return found
    return None


def nvtoolsext_dir(env: WindowsEnvironment) -> Path | None:
    """NvToolsExt (CUDA ≤ 11's "Visual Studio Integration"): NVTOOLSEXT_PATH or its default folder, with
    its x64 library."""
    candidates = [env.folder("NVTOOLSEXT_PATH")]
    base = env.program_files()
    if base is not None:
        candidates.append(base / "NVIDIA Corporation" / "NvToolsExt")
    for folder in candidates:
        if folder is not None and is_file(folder / "lib" / "x64" / "nvToolsExt64_1.lib"):
            return folder
    return None


# ---------------------------------------------------------------- tools and system


def windows_tools(env: WindowsEnvironment) -> dict[str, Path]:
    """Tools on PATH; 7-Zip also in its install folder, which its installer never adds to PATH."""
    found: dict[str, Path] = {}
    for key, names in TOOL_NAMES.items():
        for name in names:
            path = env.search_path(f"{name}.exe")
            if path is not None:
                found[key] = path
                break
    if "7z" not in found:
        for base in (env.program_files(), env.folder("ProgramFiles(x86)")):
            if base is not None and is_file(base / "7-Zip" / "7z.exe"):
                found["7z"] = base / "7-Zip" / "7z.exe"
                break
    return found


def nvidia_smi(env: WindowsEnvironment) -> Path | None:
    """PATH, then where drivers install it: System32 (DCH drivers), then NVSMI (older drivers)."""
    candidates = [env.search_path("nvidia-smi.exe")]
    system_root = env.folder("SystemRoot")
    if system_root is not None:
        candidates.append(system_root / "System32" / "nvidia-smi.exe")
    program_files = env.program_files()
    if program_files is not None:
        candidates.append(program_files / "NVIDIA Corporation" / "NVSMI" / "nvidia-smi.exe")
    return next((path for path in candidates if path is not None and is_file(path)), None)


def py_launcher(env: WindowsEnvironment) -> Path | None:
    """py.exe on PATH, else where its installers put it: %SystemRoot% (all users) or
    %LOCALAPPDATA%\\Programs\\Python\\Launcher (just for me)."""
    found = env.search_path("py.exe")
    if found is not None:
        return found
    system_root, local = env.folder("SystemRoot"), env.folder("LOCALAPPDATA")
    candidates = [
        system_root / "py.exe" if system_root else None,
        local / "Programs" / "Python" / "Launcher" / "py.exe" if local else None,
    ]
    return next((path for path in candidates if path is not None and is_file(path)), None)


def conda_executable(env: WindowsEnvironment) -> Path | None:
    """CONDA_EXE (set by conda's activation), else conda.exe or condabin's conda.bat on PATH."""
    conda = env.folder("CONDA_EXE")
    if conda is not None and is_file(conda):
        return conda
    return env.search_path("conda.exe") or env.search_path("conda.bat")


def start_python_search(
    env: WindowsEnvironment,
    commands: Commands,
    running: PythonInfo | None,
    registry: PythonRegistry | None,
    notes: list[str],
) -> PythonSearch:
    """The Python search on this machine's PATH folders, py launcher and conda (probe_pythons.py)."""
    folders = [clean_env_path(entry) for entry in (env.get("PATH") or "").split(";")]
    return search_windows(
        commands,
        running=running,
        registry=registry,
        notes=notes,
        py_launcher=py_launcher(env),
        conda=conda_executable(env),
        path_folders=[Path(folder) for folder in folders if folder],
    )


def long_paths_enabled(registry: Registry | None) -> bool | None:
    """An absent LongPathsEnabled value is Windows' default: disabled. No registry → unknown."""
    if registry is None:
        return None
    value = registry.value(LONG_PATHS_KEY, "LongPathsEnabled")
    return bool(value) if isinstance(value, int) else False


def windows_cuda_installs(
    folders: list[CudaFolder], env: WindowsEnvironment, nvtoolsext: Path | None, commands: Commands, notes: list[str]
) -> list[CudaInstall]:
    """The toolkits in `folders` whose version is known, each with the NVTX and cuDNN headers it builds with."""
    cudnn_include = clean_env_path(env.get("CUDNN_INCLUDE_DIR"))
    cuda = []
    for folder in folders:
        versions = cuda_versions(folder, commands, notes)
        if versions is None:
            continue
        major = int(versions[0].split(".")[0])
        cuda.append(
            cuda_install(
                folder,
                versions,
                msc_range=host_config_range(folder.root),
                nvtx=nvtoolsext if major <= 11 else nvtx3_dir(folder.root),
                cudnn_include_dir=cudnn_include,
            )
        )
    return cuda


def known_visual_studio(instances: list[VswhereInstance], notes: list[str]) -> list[VisualStudio]:
    """The vswhere instances, oldest first, that inspect cleanly and whose product line build_config knows."""
    visual_studio = []
    known_lines = load_knowledge().products
    for instance in sorted(instances, key=lambda i: version_key(i.version)):
        inspected = inspect_visual_studio(instance, notes)
        if inspected is not None and inspected.product_line not in known_lines:
            notes.append(
                f"{inspected.label} at {inspected.path} ignored: pytorch-winbuild does not know Visual "
                f"Studio {inspected.product_line!r} yet (build_config/visual_studio.toml knows "
                f"{', '.join(known_lines)})."
            )
        elif inspected is not None:
            visual_studio.append(inspected)
    return visual_studio


def probe_windows(
    environ: Mapping[str, str],
    *,
    run: Runner = run_command,
    registry: Registry | None = None,
    python_registry: PythonRegistry | None = None,
    python: PythonInfo | None = None,
    cpu_count: int | None = None,
    nvml: NvmlReader | None = None,
    memory: MemoryInfo | None = None,
    gpus: bool = True,
) -> ProbeReport:
    """Facts of the Windows machine that `environ` and `registry` describe.

    `python` and `cpu_count` default to the running interpreter and machine; the other Pythons are found
    through `python_registry` (PEP 514; None: not read), the py launcher, conda and PATH. `nvml` reads this
    machine's driver in-process, so only the real probe passes it. `gpus` False leaves the GPUs
    unknown (None) without asking the driver.
    """
    notes: list[str] = []
    env = WindowsEnvironment(environ)
    vswhere = find_vswhere(env)
    tool_paths = windows_tools(env)
    with Commands(run) as commands:
        gpu_probe = GpuProbe(nvml, nvidia_smi(env), commands, ask=gpus)
        if vswhere is not None:
            commands.start("vswhere", [str(vswhere), *VSWHERE_ARGS], VSWHERE_TIMEOUT)
        start_tool_versions(tool_paths, commands)
        folders = windows_cuda_folders(env, notes)
        start_nvcc_versions(folders, commands)
        python_search = start_python_search(env, commands, python, python_registry, notes)

        vs2015 = visual_studio_2015(env, registry, notes)
        nvtoolsext = nvtoolsext_dir(env)
        cuda = windows_cuda_installs(folders, env, nvtoolsext, commands, notes)
        tools = collect_tools(tool_paths, commands, notes)
        instances = vswhere_instances(vswhere, commands.result("vswhere"), notes)
        gpu_facts = gpu_probe.result(notes)
        pythons = python_search.result(notes)

    visual_studio = [vs2015] if vs2015 is not None else []
    visual_studio += known_visual_studio(instances, notes)
    cuda_path = clean_env_path(env.get("CUDA_PATH"))
    temp_dir = clean_env_path(env.get("TEMP")) or clean_env_path(env.get("TMP"))
    memory = memory if memory is not None else machine_memory(notes)
    facts = Facts(
        os=Platform.WINDOWS,
        python=python_search.running,
        pythons=pythons,
        visual_studio=tuple(visual_studio),
        cuda=tuple(sorted(cuda, key=lambda c: version_key(c.version))),
        cuda_path=cuda_path,
        tools=tools,
        long_paths_enabled=long_paths_enabled(registry),
        temp_dir=temp_dir,
        nvtoolsext=str(nvtoolsext) if nvtoolsext else None,
        cpu_count=cpu_count if cpu_count is not None else os.cpu_count(),
        memory_total_mib=memory.total_mib,
        memory_available_mib=memory.available_mib,
        swap_total_mib=memory.swap_total_mib,
        gpus=gpu_facts.gpus,
        driver_version=gpu_facts.driver_version,
        driver_cuda=gpu_facts.driver_cuda,
    )
    return ProbeReport(facts=facts, notes=finish_notes(notes))
