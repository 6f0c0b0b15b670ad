"""What a fix asks the user to install, as the machine will be once it is installed, so make_plan plans the fix on
that machine before it shows it (planning/fixes.py): an install that would still not plan is never suggested.

Each `Install` adds to the facts what the installer puts there by default, with the paths and variables the probe
reads (facts/probe_windows.py): NVIDIA's CUDA installer (CUDA_PATH_Vx_y, NVTX 3 inside 12.x, NvToolsExt up to 11.x),
the Visual Studio Build Tools with the line's newest toolset (a toolset component adds an older one), the 64-bit
CPython from python.org, NvToolsExt in a folder, a display driver, a distribution's g++-N, a tool on PATH. On Linux
a CUDA's host-compiler limits are unknown until host_config.h is read, so the installed CUDA is planned without them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pytorch_winbuild.facts.model import CudaInstall, Facts, HostCompiler, PythonInfo, Tool, VisualStudio
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.catalog import python_archive
from pytorch_winbuild.knowledge.model import Knowledge, ToolsetInfo, version_tuple

_CUDA_ROOT = {
    Platform.WINDOWS: "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{version}",
    Platform.LINUX: "/usr/local/cuda-{version}",
}
NVTOOLSEXT = "C:\\Program Files\\NVIDIA Corporation\\NvToolsExt"  # where CUDA ≤ 11.x installers put it
_VS_ROOT = "C:\\Program Files (x86)\\Microsoft Visual Studio\\{line}\\BuildTools"
_VCVARS = ("vcvarsall.bat", "vcvarsx86_amd64.bat", "vcvars64.bat", "vcvars32.bat")
# Visual Studio 2015 predates the Build Tools layout: one folder, and the scripts under VC and VC\bin.
_VS2015_ROOT = "C:\\Program Files (x86)\\Microsoft Visual Studio 14.0"
_VS2015_VCVARS = {
    "vcvarsall.bat": "VC\\vcvarsall.bat",
    "vcvarsx86_amd64.bat": "VC\\bin\\x86_amd64\\vcvarsx86_amd64.bat",
    "vcvars64.bat": "VC\\bin\\amd64\\vcvars64.bat",
    "vcvars32.bat": "VC\\bin\\vcvars32.bat",
}
_PYTHON = {
    Platform.WINDOWS: "C:\\Program Files\\Python{nodot}\\python.exe",  # python.org's installer, for all users
    Platform.LINUX: "/usr/local/bin/python{minor}",
}


@dataclass(frozen=True)
class Install:
    """One thing to install: how the fix names it, and the machine after installing it."""

    text: str
    onto: Callable[[Facts], Facts]


def installed_after(installs: tuple[Install, ...], facts: Facts) -> Facts:
    """The machine once every one of `installs` is installed, in order."""
    for install in installs:
        facts = install.onto(facts)
    return facts


def cuda_install(knowledge: Knowledge, os_name: Platform, version: str, driver: str | None = None) -> Install:
    """NVIDIA's installer of CUDA `version`, at its default folder; it becomes CUDA_PATH, the last CUDA installed.
    `driver`: the display driver it needs when the installed one is too old (planning/gpu_plan.py decides)."""
    release = knowledge.cuda[version]
    root = _CUDA_ROOT[os_name].format(version=version)
    windows = os_name == Platform.WINDOWS
    separator = "\\" if windows else "/"
    nvtx = (NVTOOLSEXT if windows else None) if release.needs_nvtx else f"{root}{separator}include{separator}nvtx3"
    cuda = CudaInstall(
        version=version,
        path=root,
        env_var=f"CUDA_PATH_V{version.replace('.', '_')}" if windows else None,
        msc_range=release.msc_range if windows else None,
        nvtx=nvtx,
        nvcc=f"{root}{separator}bin{separator}nvcc" + (".exe" if windows else ""),
    )

    def onto(facts: Facts) -> Facts:
        kept = tuple(c for c in facts.cuda if c.version != version)
        nvtoolsext = facts.nvtoolsext or (NVTOOLSEXT if windows and release.needs_nvtx else None)
        facts = replace(facts, cuda=(*kept, cuda), cuda_path=root, nvtoolsext=nvtoolsext)
        return driver_install(driver, version).onto(facts) if driver else facts

    return Install(f"CUDA {version}" + (f" and NVIDIA driver {driver} or newer" if driver else ""), onto)


def driver_install(driver: str, runs: str) -> Install:
    """NVIDIA's display driver `driver`, which runs CUDA up to `runs`."""

    def onto(facts: Facts) -> Facts:
        return replace(facts, driver_version=driver, driver_cuda=runs)

    return Install(f"driver {driver} or newer", onto)


def visual_studio_install(knowledge: Knowledge, line: str, text: str, toolset: ToolsetInfo | None = None) -> Install:
    """The Build Tools of a Visual Studio line with its newest toolset, plus `toolset` when one is named (a
    component of the installer); added to an installed Build Tools of that line when there is one."""
    newest = max((t for t in knowledge.toolsets if t.product_line == line), key=lambda t: version_tuple(t.version))
    wanted = tuple(dict.fromkeys(t.version for t in (toolset, newest) if t is not None))
    old_layout = line == "2015"
    root = _VS2015_ROOT if old_layout else _VS_ROOT.format(line=line)
    scripts = (
        _VS2015_VCVARS if old_layout else {name: f"{knowledge.products[line].vcvars_dir}\\{name}" for name in _VCVARS}
    )
    fresh = VisualStudio(
        product_line=line,
        version=f"{knowledge.products[line].major}.0",
        product="Community" if old_layout else "BuildTools",
        path=root,
        toolsets=wanted,
        vcvars={name: f"{root}\\{relative}" for name, relative in scripts.items()},
        default_toolset=newest.version,
        display_name=f"Visual Studio {'Community' if old_layout else 'Build Tools'} {line}",
    )

    def onto(facts: Facts) -> Facts:
        same = [vs for vs in facts.visual_studio if vs.product_line == line]
        if same:  # the installer modifies the installed one: the toolset is added to it
            merged = replace(same[0], toolsets=tuple(dict.fromkeys((*same[0].toolsets, *wanted))))
            rest = tuple(vs for vs in facts.visual_studio if vs is not same[0])
            return replace(facts, visual_studio=(*rest, merged))
        return replace(facts, visual_studio=(*facts.visual_studio, fresh))

    return Install(text, onto)


def python_install(os_name: Platform, minor: str, text: str) -> Install:
    """The 64-bit CPython `minor` (python.org's installer on Windows; pyenv or conda on Linux), with venv and pip."""
    executable = _PYTHON[os_name].format(nodot=minor.replace(".", ""), minor=minor)
    archive = python_archive(minor)  # its version is the line's last release with Windows installers
    python = PythonInfo(
        version=archive.version if archive else f"{minor}.0",
        bits=64,
        executable=executable,
        found_by="installed",
        venv=True,
        pip=True,
    )

    def onto(facts: Facts) -> Facts:
        return replace(facts, pythons=(*facts.pythons, python))

    return Install(text, onto)


def nvtoolsext_install(folder: str, text: str) -> Install:
    """NvToolsExt in `folder` (a CUDA 11.x installer's component, or a junction to one)."""

    def onto(facts: Facts) -> Facts:
        return replace(
            facts,
            nvtoolsext=folder,
            cuda=tuple(replace(c, nvtx=folder) if c.nvtx and not c.nvtx.endswith("nvtx3") else c for c in facts.cuda),
        )

    return Install(text, onto)


def gcc_install(major: int, text: str) -> Install:
    """GCC `major` with its C++ compiler, as a distribution installs it beside the default one (g++-13)."""
    compiler = HostCompiler(found_as=f"g++-{major}", path=f"/usr/bin/g++-{major}", family="gcc", version=f"{major}.1.0")

    def onto(facts: Facts) -> Facts:
        return replace(facts, host_compilers=(*(facts.host_compilers or ()), compiler))

    return Install(text, onto)


def tool_install(name: str, text: str) -> Install:
    """A tool the probe finds on PATH by its name (ninja, ccache, sccache, clcache)."""

    def onto(facts: Facts) -> Facts:
        return replace(facts, tools={**facts.tools, name: Tool(path=name)})

    return Install(text, onto)
