"""The CUDA of a plan: which installed toolkit (or none), and the environment that points the build at it
(CUDA_PATH/CUDA_HOME, PATH, CUDACXX, NvToolsExt, cuDNN, TORCH_CUDA_ARCH_LIST) and at nvcc's host compiler.

Kept together because "why not this CUDA" and "what this CUDA needs set" read the same facts and release data.
"""

from __future__ import annotations

from dataclasses import replace

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.model import CudaInstall, Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.arch_list import NameTable
from pytorch_winbuild.knowledge.choices import CudaWord
from pytorch_winbuild.knowledge.default_arches import default_arches
from pytorch_winbuild.knowledge.model import CudaRelease, Era, Knowledge, version_tuple
from pytorch_winbuild.planning.compiler_plan import cuda_msc_range, installed_compilers, range_text
from pytorch_winbuild.planning.context import PlanContext
from pytorch_winbuild.planning.era_obstacles import same_windows_folder
from pytorch_winbuild.planning.fixes import Choices, Fix, FixableToolchainError, Way, cuda_way, install_way
from pytorch_winbuild.planning.gpu_plan import (
    DRIVER_DOWNLOAD,
    buildable_gpus_problem,
    checked_arch_list,
    cuda_with_driver,
    driver_problem,
    driver_warning,
    plan_arch_list,
)
from pytorch_winbuild.planning.host_compiler import HostChoice, describe, host_problem
from pytorch_winbuild.planning.installs import driver_install
from pytorch_winbuild.planning.jobs import arch_count
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.plan_model import CUDA_ROOT_VARIABLE, PlanBuilder, plan_paths


def arch_names(knowledge: Knowledge, options: Options, pytorch_version: str) -> NameTable:
    """The names --arch-list means for this release: its CMake's for a build, its cpp_extension's for build-ext."""
    return knowledge.gpu.names_for(pytorch_version, "cpp_extension" if options.extension else "cmake")


def unusable_cuda_reason(context: PlanContext, cuda: CudaInstall, names: NameTable) -> str | None:
    """Why an installed CUDA cannot be used by 'auto', or None when it can (`names`: the release's arch names)."""
    knowledge, era, facts, options = context.knowledge, context.era, context.facts, context.options
    if cuda.version not in knowledge.cuda:
        return f"CUDA {cuda.version} is not in build_config/cuda.toml"
    if cuda.version not in era.cuda:
        return f"PyTorch {era.name} does not build with CUDA {cuda.version}"
    release = knowledge.cuda[cuda.version]
    driver = driver_problem(knowledge, facts, release)
    if driver:
        return driver[0]
    if options.arch_list:
        try:
            checked_arch_list(knowledge, release, options.arch_list, names, flag=options.label("arch_list"))
        except ConfigurationError:
            return f"its nvcc does not compile every architecture of {options.label('arch_list')} {options.arch_list}"
    else:
        problem = buildable_gpus_problem(facts, release)
        if problem:
            return problem
    if facts.os != Platform.WINDOWS:
        return host_problem(knowledge, era, facts, cuda)
    if release.needs_nvtx or era.nvtoolsext == "always":
        folder = cuda.nvtx if release.needs_nvtx else facts.nvtoolsext
        if not folder:
            return f"PyTorch {era.name} links NvToolsExt with CUDA {cuda.version}, and no NvToolsExt was found"
        if era.nvtoolsext_fixed and not same_windows_folder(folder, era.nvtoolsext_fixed):
            return (
                f"PyTorch {era.name} links NvToolsExt only from {era.nvtoolsext_fixed}, and this machine's is {folder}"
            )
    msc_range, _ = cuda_msc_range(cuda, release)
    if not any(
        msc_range[0] <= c.msc_ver < msc_range[1]
        for c in installed_compilers(facts, options, era)
        if not options.toolset or c.short == options.toolset
    ):
        return f"no installed toolset has {range_text(msc_range)}"
    return None


def choose_cuda(context: PlanContext, names: NameTable) -> CudaInstall | None:
    """--cuda X.Y must be known, built by the era and installed; auto takes the newest usable one."""
    knowledge, era, facts, options, plan = context.knowledge, context.era, context.facts, context.options, context.plan
    if options.cuda is CudaWord.CPU:
        plan.decisions.append(f"CUDA: off ({options.label('cuda')} {CudaWord.CPU}).")
        return None
    installed = ", ".join(f"{c.version} ({c.path})" for c in facts.cuda) or "none"
    if options.cuda is CudaWord.AUTO:
        usable = []
        for cuda in sorted(facts.cuda, key=lambda c: version_tuple(c.version), reverse=True):
            why_not = unusable_cuda_reason(context, cuda, names)
            if why_not:
                plan.decisions.append(f"CUDA auto: skipped {cuda.version}: {why_not}.")
            else:
                usable.append(cuda)
        if not usable:
            if facts.cuda:
                plan.warnings.append(
                    f"CUDA is installed ({installed}) but none of it can be used here, so this is a CPU-only "
                    "build; see the skipped reasons above."
                )
            plan.decisions.append("CUDA auto: no usable CUDA installed → CPU-only build.")
            return None
        compiler = "toolset" if facts.os == Platform.WINDOWS else "host compiler"
        plan.decisions.append(
            f"CUDA auto: {usable[0].version}, the newest installed CUDA that PyTorch {era.name} builds with, an "
            f"installed {compiler} accepts, the driver runs and the GPUs need."
        )
        return usable[0]
    release = options.cuda
    if release.version not in era.cuda:
        raise ConfigurationError(
            f"PyTorch {era.name} does not build with CUDA {release.version} (it builds with {', '.join(era.cuda)}).",
            fix="pass one of those with --cuda, or another --pytorch-version.",
        )
    chosen = facts.cuda_by_version(release.version)
    if chosen is None:
        where = knowledge.cuda_install[facts.os].replace("{dashed}", release.version.replace(".", "-"))
        install = install_way(
            f"install CUDA {release.version} {where}", [cuda_with_driver(knowledge, facts, release.version)]
        )
        others = [cuda_way(knowledge, c.version) for c in facts.cuda if c.version in knowledge.cuda]
        ways = (
            *others,
            Way(f"--cuda {CudaWord.AUTO}", lambda o: replace(o, cuda=CudaWord.AUTO)),
            cuda_way(knowledge, None),
        )
        raise FixableToolchainError(
            f"CUDA {release.version} is not installed (installed: {installed}).",
            fix=Fix((install, Choices(ways, lead="pass ", lead_after="pass ")), joiner=", or "),
        )
    problem = driver_problem(knowledge, facts, release)
    if problem:
        raise FixableToolchainError(problem[0], fix=_driver_fix(knowledge, facts, release, chosen))
    plan.decisions.append(f"CUDA: {chosen.version} at {chosen.path} ({options.label('cuda')} {options.cuda}).")
    return chosen


def _driver_fix(knowledge: Knowledge, facts: Facts, release: CudaRelease, chosen: CudaInstall) -> Fix:
    """Install the driver `release` needs, or build with another installed CUDA, or none."""
    minimum = release.driver[facts.os]
    text = f"install driver {minimum} or newer ({DRIVER_DOWNLOAD})"
    driver = install_way(text, [driver_install(minimum, release.version)])
    others = [cuda_way(knowledge, c.version) for c in facts.cuda if c.version in knowledge.cuda and c is not chosen]
    return Fix(
        (driver, Choices((*others, cuda_way(knowledge, None)), lead="pass ", lead_after="pass ")), joiner=", or "
    )


def _fixed_nvtoolsext(era: Era, plan: PlanBuilder) -> None:
    """An era whose build reads no variable for NvToolsExt links it from one folder (the era solver has
    refused the plan when NvToolsExt is elsewhere: era_obstacles._moved_nvtoolsext)."""
    plan.decisions.append(
        f"NvToolsExt: {era.nvtoolsext_fixed}, the one folder PyTorch {era.name} links it from (its "
        "torch/CMakeLists.txt reads no variable for it, so NVTOOLSEXT_PATH is not set)."
    )


def cuda_changes(context: PlanContext, cuda: CudaInstall | None, names: NameTable) -> None:
    knowledge, era, facts, options, plan = context.knowledge, context.era, context.facts, context.options, context.plan
    path_type = plan_paths(facts.os)
    if cuda is None:
        for flag in era.cuda_flag:
            plan.set(flag, "1" if flag == "NO_CUDA" else "0", "CPU-only build")
        if options.arch_list is not None:
            plan.warnings.append(
                f"{options.label('arch_list')} {options.arch_list.text} is not used: this is a CPU-only build, which "
                "compiles no CUDA architectures (TORCH_CUDA_ARCH_LIST is not set). Pass --cuda X.Y to build for those "
                "GPUs."
            )
        return
    release = knowledge.cuda_release(cuda.version)
    for flag in era.cuda_flag:
        if flag == "NO_CUDA":
            plan.unset(flag, "a NO_CUDA left in the environment would switch CUDA off")
        else:
            plan.set(flag, "1", f"build with CUDA {cuda.version}")
    root_variable = CUDA_ROOT_VARIABLE[facts.os]
    others = [c.version for c in facts.cuda if c.version != cuda.version]
    why = f"use CUDA {cuda.version}" + (f" (the installer's {cuda.env_var})" if cuda.env_var else "")
    if others and facts.cuda_path and facts.cuda_path.rstrip("\\/") != cuda.path.rstrip("\\/"):
        why += f"; {root_variable} points at {facts.cuda_path}, the last CUDA installed"
    plan.set(root_variable, cuda.path, why)
    if facts.os == Platform.WINDOWS:
        plan.set(
            "CUDA_HOME",
            cuda.path,
            f"CUDA {cuda.version} for PyTorch's own build scripts: tools/build_pytorch_libs.py hands CMake "
            "CUDA_BIN_PATH = CUDA_HOME, and without it the first CUDA\\v*.* folder, which can be another CUDA "
            "(v2.6.0 lines 63-71); torch.utils.cpp_extension reads it first too",
        )
    plan.prepend(
        "PATH",
        str(path_type(cuda.path) / "bin"),
        f"nvcc and the DLLs of CUDA {cuda.version} first, ahead of other CUDA installs",
    )
    if "CUDA" in era.launchers:  # the era compiles .cu files with CMake's CUDA language
        nvcc = path_type(cuda.path) / "bin" / ("nvcc.exe" if facts.os == Platform.WINDOWS else "nvcc")
        plan.set(
            "CUDACXX",
            nvcc.as_posix(),
            f"the nvcc of CUDA {cuda.version} for CMake's CUDA language, which takes CUDACXX before PATH, so one "
            "left in the environment would pick another CUDA (PyTorch's Windows CI pins it the same way with "
            "CMAKE_CUDA_COMPILER, forward slashes: .ci/pytorch/windows/build_pytorch.bat)",
        )
    if facts.os == Platform.WINDOWS and (release.needs_nvtx or era.nvtoolsext == "always"):
        _nvtoolsext_changes(era, facts, cuda, release, plan)
    _cudnn_changes(era, facts, cuda, plan)
    warning = driver_warning(knowledge, facts, release)
    if warning:
        plan.warnings.append(warning)
    defaults = None if options.extension else default_arches(context.release, release.version)
    arch = plan_arch_list(knowledge, facts, options.arch_list, release, names, defaults, options.label("arch_list"))
    plan.archs = arch_count(arch.value) if arch.value else defaults.count if defaults else 1
    if arch.value is not None:
        plan.set("TORCH_CUDA_ARCH_LIST", arch.value, arch.reason)
    plan.decisions += arch.decisions
    plan.warnings += arch.warnings


def _nvtoolsext_changes(era: Era, facts: Facts, cuda: CudaInstall, release: CudaRelease, plan: PlanBuilder) -> None:
    """A Windows build that links NvToolsExt: where it is (NVTOOLSEXT_PATH, or the era's one folder), or an error
    naming what to install when none was found."""
    folder = cuda.nvtx if release.needs_nvtx else facts.nvtoolsext
    if not folder:
        why = (
            f"CUDA {cuda.version} builds of PyTorch link NvToolsExt"
            if release.needs_nvtx
            else (
                f"PyTorch {era.name} links NvToolsExt (nvToolsExt64_1.lib) even with CUDA {cuda.version}, whose "
                "NVTX is header-only (its CMake stops with 'Failed to find nvToolsExt')"
            )
        )
        raise ToolchainError(
            (
                f"{why}, and no NvToolsExt was found (NVTOOLSEXT_PATH, or C:\\Program Files\\NVIDIA "
                "Corporation\\NvToolsExt with lib\\x64\\nvToolsExt64_1.lib)."
            ),
            fix=(
                "install NvToolsExt: the 'Nsight NVTX' / 'Visual Studio Integration' component of a CUDA 11.x "
                "installer (extract the installer and take NvToolsExt from it if it will not install: the seeds' "
                "tip), then run again"
            )
            + ("" if release.needs_nvtx else "; or build PyTorch 2.5 or later, which uses CUDA's header-only NVTX3")
            + ".",
        )
    if era.nvtoolsext_fixed:
        _fixed_nvtoolsext(era, plan)
    else:
        plan.set("NVTOOLSEXT_PATH", folder, f"where PyTorch {era.name}'s build finds nvToolsExt64_1.lib")


def _cudnn_changes(era: Era, facts: Facts, cuda: CudaInstall, plan: PlanBuilder) -> None:
    """Point the cuDNN variables the era reads at the cuDNN the facts found, or switch cuDNN off."""
    if not cuda.cudnn:
        if facts.os != Platform.WINDOWS:  # a system cuDNN (/usr/include) is found by PyTorch, not by the probe
            plan.warnings.append(
                f"No cuDNN was found for CUDA {cuda.version} in its include folder or CUDNN_INCLUDE_DIR; unless "
                "PyTorch finds a system one, it builds without cuDNN (much slower convolutions)."
            )
            return
        plan.set(
            "USE_CUDNN",
            "0",
            f"no cuDNN was found for CUDA {cuda.version} (no cudnn.h in its include folder or CUDNN_INCLUDE_DIR); "
            "PyTorch would switch cuDNN off itself ('Cannot find cuDNN library. Turning the option off')",
        )
        plan.warnings.append(
            f"cuDNN is off: none was found for CUDA {cuda.version}, so PyTorch builds without it (much slower "
            f"convolutions). Install the cuDNN release for CUDA {cuda.version} into the CUDA folder to use it."
        )
        return
    if not cuda.cudnn_include:
        plan.decisions.append(
            f"cuDNN {cuda.cudnn} for CUDA {cuda.version}: the facts do not say where (written by an older probe); "
            f"PyTorch looks where the probe did (the CUDA folder through {CUDA_ROOT_VARIABLE[facts.os]}, or "
            "CUDNN_INCLUDE_DIR)."
        )
        return
    path_type = plan_paths(facts.os)
    include = path_type(cuda.cudnn_include)
    root = include.parent
    in_toolkit = str(root).rstrip("\\/").lower() == cuda.path.rstrip("\\/").lower()
    label = f"cuDNN {cuda.cudnn}"
    for name, reader in era.cudnn_env.items():
        if name == "CUDNN_INCLUDE_DIR":
            plan.set(name, str(include), f"{label}'s headers ({reader})")
        elif name == "CUDNN_ROOT_DIR":
            plan.set(name, str(root), f"{label}'s folder, searched for cudnn.lib under lib and lib\\x64 ({reader})")
        elif in_toolkit:  # CUDNN_LIB_DIR: cuDNN copied into the toolkit puts its library beside CUDA's own
            libs = root / "lib" / "x64" if facts.os == Platform.WINDOWS else root / "lib64"
            plan.set(name, str(libs), f"{label}'s library, in the CUDA folder's {libs.relative_to(root)} ({reader})")
        else:
            plan.unset(
                name,
                f"{label} is outside the CUDA folder: its cudnn.lib is found beside CUDNN_INCLUDE_DIR, not in "
                f"another folder left in {name} ({reader})",
            )
    plan.decisions.append(f"{label} at {include}.")


def nvcc_host_decision(cuda: CudaInstall, host: HostChoice | None) -> str:
    if host is None:
        return (
            f"CUDA host compiler: not checked (the facts name no host compilers, or no GCC/clang guard was read "
            f"from CUDA {cuda.version}'s host_config.h)."
        )
    if not host.overridden:
        return f"CUDA host compiler: {describe(host.compiler)}, accepted by CUDA {cuda.version} ({host.limits})."
    before = f"nvcc would use {describe(host.default)}, which" if host.default else "no gcc is on PATH; nvcc"
    return (
        f"CUDA host compiler: {host.compiler.label} through CUDAHOSTCXX: {before} CUDA {cuda.version} refuses "
        f"({host.limits} from {host.source}); this is the newest installed compiler it accepts."
    )


def nvcc_host_changes(cuda: CudaInstall | None, host: HostChoice | None, plan: PlanBuilder) -> None:
    """CUDAHOSTCXX when nvcc's default host compiler is one the CUDA release refuses (Linux)."""
    if host and host.overridden:
        plan.set(
            "CUDAHOSTCXX",
            host.compiler.path,
            f"nvcc's host compiler: {host.compiler.family} {host.compiler.version}, which CUDA "
            f"{cuda.version if cuda else ''} accepts ({host.limits})",
        )
