"""Our plans for the client tier, and the Windows machine each one runs on, made from its facts file.

A plan is made in-process (as tests/test_plan_matrix.py makes them) and read in its JSON form
(planning/plan_record.py: what `invoke env --format json` prints), so the assertions compare
PyTorch's recorded cmake with what the plan says, not with our internals.

The machine is what the facts file describes, as the build's cmd.exe sees it:
- the environment Windows and the installers leave (system folders and each tool's folder on PATH,
  CUDA_PATH and CUDA_PATH_Vx_y, NVTOOLSEXT_PATH);
- then what the plan's vcvarsall.bat call adds (VCToolsVersion, VCINSTALLDIR, INCLUDE, LIB and the
  toolset's cl.exe folder first on PATH, for the plan's instance and toolset);
- then the plan's changes, in order (set, prepend with ';', unset), as the plan's .bat applies them.
- Files: empty stand-ins, under a folder standing for C:, for every path the facts name (tools,
  Pythons, CUDA's nvcc.exe and cuda_runtime.h, cuDNN's header, each toolset's cl.exe) and for what
  the plan's build venv installs (its python.exe; the console scripts of its ninja/cmake pins).
"""

from __future__ import annotations

import ntpath
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Any

from support import HOSTS_DIR, plan_options

from pytorch_winbuild.deps.cache import deps_dir
from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.model import Facts, load_facts
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_record import plan_to_dict
from pytorch_winbuild.planning.request import PlanRequest

CLIENT_HOSTS = Path(__file__).resolve().parent / "hosts"
KNOWLEDGE = load_knowledge()
PATHEXT = ".COM;.EXE;.BAT;.CMD;.VBS;.VBE;.JS;.JSE;.WSF;.WSH;.MSC"
DEFAULT_CACHE = "C:\\Users\\builder\\AppData\\Local\\pytorch-winbuild"
# Console scripts a pinned package puts in the venv's Scripts folder.
CONSOLE_SCRIPTS = {"ninja": ("ninja.exe",), "cmake": ("cmake.exe", "ctest.exe", "cpack.exe")}


def host_files() -> list[Path]:
    """The shipped facts files and the tier's own (tests/client/hosts)."""
    return sorted(HOSTS_DIR.glob("*.json")) + sorted(CLIENT_HOSTS.glob("*.json"))


@dataclass(frozen=True)
class PlanCase:
    release: str
    host: Path
    cuda: str
    generator: str
    compiler_cache: str
    arch_list: str | None = None
    extension: bool = False  # build-ext: the plan made as `invoke build-ext` makes it (no venv, cpp_extension reads)

    @property
    def id(self) -> str:
        words = [self.release, self.host.stem, f"cuda-{self.cuda}", self.generator, self.compiler_cache]
        if self.arch_list is not None:
            words.append(f"arch-{self.arch_list}")
        if self.extension:
            words.append("build-ext")
        return "/".join(words)

    def facts(self) -> Facts:
        return load_facts(self.host)

    def plan(self) -> dict[str, Any]:
        """The plan's JSON form; ConfigurationError/ToolchainError when the plan refuses."""
        facts = self.facts()
        cache = facts.cache_dir or DEFAULT_CACHE

        def locate(archive: Any) -> tuple[str, bool]:
            return str(deps_dir(PureWindowsPath(cache), archive)), False

        options = plan_options(
            cuda=self.cuda,
            generator=self.generator,
            compiler_cache=self.compiler_cache,
            arch_list=self.arch_list,
            pytorch_version=self.release,
            cache_dir=cache,
            build_venv=not self.extension,
            **({"extension": True} if self.extension else {}),
        )
        return plan_to_dict(make_plan(PlanRequest(options, locate_archive=locate), facts, KNOWLEDGE))


def plan_cases(releases: tuple[str, ...]) -> Iterator[PlanCase]:
    """Every plan the facts files allow for these releases: each CUDA (and cpu), Ninja and the Visual
    Studio generator, each compiler cache the facts list (and none). Plans that refuse are not cases."""
    for release in releases:
        for host in host_files():
            facts = load_facts(host)
            caches = [name for name in ("sccache", "clcache") if name in facts.tools]
            for cuda in ["cpu", *(entry.version for entry in facts.cuda)]:
                for generator in ("ninja", "vs"):
                    for cache in ["none", *caches]:
                        case = PlanCase(release, host, cuda, generator, cache)
                        try:
                            case.plan()
                        except (ConfigurationError, ToolchainError):
                            continue
                        yield case


def windows_to_local(winroot: Path, path: str) -> Path:
    """Where a Windows path of the described machine lies in the folder standing for its drives."""
    drive, rest = ntpath.splitdrive(path.lower())  # NTFS compares names case-insensitively: the tree is lower-case
    parts = [part for part in rest.replace("/", "\\").split("\\") if part]
    return winroot.joinpath(drive.rstrip(":") or "c", *parts)


def _touch(winroot: Path, path: str) -> None:
    local = windows_to_local(winroot, path)
    local.parent.mkdir(parents=True, exist_ok=True)
    local.touch()


def make_winroot(winroot: Path, facts: Facts, plan: dict[str, Any]) -> None:
    for tool in facts.tools.values():
        _touch(winroot, tool.path)
    for python in (facts.python, *facts.pythons):
        _touch(winroot, python.executable)
    for cuda in facts.cuda:
        _touch(winroot, ntpath.join(cuda.path, "bin", "nvcc.exe"))
        _touch(winroot, ntpath.join(cuda.path, "include", "cuda_runtime.h"))
        if cuda.cudnn and cuda.cudnn_include:
            _touch(winroot, ntpath.join(cuda.cudnn_include, "cudnn.h"))
    for instance in facts.visual_studio:
        for toolset in instance.toolsets:
            _touch(
                winroot, ntpath.join(instance.path, "VC", "Tools", "MSVC", toolset, "bin", "HostX64", "x64", "cl.exe")
            )
        for script in instance.vcvars.values():
            _touch(winroot, script)
    _touch(winroot, "C:\\Windows\\System32\\cmd.exe")
    venv = plan.get("venv")
    if venv:
        _touch(winroot, venv["python"])
        for spec in venv["specs"]:
            for script in CONSOLE_SCRIPTS.get(spec.split("==")[0], ()):
                _touch(winroot, ntpath.join(venv["folder"], "Scripts", script))


def machine_env(facts: Facts, plan: dict[str, Any]) -> dict[str, str]:
    """The environment the plan's build command starts with (names upper-case, as Windows compares them)."""
    env: dict[str, str] = {
        "SYSTEMROOT": "C:\\Windows",
        "COMSPEC": "C:\\Windows\\system32\\cmd.exe",
        "PATHEXT": PATHEXT,
        "PROGRAMFILES": "C:\\Program Files",
        "PROGRAMFILES(X86)": "C:\\Program Files (x86)",
        "NUMBER_OF_PROCESSORS": str(facts.cpu_count or 4),
        "TEMP": facts.temp_dir or "C:\\Windows\\Temp",
        "TMP": facts.temp_dir or "C:\\Windows\\Temp",
    }
    path = ["C:\\Windows\\system32", "C:\\Windows", "C:\\Windows\\System32\\Wbem"]
    # The CUDA installer puts its bin folder on the system PATH, the last one installed (CUDA_PATH) first.
    cudas = sorted(facts.cuda, key=lambda cuda: cuda.path != facts.cuda_path)
    path[:0] = [ntpath.join(cuda.path, "bin") for cuda in cudas]
    for tool in facts.tools.values():
        folder = ntpath.dirname(tool.path)
        if folder not in path:
            path.append(folder)
    if facts.cuda_path:
        env["CUDA_PATH"] = facts.cuda_path
    for cuda in facts.cuda:
        if cuda.env_var:
            env[cuda.env_var.upper()] = cuda.path
    if facts.nvtoolsext:
        env["NVTOOLSEXT_PATH"] = facts.nvtoolsext + "\\"
    vs = plan.get("visual_studio")
    if vs and plan.get("vcvars"):
        msvc = ntpath.join(vs["path"], "VC", "Tools", "MSVC", vs["toolset"])
        env.update(
            {
                "VSINSTALLDIR": vs["path"] + "\\",
                "VCINSTALLDIR": ntpath.join(vs["path"], "VC") + "\\",
                "VCTOOLSINSTALLDIR": msvc + "\\",
                "VCTOOLSVERSION": vs["toolset"],
                "PLATFORM": "x64",
                "VSCMD_ARG_TGT_ARCH": "x64",
                "VSCMD_ARG_HOST_ARCH": "x64",
                "INCLUDE": ntpath.join(msvc, "include"),
                "LIB": ntpath.join(msvc, "lib", "x64"),
            }
        )
        path.insert(0, ntpath.join(msvc, "bin", "HostX64", "x64"))
    env["PATH"] = ";".join(path)
    for change in plan["changes"]:
        name = change["name"].upper()
        if change["action"] == "set":
            env[name] = change["value"]
        elif change["action"] == "unset":
            env.pop(name, None)
        else:  # prepend
            env[name] = change["value"] + (";" + env[name] if env.get(name) else "")
    return env


def find_on_path(winroot: Path, env: dict[str, str], name: str) -> str | None:
    """The first NAME(.exe) on the environment's PATH, as Windows' search finds it."""
    for folder in env.get("PATH", "").split(";"):
        for candidate in (ntpath.join(folder, name), ntpath.join(folder, name + ".exe")):
            if folder and windows_to_local(winroot, candidate).is_file():
                return candidate
    return None
