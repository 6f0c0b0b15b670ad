"""The build plan: a pure function of options × facts × knowledge.

It decides which Visual Studio instance and toolset, which vcvars call, which CUDA, generator
and compiler cache, which MKL/MAGMA archives, every environment change with its reason, and the
commands to run. Nothing here touches the machine, so a plan made from a saved facts file is
the plan of the machine that wrote it. Every "no" names what to install or which flag to pass.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, Literal

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.model import MAX_CPU_COUNT, CudaInstall, Facts, Gpu, VisualStudio
from pytorch_winbuild.knowledge.arch_list import NameTable, parse_arch_list
from pytorch_winbuild.knowledge.model import CudaRelease, Era, Knowledge, ToolsetInfo, version_tuple
from pytorch_winbuild.knowledge.msvc import toolset_msc_ver, toolset_short
from pytorch_winbuild.knowledge.versions import NEWEST_WORDS, parse_pytorch_version
from pytorch_winbuild.planning.era_choice import cmake_install, resolve_era, same_windows_folder
from pytorch_winbuild.planning.gpu_plan import (
    buildable_gpus_problem,
    checked_arch_list,
    driver_problem,
    driver_warning,
    plan_arch_list,
)
from pytorch_winbuild.planning.host_compiler import HostChoice, choose_host_compiler, describe, host_problem
from pytorch_winbuild.planning.jobs import arch_count, default_jobs, job_memory
from pytorch_winbuild.planning.python_choice import (
    AUTO,
    BuildPython,
    PythonLocator,
    PythonRequest,
    check_request,
    choose_build_python,
)
from pytorch_winbuild.planning.venv_plan import PIP_INSTALL, VenvPlan, plan_venv
from pytorch_winbuild.text import quoting_bat as bat
from pytorch_winbuild.text.quoting import refuse_control_characters

Action = Literal["set", "prepend", "unset"]

CUDA_CHOICES_HELP = "X.Y (e.g. 9.0), 'cpu' or 'auto'"
GENERATORS = ("ninja", "vs", "auto")
MODES = ("install", "develop", "wheel")  # what each runs is the era's `commands` (build_config/eras.toml)
_TOOLSET = re.compile(r"14\.\d{1,2}")
_CUDA = re.compile(r"\d+\.\d+")
# The variable that points a build at one CUDA toolkit, per OS (PyTorch reads CUDA_PATH on
# Windows, where the NVIDIA installer sets it, and CUDA_HOME on Linux).
CUDA_ROOT_VARIABLE = {"windows": "CUDA_PATH", "linux": "CUDA_HOME"}


@dataclass(frozen=True)
class Options:
    """What the user asked for (flags, config file, environment), before any decision."""

    cuda: str = "auto"
    vs: str = "auto"
    toolset: str | None = None
    generator: str = "auto"
    compiler_cache: str = "auto"
    arch_list: str | None = None
    jobs: int | None = None
    pytorch_version: str | None = None
    mode: str = "install"
    libtorch: bool = False  # build LibTorch only (the era's tools/build_libtorch.py) instead of --mode
    cache_dir: str = "cache"
    cache_dir_given: bool = False  # not this machine's default: commands the plan prints must name it
    source_dir: str | None = None
    mkl_version: str | None = None
    magma_version: str | None = None
    magma_debug: bool = False
    no_magma: bool = False
    python: PythonRequest = AUTO  # the build's Python (--python), parsed by the faces
    build_venv: bool = True  # run in a venv of the era's requirements (build-ext: in the Python that has torch)
    extension: bool = False  # build-ext: torch.utils.cpp_extension reads TORCH_CUDA_ARCH_LIST, not PyTorch's CMake

    def validate(self, knowledge: Knowledge) -> None:
        """Reject malformed values before any decision, naming the flag."""
        if self.cuda not in ("auto", "cpu") and not _CUDA.fullmatch(self.cuda):
            raise ConfigurationError(
                f"--cuda {self.cuda!r} is not {CUDA_CHOICES_HELP}.",
                fix="pass e.g. --cuda 9.0, --cuda cpu or --cuda auto.",
            )
        if self.cuda not in ("auto", "cpu"):
            knowledge.cuda_release(self.cuda)
        if self.vs != "auto" and self.vs not in knowledge.products:
            raise ConfigurationError(
                f"--vs {self.vs!r} is not a Visual Studio product line.",
                fix=f"pass one of {', '.join(knowledge.products)} or auto.",
            )
        if self.toolset is not None and not _TOOLSET.fullmatch(self.toolset):
            raise ConfigurationError(
                f"--toolset {self.toolset!r} is not an MSVC toolset version.",
                fix="pass the short form, e.g. --toolset 14.11 or --toolset 14.29.",
            )
        if self.generator not in GENERATORS:
            raise ConfigurationError(
                f"--generator {self.generator!r} is not one of {', '.join(GENERATORS)}.",
                fix="pass --generator ninja (parallel CUDA compiles) or --generator vs.",
            )
        if self.compiler_cache not in (*knowledge.compiler_caches, "none", "auto"):
            names = ", ".join([*knowledge.compiler_caches, "none", "auto"])
            raise ConfigurationError(f"--compiler-cache {self.compiler_cache!r} is not one of {names}.")
        if self.arch_list is not None:
            parse_arch_list(self.arch_list, knowledge.gpu.any_release())  # the release's own names: make_plan
        if self.jobs is not None and not 1 <= self.jobs <= MAX_CPU_COUNT:  # more jobs than any machine has processors
            shown = str(self.jobs) if len(str(self.jobs)) <= 20 else f"{str(self.jobs)[:16]}…"
            raise ConfigurationError(
                f"--jobs {shown} must be a positive number of parallel compile jobs, at most {MAX_CPU_COUNT}.",
                fix="pass about as many jobs as the machine has memory for, or leave --jobs out for the plan's figure.",
            )
        if self.mode not in MODES:
            raise ConfigurationError(f"--mode {self.mode!r} is not one of {', '.join(MODES)}.")
        if self.pytorch_version is not None and self.pytorch_version not in NEWEST_WORDS:
            parse_pytorch_version(self.pytorch_version, "--pytorch-version")


@dataclass(frozen=True)
class EnvChange:
    name: str
    value: str
    action: Action
    reason: str


@dataclass(frozen=True)
class VcvarsCall:
    script: str
    args: tuple[str, ...]
    instance: str  # the instance's label, for people

    @property
    def command(self) -> str:
        """The call to paste at a cmd prompt or into a .bat; refused (exit 2) when no quoting keeps the path."""
        return bat.printed_call(self.script, self.args)


@dataclass(frozen=True)
class CompilerChoice:
    """A Visual Studio instance and one of its toolsets."""

    instance: VisualStudio
    toolset: str  # full version, e.g. "14.11.25503"

    @property
    def short(self) -> str:
        return toolset_short(self.toolset)

    @property
    def msc_ver(self) -> int:
        return toolset_msc_ver(self.toolset)


@dataclass(frozen=True)
class PlannedArchive:
    name: str
    version: str
    file_name: str
    folder: str
    present: bool
    set_vars: tuple[tuple[str, str], ...] = ()  # (variable, sub-path) from the catalog
    prepend_vars: tuple[tuple[str, str], ...] = ()
    catalog_archive: Any = None  # the deps.catalog.Archive, which fetch-deps takes


@dataclass(frozen=True)
class Command:
    """A command the plan prints for people to paste into its shell (cmd on Windows, sh on Linux)."""

    what: str
    command: str | None  # None when no quoting keeps one of its values literal there: `refused` says why
    refused: ConfigurationError | None = field(default=None, compare=False)

    @classmethod
    def quoted(cls, what: str, line: Callable[[], str]) -> Command:
        """The command `line()` writes, or its refusal, kept for the table, which shows commands to paste:
        a build, its report, JSON and a .bat that sets the environment do without them."""
        try:
            return cls(what, line())
        except ConfigurationError as error:
            return cls(what, None, error)


@dataclass(frozen=True)
class Plan:
    os: str
    pytorch_version: str
    pytorch_version_source: str
    era: Era
    python: str  # the build Python, as the plan shows it
    build_python: BuildPython
    venv: VenvPlan | None  # None: the commands run under build_python itself (build-ext)
    compiler: CompilerChoice | None
    cuda_host_compiler: CompilerChoice | None
    vcvars: VcvarsCall | None
    cuda: CudaInstall | None
    cuda_msc_range: tuple[int, int] | None
    cuda_msc_range_source: str
    nvcc_host: HostChoice | None  # Linux: the compiler nvcc runs for host code (None: Windows, CPU, not checked)
    generator: str
    compiler_cache: str
    archives: tuple[PlannedArchive, ...]
    changes: tuple[EnvChange, ...]
    commands: tuple[Command, ...]
    build_arguments: tuple[str, ...]  # what --mode runs, after the Python interpreter
    decisions: tuple[str, ...]
    warnings: tuple[str, ...]
    path_separator: str = field(default=";")
    source: str = ""  # the tree this plan builds, as the caller found it ("none" when there is none)
    gpus: tuple[Gpu, ...] = ()  # the machine's GPUs (facts): build-ext checks what it built against them

    def check_printable(self) -> None:
        """ConfigurationError (exit 2) when a command the table shows cannot be written to work when pasted."""
        for command in self.commands:
            if command.refused is not None:
                raise command.refused

    def final_env(self) -> dict[str, str]:
        """The variables the plan touches, after its changes, on top of an unknown environment.

        A prepend onto a variable the plan did not set itself keeps a reference to the original
        (`%PATH%` on Windows, `$PATH` on Linux), so the result is exact without a full dump.
        """
        env: dict[str, str] = {}
        for change in self.changes:
            if change.action == "set":
                env[change.name] = change.value
            elif change.action == "unset":
                env.pop(change.name, None)
            else:
                previous = env.get(change.name, f"%{change.name}%" if self.os == "windows" else f"${change.name}")
                env[change.name] = change.value + self.path_separator + previous
        return env


# Given a catalog archive, where fetch-deps puts it and whether it is there (with a valid marker).
ArchiveLocator = Callable[[Any], "tuple[str, bool]"]


@dataclass
class _Builder:
    """Collects changes, decisions and warnings while the plan is made."""

    changes: list[EnvChange] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def set(self, name: str, value: str, reason: str) -> None:
        self.changes.append(EnvChange(name, value, "set", reason))

    def prepend(self, name: str, value: str, reason: str) -> None:
        self.changes.append(EnvChange(name, value, "prepend", reason))

    def unset(self, name: str, reason: str) -> None:
        self.changes.append(EnvChange(name, "", "unset", reason))


def _range_text(msc_range: tuple[int, int] | None) -> str:
    return "any _MSC_VER" if msc_range is None else f"_MSC_VER {msc_range[0]}–{msc_range[1] - 1}"


def _cuda_range(cuda: CudaInstall, release: CudaRelease) -> tuple[tuple[int, int], str]:
    if cuda.msc_range is not None:
        return cuda.msc_range, f"{cuda.path}\\include\\crt\\host_config.h"
    return release.msc_range, "build_config/cuda.toml (fallback: host_config.h not read)"


def _compilers(facts: Facts, options: Options, era: Era) -> list[CompilerChoice]:
    """Every installed toolset of the Visual Studio lines the era knows (and --vs allows)."""
    instances = [
        vs
        for vs in facts.visual_studio
        if options.vs in ("auto", vs.product_line) and vs.product_line in era.visual_studio
    ]
    return [CompilerChoice(vs, toolset) for vs in instances for toolset in vs.toolsets]


def _best(choices: list[CompilerChoice]) -> CompilerChoice:
    return max(choices, key=lambda c: (c.msc_ver, version_tuple(c.toolset), version_tuple(c.instance.version)))


def _component_to_install(knowledge: Knowledge, msc_range: tuple[int, int]) -> ToolsetInfo | None:
    fitting = [t for t in knowledge.toolsets if msc_range[0] <= t.msc_ver < msc_range[1]]
    return fitting[-1] if fitting else None


def _no_visual_studio(
    knowledge: Knowledge, options: Options, facts: Facts, msc_range: tuple[int, int] | None
) -> ToolchainError:
    found = ", ".join(vs.label for vs in facts.visual_studio) or "none"
    wanted = _component_to_install(knowledge, msc_range) if msc_range else knowledge.toolsets[-1]
    if options.vs != "auto":
        return ToolchainError(
            f"Visual Studio {options.vs} is not installed (found: {found}).",
            fix=f"install {knowledge.products[options.vs].installer} with the C++ build tools, or pass --vs auto.",
        )
    product = knowledge.products[wanted.product_line] if wanted else None
    return ToolchainError(
        "no Visual Studio with the C++ build tools was found (vswhere lists none, and VS140COMNTOOLS is not set).",
        fix=(
            f"install {product.installer if product else 'Visual Studio Build Tools'} with the 'Desktop development "
            "with C++' workload"
        )
        + (f" and the component '{wanted.component}'" if wanted else "")
        + ", then run `invoke doctor` again.",
    )


def choose_compiler(
    knowledge: Knowledge,
    options: Options,
    facts: Facts,
    era: Era,
    cuda_label: str | None,
    msc_range: tuple[int, int] | None,
) -> CompilerChoice:
    """The newest installed toolset that the CUDA release accepts (any toolset for CPU builds)."""
    choices = _compilers(facts, options, era)
    if not choices:
        raise _no_visual_studio(knowledge, options, facts, msc_range)
    if options.toolset:
        matching = [c for c in choices if c.short == options.toolset]
        if not matching:
            installed = ", ".join(sorted({f"{c.short} ({c.instance.product_line})" for c in choices}))
            info = next((t for t in knowledge.toolsets if t.version == options.toolset), None)
            raise ToolchainError(
                f"toolset {options.toolset} is not installed (installed: {installed}).",
                fix=(
                    f"add the component '{info.component}' in the Visual Studio Installer"
                    if info
                    else f"install the MSVC {options.toolset} toolset"
                )
                + ", or pass --toolset with one of the installed versions.",
            )
        choices = matching
    if msc_range is None:
        return _best(choices)
    accepted = [c for c in choices if msc_range[0] <= c.msc_ver < msc_range[1]]
    if accepted:
        return _best(accepted)
    if options.toolset:
        raise ConfigurationError(
            (
                f"toolset {options.toolset} (_MSC_VER {choices[0].msc_ver}) is not accepted by CUDA {cuda_label}, "
                f"which accepts {_range_text(msc_range)}; nvcc would stop with 'unsupported Microsoft Visual Studio "
                "version'."
            ),
            fix="pass a toolset inside that range, or leave --toolset out and let the plan choose.",
        )
    installed = ", ".join(f"{c.instance.label} toolset {c.toolset} (_MSC_VER {c.msc_ver})" for c in choices)
    wanted = _component_to_install(knowledge, msc_range)
    if wanted is None:
        fix = f"install a Visual Studio whose toolset has {_range_text(msc_range)}."
    else:
        same_line = [vs for vs in facts.visual_studio if vs.product_line == wanted.product_line]
        where = (
            f"to {same_line[0].label} at {same_line[0].path}"
            if same_line
            else f"with {knowledge.products[wanted.product_line].installer}"
        )
        fix = (
            f"in the Visual Studio Installer, add the component '{wanted.component}' {where}, then run again (the "
            f"plan will select it with -vcvars_ver={wanted.version})."
        )
    raise ToolchainError(
        (
            f"CUDA {cuda_label} accepts MSVC toolsets with {_range_text(msc_range)}, and none is installed "
            f"(installed: {installed})."
        ),
        fix=fix,
    )


def vcvars_call(knowledge: Knowledge, choice: CompilerChoice, arch: str) -> VcvarsCall:
    """vcvarsall.bat <arch> -vcvars_ver=14.xx, or the arch-specific script when vcvarsall is absent."""
    instance = choice.instance
    product = knowledge.products[instance.product_line]
    arch_name = product.vcvars_arch(arch)
    select = () if instance.product_line == "2015" else (f"-vcvars_ver={choice.short}",)
    if "vcvarsall.bat" in instance.vcvars:
        return VcvarsCall(instance.vcvars["vcvarsall.bat"], (arch_name, *select), instance.label)
    arch_script = knowledge.arch_scripts.get(arch)
    if arch_script and arch_script in instance.vcvars:
        return VcvarsCall(instance.vcvars[arch_script], select, instance.label)
    raise ToolchainError(
        f"{instance.label} at {instance.path} has no vcvarsall.bat or {arch_script} in {product.vcvars_dir}.",
        fix="repair the installation in the Visual Studio Installer (Modify → 'Desktop development with C++').",
    )


def arch_names(knowledge: Knowledge, options: Options, pytorch_version: str) -> NameTable:
    """The names --arch-list means for this release: its CMake's for a build, its cpp_extension's for build-ext."""
    return knowledge.gpu.names_for(pytorch_version, "cpp_extension" if options.extension else "cmake")


def _usable_cuda(
    knowledge: Knowledge, era: Era, facts: Facts, options: Options, cuda: CudaInstall, names: NameTable
) -> str | None:
    """Why an installed CUDA cannot be used by 'auto', or None when it can (`names`: the release's arch names)."""
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
            checked_arch_list(knowledge, release, options.arch_list, names)
        except ConfigurationError:
            return f"its nvcc does not compile every architecture of --arch-list {options.arch_list}"
    else:
        problem = buildable_gpus_problem(facts, release)
        if problem:
            return problem
    if facts.os != "windows":
        return host_problem(era, facts, cuda)
    if release.needs_nvtx or era.nvtoolsext == "always":
        folder = cuda.nvtx if release.needs_nvtx else facts.nvtoolsext
        if not folder:
            return f"PyTorch {era.name} links NvToolsExt with CUDA {cuda.version}, and no NvToolsExt was found"
        if era.nvtoolsext_fixed and not same_windows_folder(folder, era.nvtoolsext_fixed):
            return (
                f"PyTorch {era.name} links NvToolsExt only from {era.nvtoolsext_fixed}, and this machine's is {folder}"
            )
    msc_range, _ = _cuda_range(cuda, release)
    if not any(
        msc_range[0] <= c.msc_ver < msc_range[1]
        for c in _compilers(facts, options, era)
        if not options.toolset or c.short == options.toolset
    ):
        return f"no installed toolset has {_range_text(msc_range)}"
    return None


def choose_cuda(
    knowledge: Knowledge, era: Era, facts: Facts, options: Options, plan: _Builder, names: NameTable
) -> CudaInstall | None:
    """--cuda X.Y must be known, built by the era and installed; auto takes the newest usable one."""
    if options.cuda == "cpu":
        plan.decisions.append("CUDA: off (--cuda cpu).")
        return None
    installed = ", ".join(f"{c.version} ({c.path})" for c in facts.cuda) or "none"
    if options.cuda == "auto":
        usable = []
        for cuda in sorted(facts.cuda, key=lambda c: version_tuple(c.version), reverse=True):
            why_not = _usable_cuda(knowledge, era, facts, options, cuda, names)
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
        plan.decisions.append(
            f"CUDA auto: {usable[0].version}, the newest installed CUDA that PyTorch {era.name} builds with, an "
            f"installed {'toolset' if facts.os == 'windows' else 'host compiler'} accepts, the driver runs and the "
            "GPUs need."
        )
        return usable[0]
    release = knowledge.cuda_release(options.cuda)
    if release.version not in era.cuda:
        raise ConfigurationError(
            f"PyTorch {era.name} does not build with CUDA {release.version} (it builds with {', '.join(era.cuda)}).",
            fix="pass one of those with --cuda, or another --pytorch-version.",
        )
    chosen = facts.cuda_by_version(release.version)
    if chosen is None:
        raise ToolchainError(
            f"CUDA {release.version} is not installed (installed: {installed}).",
            fix=(
                f"install CUDA {release.version} "
                + knowledge.cuda_install[facts.os].replace("{dashed}", release.version.replace(".", "-"))
                + ", or pass --cuda with an installed version, --cuda auto or --cuda cpu."
            ),
        )
    problem = driver_problem(knowledge, facts, release)
    if problem:
        raise ToolchainError(problem[0], fix=problem[1])
    plan.decisions.append(f"CUDA: {chosen.version} at {chosen.path} (--cuda {options.cuda}).")
    return chosen


def choose_generator(facts: Facts, options: Options, plan: _Builder) -> str:
    if options.generator == "vs":
        if facts.os != "windows":
            raise ConfigurationError(
                "--generator vs needs Windows; on Linux the build uses Ninja.", fix="pass --generator ninja or auto."
            )
        return "vs"
    if "ninja" in facts.tools:
        plan.decisions.append(
            f"Generator: Ninja ({facts.tools['ninja'].path}): parallel compiles, CUDA files included."
        )
        return "ninja"
    if options.generator == "ninja":
        raise ToolchainError(
            "--generator ninja was asked for, but ninja is not installed.",
            fix="pip install ninja (in the Python that builds PyTorch), then run again.",
        )
    if facts.os != "windows":
        raise ToolchainError(
            "ninja is not installed, and on Linux PyTorch builds with Ninja.", fix="pip install ninja, then run again."
        )
    plan.decisions.append(
        "Generator: Visual Studio (ninja is not installed; `pip install ninja` makes CUDA builds much faster)."
    )
    return "vs"


def _fixed_nvtoolsext(era: Era, plan: _Builder) -> None:
    """An era whose build reads no variable for NvToolsExt links it from one folder (the era solver has
    refused the plan when NvToolsExt is elsewhere: era_choice._moved_nvtoolsext)."""
    plan.decisions.append(
        f"NvToolsExt: {era.nvtoolsext_fixed}, the one folder PyTorch {era.name} links it from (its "
        "torch/CMakeLists.txt reads no variable for it, so NVTOOLSEXT_PATH is not set)."
    )


def choose_compiler_cache(
    knowledge: Knowledge, era: Era, facts: Facts, options: Options, generator: str, plan: _Builder
) -> str:
    """Explicit choices must work; auto takes the era's preferred cache that is installed and fits the generator."""
    if options.compiler_cache == "none":
        return "none"
    candidates = (
        list(era.compiler_caches)
        if facts.os == "windows"
        else [name for name, cache in knowledge.compiler_caches.items() if "linux" in cache.os]
    )
    if options.compiler_cache != "auto":
        cache = knowledge.compiler_caches[options.compiler_cache]
        if facts.os not in cache.os:
            raise ConfigurationError(
                f"{cache.name} does not run on {facts.os}.",
                fix=f"pass --compiler-cache with one of {', '.join(candidates) or 'none'}.",
            )
        if cache.name not in candidates:
            raise ConfigurationError(
                f"PyTorch {era.name}'s build cannot use {cache.name}.",
                fix=f"pass --compiler-cache with one of {', '.join(candidates)} or none.",
            )
        if generator not in cache.generators:
            raise ConfigurationError(
                f"{cache.name} cannot reach the compiles of the Visual Studio generator, which ignores compiler "
                "launchers and runs the toolset's cl.exe whatever CC and CXX say.",
                fix="pass --generator ninja (pip install ninja), or --compiler-cache none.",
            )
        if cache.name not in facts.tools:
            raise ToolchainError(
                f"--compiler-cache {cache.name} was asked for, but {cache.name} is not installed.",
                fix=f"{cache.install}, then run again.",
            )
        return cache.name
    for name in candidates:
        cache = knowledge.compiler_caches[name]
        if name in facts.tools and generator in cache.generators:
            plan.decisions.append(f"Compiler cache: {name} ({facts.tools[name].path}).")
            return name
    installed = [name for name in candidates if name in facts.tools]
    if installed:
        reason = (
            f"{' and '.join(installed)} {'is' if len(installed) == 1 else 'are'} installed, but the Visual Studio "
            "generator runs the toolset's cl.exe and ignores compiler launchers (pass --generator ninja to use it)"
        )
    else:
        reason = (
            "none installed that fits ("
            + ("; ".join(knowledge.compiler_caches[name].install for name in candidates) or "none available")
            + ")"
        )
    plan.decisions.append(f"Compiler cache: {reason}; rebuilds will compile everything again.")
    return "none"


def _paths(os_name: str) -> type[PureWindowsPath] | type[PurePosixPath]:
    return PureWindowsPath if os_name == "windows" else PurePosixPath


def _cuda_changes(
    knowledge: Knowledge,
    era: Era,
    facts: Facts,
    options: Options,
    cuda: CudaInstall | None,
    plan: _Builder,
    names: NameTable,
) -> None:
    path_type = _paths(facts.os)
    if cuda is None:
        for flag in era.cuda_flag:
            plan.set(flag, "1" if flag == "NO_CUDA" else "0", "CPU-only build")
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
    if facts.os == "windows":
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
        nvcc = path_type(cuda.path) / "bin" / ("nvcc.exe" if facts.os == "windows" else "nvcc")
        plan.set(
            "CUDACXX",
            nvcc.as_posix(),
            f"the nvcc of CUDA {cuda.version} for CMake's CUDA language, which takes CUDACXX before PATH, so one "
            "left in the environment would pick another CUDA (PyTorch's Windows CI pins it the same way with "
            "CMAKE_CUDA_COMPILER, forward slashes: .ci/pytorch/windows/build_pytorch.bat)",
        )
    if facts.os == "windows" and (release.needs_nvtx or era.nvtoolsext == "always"):
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
    _cudnn_changes(era, facts, cuda, plan)
    warning = driver_warning(knowledge, facts, release)
    if warning:
        plan.warnings.append(warning)
    arch = plan_arch_list(knowledge, facts, options.arch_list, release, names)
    if arch.value is not None:
        plan.set("TORCH_CUDA_ARCH_LIST", arch.value, arch.reason)
    plan.decisions += arch.decisions
    plan.warnings += arch.warnings


def _cudnn_changes(era: Era, facts: Facts, cuda: CudaInstall, plan: _Builder) -> None:
    """Point the cuDNN variables the era reads at the cuDNN the facts found, or switch cuDNN off."""
    if not cuda.cudnn:
        if facts.os != "windows":  # a system cuDNN (/usr/include) is found by PyTorch, not by the probe
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
    path_type = _paths(facts.os)
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
            libs = root / "lib" / "x64" if facts.os == "windows" else root / "lib64"
            plan.set(name, str(libs), f"{label}'s library, in the CUDA folder's {libs.relative_to(root)} ({reader})")
        else:
            plan.unset(
                name,
                f"{label} is outside the CUDA folder: its cudnn.lib is found beside CUDNN_INCLUDE_DIR, not in "
                f"another folder left in {name} ({reader})",
            )
    plan.decisions.append(f"{label} at {include}.")


def vs_generator(knowledge: Knowledge, era: Era, compiler: CompilerChoice) -> str:
    """The CMAKE_GENERATOR name the era accepts for this Visual Studio (1.2+ refuse " Win64")."""
    line = compiler.instance.product_line
    if line not in era.vs_generators:
        known = ", ".join(f"'{name}'" for name in era.vs_generators.values())
        raise ConfigurationError(
            (
                f"PyTorch {era.name}'s build knows the Visual Studio generators {known}, not the one of "
                f"{compiler.instance.label}."
            ),
            fix="pass --generator ninja (parallel compiles), or --vs with one of those Visual Studio versions.",
        )
    return era.vs_generators[line]


def _generator_changes(
    knowledge: Knowledge,
    era: Era,
    facts: Facts,
    generator: str,
    compiler: CompilerChoice | None,
    plan: _Builder,
    tree_backend: str | None = None,
) -> None:
    """The generator, and for Visual Studio its platform and toolset, in the variables the tree's build reads:
    the era's (tools/setup_helpers) or, for a tree without setup.py (`tree_backend`), CMake's own."""
    if generator == "ninja":
        plan.set(
            "CMAKE_GENERATOR",
            "Ninja",
            "Ninja runs compiles in parallel, CUDA files included (the Visual Studio generator cannot)",
        )
        if facts.os == "windows" and era.ninja_switch == "use_ninja":
            plan.unset(
                "USE_NINJA",
                f"PyTorch {era.name} builds with Ninja only when USE_NINJA is not OFF/0/NO/FALSE/N; one left "
                "in the environment would switch to the Visual Studio generator",
            )
        return
    assert compiler is not None  # the VS generator exists only on Windows, where a compiler was chosen
    product = knowledge.products[compiler.instance.product_line]
    name = vs_generator(knowledge, era, compiler)
    how = {
        "CMAKE_GENERATOR": "passed to CMake as given",
        "hard-coded": "this era's setup uses this generator whatever CMAKE_GENERATOR says",
        "checked": "the exact name this era's tools/setup_helpers/cmake.py accepts; it adds -A x64 itself",
    }[era.generator_from]
    if tree_backend is not None:
        how = f"read by CMake itself, CMake 3.15+: the tree builds through {tree_backend}, not tools/setup_helpers"
    plan.set("CMAKE_GENERATOR", name, f"the CMake generator of {compiler.instance.label} ({how})")
    if era.ninja_switch == "use_ninja":
        plan.set(
            "USE_NINJA",
            "0",
            f"PyTorch {era.name} builds with Ninja whenever ninja is on PATH unless USE_NINJA=0; "
            "CMAKE_GENERATOR alone does not switch it off",
        )
    elif era.ninja_switch == "cmake_generator":
        plan.decisions.append(
            f"Ninja off: PyTorch {era.name}'s setup builds with Ninja only when CMAKE_GENERATOR is Ninja once it "
            "is set (USE_NINJA counts only without it)."
        )
    if (era.generator_platform or tree_backend is not None) and product.generator_platform:
        plan.set(
            "CMAKE_GENERATOR_PLATFORM",
            product.generator_platform,
            "64-bit target (from VS 2019 the architecture is not part of the generator name)",
        )
    if tree_backend is not None and era.toolset_variable and compiler.instance.product_line != "2015":
        plan.set(
            "CMAKE_GENERATOR_TOOLSET",
            f"version={compiler.short},host=x64",
            f"the Visual Studio generator builds with toolset {compiler.short}: CMake's own default toolset "
            f"(CMake 3.15+), since the tree builds through {tree_backend} and has no tools/setup_helpers/cmake.py "
            f"to turn {era.toolset_variable} into -T",
        )
    elif era.toolset_variable and compiler.instance.product_line != "2015":
        plan.set(
            era.toolset_variable,
            compiler.short,
            f"the Visual Studio generator builds with toolset {compiler.short} (-T version={compiler.short})",
        )
    elif compiler.instance.default_toolset and compiler.toolset != compiler.instance.default_toolset:
        plan.warnings.append(
            f"PyTorch {era.name} passes no toolset to the Visual Studio generator, so MSBuild uses "
            f"{compiler.instance.label}'s default {compiler.instance.default_toolset}, not {compiler.toolset}; "
            "use --generator ninja, which builds with the toolset vcvars selected."
        )


def _own_cmake_jobs(tree_backend: str, plan: _Builder) -> None:
    """MAX_JOBS is tools/setup_helpers' (its cmake.py passes it to `cmake --build` as -j); a tree without them
    gets the same limit through CMake's own CMAKE_BUILD_PARALLEL_LEVEL (CMake 3.12+)."""
    jobs = next((c.value for c in reversed(plan.changes) if c.name == "MAX_JOBS"), None)
    if jobs is not None:
        plan.set(
            "CMAKE_BUILD_PARALLEL_LEVEL",
            jobs,
            f"MAX_JOBS for CMake itself (CMake 3.12+): the tree builds through {tree_backend}, and MAX_JOBS is "
            "read only by tools/setup_helpers",
        )


def _vs2015_host_changes(era: Era, outer: CompilerChoice, host: CompilerChoice, plan: _Builder) -> None:
    """Ninja + a CUDA that needs VS 2015 (CUDA 8): nvcc gets VS 2015's cl.exe while the rest may use VS 2017
    (the seeds' recipe)."""
    vs2015 = host.instance
    if vs2015.cl_x64 and era.cudahostcxx:
        plan.set("CUDAHOSTCXX", vs2015.cl_x64, "this CUDA's nvcc accepts only VS 2015's cl.exe as host compiler")
    if outer.instance is not vs2015:
        if not era.prebuild_command:
            raise ConfigurationError(
                f"PyTorch {era.name} cannot switch to VS 2015 for CUDA 8 under Ninja (no PREBUILD_COMMAND).",
                fix="pass --vs 2015.",
            )
        plan.set(
            "PREBUILD_COMMAND",
            vs2015.vcvars["vcvarsall.bat"],
            "build_pytorch_libs.bat enters VS 2015 before CMake, so nvcc of CUDA 8 finds its compiler",
        )
        plan.set(
            "PREBUILD_COMMAND_ARGS",
            era.vcvars_arch,
            "VS 2015's 64-bit tools, as PyTorch 0.4.1's README calls them (its vcvarsall.bat takes x64 for amd64)",
        )


def _compiler_cache_changes(
    knowledge: Knowledge,
    era: Era,
    facts: Facts,
    options: Options,
    cache_name: str,
    cuda: CudaInstall | None,
    plan: _Builder,
) -> None:
    if cache_name == "none":
        return
    separator = "\\" if facts.os == "windows" else "/"
    for entry in knowledge.compiler_caches[cache_name].env:
        if entry.cuda_only and cuda is None:
            continue
        if entry.launcher and entry.launcher not in era.launchers:
            if entry.launcher == "CUDA":
                plan.decisions.append(_uncached_nvcc(era))
            continue
        plan.set(entry.name, entry.value.format(cache_dir=options.cache_dir.rstrip("\\/"), sep=separator), entry.reason)


def _uncached_nvcc(era: Era) -> str:
    """Why a compiler cache leaves nvcc alone in an era whose CMake has no CUDA language."""
    if era.launchers:  # C/C++ launchers reach CMake: so does CMAKE_CUDA_COMPILER_LAUNCHER, to no effect
        why = (
            f"PyTorch {era.name}'s setup.py passes CMAKE_CUDA_COMPILER_LAUNCHER to CMake, but its .cu files are "
            "compiled by FindCUDA's cuda_add_library, which ignores it (CMake's CUDA language, which applies it, "
            "is used from 1.11)"
        )
    else:
        why = f"PyTorch {era.name}'s build passes no compiler launcher to CMake"
    return (
        f"nvcc compiles are not cached: {why}. PyTorch's own CI cached them by naming a copy of sccache.exe "
        "nvcc.exe as CUDA_NVCC_EXECUTABLE, with MAX_JOBS below the core count and the randomtemp wrapper "
        "against intermittent failures (pytorch/pytorch#25393); the plan does not copy that fragile setup."
    )


def _archive_changes(archives: list[PlannedArchive], facts: Facts, plan: _Builder) -> None:
    """The variables build_config/deps.toml names for each archive (CMAKE_INCLUDE_PATH, LIB, MAGMA_HOME)."""
    path_type = _paths(facts.os)
    for archive in archives:
        label = f"{archive.name.upper()} {archive.version}"
        for name, sub_path in archive.set_vars:
            plan.set(
                name,
                str(path_type(archive.folder) / sub_path) if sub_path else archive.folder,
                f"{label}: {sub_path or 'its folder'}",
            )
        for name, sub_path in archive.prepend_vars:
            plan.prepend(name, str(path_type(archive.folder) / sub_path), f"{label}: {sub_path} first")
        if not archive.present:
            plan.warnings.append(
                f"{archive.file_name} is not in the cache yet: the `invoke fetch-deps` line of Commands (step 1) "
                "downloads exactly the plan's archives, or `invoke build` does."
            )


def plan_archives(
    era: Era, facts: Facts, options: Options, cuda: CudaInstall | None, locate: ArchiveLocator | None, plan: _Builder
) -> list[PlannedArchive]:
    """MKL for every Windows build and MAGMA for CUDA builds, where fetch-deps puts them."""
    if locate is None:
        return []
    if facts.os != "windows":
        plan.decisions.append(
            "MKL/MAGMA archives: none (they are Windows builds; on Linux PyTorch finds MKL and MAGMA from the "
            "system or pip)."
        )
        return []
    from pytorch_winbuild.deps.catalog import magma_preference, select_archives

    def select(no_magma: bool) -> list[Any]:
        return select_archives(
            cuda=cuda.version if cuda else None,
            mkl_version=options.mkl_version or era.mkl,
            magma_versions=magma_preference(options.magma_version) or list(era.magma),
            magma_debug=options.magma_debug,
            no_magma=no_magma,
        )

    archives = select(no_magma=True)  # MKL; validates the versions
    if cuda is not None and not options.no_magma:
        try:
            archives = select(no_magma=False)
        except ConfigurationError as error:
            if options.magma_version or options.magma_debug:
                raise
            plan.warnings.append(
                f"{error.message} This build goes on without MAGMA (GPU linear algebra falls back to slower "
                "paths); --no-magma says so explicitly."
            )
    planned = []
    for archive in archives:
        folder, present = locate(archive)
        planned.append(
            PlannedArchive(
                archive.name,
                archive.version,
                archive.file_name,
                folder,
                present,
                archive.set_vars,
                archive.prepend_vars,
                archive,
            )
        )
        plan.decisions.append(
            f"{archive.name.upper()}: {archive.file_name} → {folder} ({'in the cache' if present else 'to fetch'})."
        )
    return planned


def _path_warnings(knowledge: Knowledge, facts: Facts, options: Options, plan: _Builder) -> None:
    limits = knowledge.path_limits
    checked = {
        "source folder": options.source_dir,
        "cache folder": options.cache_dir,
        "TEMP": facts.temp_dir,
    }
    for what, path in checked.items():  # the build runs the venv's Python, which lies in the cache folder
        if path and not path.isascii():
            plan.warnings.append(
                f"The {what} path {path!r} has non-ASCII characters; some build tools (nvcc, older CMake, "
                "clcache) fail on them. Use a plain ASCII path (for TEMP: set TEMP and TMP to e.g. C:\\tmp)."
            )
    if facts.os != "windows" or facts.long_paths_enabled:
        return
    for what, path, suffix in (
        ("source folder", options.source_dir, limits.deepest_build_suffix),
        ("cache folder", options.cache_dir, limits.deepest_cache_suffix),
    ):
        if path and len(path) + suffix > limits.max_path:
            plan.warnings.append(
                f"The {what} {path} is {len(path)} characters long; with the ~{suffix} characters the build adds "
                f"under it, paths pass Windows' {limits.max_path}-character limit and long paths are not enabled. "
                "Move it to a short path such as C:\\src, or enable long paths (LongPathsEnabled=1)."
            )


def check_cmake(era: Era, pytorch_version: str, facts: Facts, plan: _Builder) -> None:
    """A warning when no CMake was found (an older one than the release requires is an obstacle of the era
    solver, which can then name a release that this CMake builds)."""
    if facts.tools.get("cmake") is None:
        release = None if pytorch_version in NEWEST_WORDS else version_tuple(pytorch_version)
        plan.warnings.append(
            f"CMake was not found; PyTorch {pytorch_version} needs CMake {era.min_cmake_for(release)} or newer: "
            f"install {cmake_install(era.min_cmake_for(release))}."
        )


def _build_arguments(era: Era, options: Options) -> tuple[str, ...]:
    """What the build runs after the Python interpreter: the era's --mode command, or its LibTorch script."""
    if not options.libtorch:
        return era.commands[options.mode]
    if "libtorch" not in era.commands:
        raise ConfigurationError(
            f"PyTorch {era.name} has no LibTorch build script (tools/build_libtorch.py).",
            fix="build a newer PyTorch, or leave --libtorch out.",
        )
    return era.commands["libtorch"]


_ARGUMENT_FIX = (
    'use a value without it: for the cache folder, one whose path has none of " % ! nor control characters '
    "(--cache-dir, winbuild.cache_dir or the facts file's cache_dir)."
)


def quote_argument(os_name: str, value: str, what: str = "the argument") -> str:
    """One argument as the plan's shell reads it: cmd (a prompt or a .bat) on Windows, POSIX sh on Linux.
    A value no quoting keeps literal there is refused (ConfigurationError), never printed changed."""
    if os_name == "windows":
        return bat.command_argument(value, what, _ARGUMENT_FIX)
    return shlex.quote(refuse_control_characters(value, what))


def command_line(os_name: str, words: Sequence[str]) -> str:
    """A command the plan prints, every word quoted for the plan's shell, so it works when pasted."""
    return " ".join(quote_argument(os_name, word) for word in words)


def fetch_command(os_name: str, options: Options, cuda: CudaInstall | None, archives: list[PlannedArchive]) -> str:
    """`invoke fetch-deps` with every choice spelled out, so it fetches exactly the plan's archives
    whatever the era, source folder or configuration of the shell that runs it."""
    words = ["invoke", "fetch-deps", "--cuda", cuda.version if cuda else "cpu"]
    for archive in archives:
        words += [f"--{archive.name}-version", archive.version]
        if archive.catalog_archive is not None and archive.catalog_archive.variant == "debug":
            words.append("--magma-debug")
    if cuda is not None and not any(a.name == "magma" for a in archives):
        words.append("--no-magma")
    line = command_line(os_name, words)
    if options.cache_dir_given:
        line += " --cache-dir " + quote_argument(os_name, options.cache_dir, "the cache folder")
    return line


def checked_requires(requires: tuple[str, ...]) -> tuple[str, ...]:
    """A source tree's [build-system] requires, each a PEP 508 requirement (text from a checkout goes to pip as
    arguments: one that pip would read as an option, such as --index-url, is refused)."""
    if not requires:
        return ()  # (packaging.requirements costs a plan about 15 ms to import)
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Pep508

    for spec in requires:
        try:
            Pep508(spec)
        except InvalidRequirement:
            raise ConfigurationError(
                f"the source tree's pyproject.toml [build-system] requires holds {spec!r}, which is not a PEP 508 "
                "requirement.",
                fix="correct the checkout's pyproject.toml, or check out a release.",
            ) from None
    return requires


def _python_locator(os_name: str, cache_dir: str, locate_archive: ArchiveLocator | None) -> PythonLocator:
    """Where a NuGet CPython's interpreter is in the cache: inside the folder fetch-deps extracts it to, as the
    caller's archive locator says (and whether it is there); without one, <cache>/deps/<package folder>."""

    def locate(archive: Any) -> tuple[str, bool]:
        from pytorch_winbuild.deps.catalog import python_interpreter  # the catalog loads only when a Python is fetched

        paths = _paths(os_name)
        folder, present = (
            locate_archive(archive) if locate_archive else (str(paths(cache_dir, "deps", archive.folder_name)), False)
        )
        return str(python_interpreter(paths(folder))), present

    return locate


def venv_commands(os_name: str, options: Options, era: Era, venv: VenvPlan) -> list[Command]:
    """Make the build venv and install the era's requirements, as the builder does (builder/build_venv.py).
    The venv lies in the cache folder: a cache folder no quoting keeps is named as such."""

    def line(words: list[str]) -> str:
        quote_argument(os_name, options.cache_dir, "the cache folder")
        return command_line(os_name, words)

    pips = [r.spec for r in venv.requirements if r.name == "pip"]  # as builder/build_venv.py installs them
    rest = [spec for spec in venv.specs if spec not in pips]
    return [
        Command.quoted(
            "make the build venv (the build reuses it while its key matches)",
            lambda: line([venv.base, "-m", "venv", venv.folder]),
        ),
    ] + [
        Command.quoted(what, lambda specs=specs: line([venv.python, *PIP_INSTALL, *specs]))  # type: ignore[misc]
        for what, specs in (
            ("upgrade the venv's pip first (the one bundled with an old Python is too old for the pins' wheels)", pips),
            (f"install PyTorch {era.name}'s build requirements into it", rest),
        )
        if specs
    ]


def python_fetch_command(os_name: str, options: Options, build_python: BuildPython) -> str:
    """`invoke fetch-deps --python X.Y`, into the plan's cache folder."""
    line = command_line(os_name, ["invoke", "fetch-deps", "--python", build_python.minor])
    if options.cache_dir_given:
        line += " --cache-dir " + quote_argument(os_name, options.cache_dir, "the cache folder")
    return line


def _commands(
    era: Era,
    options: Options,
    vcvars: VcvarsCall | None,
    cuda: CudaInstall | None,
    archives: list[PlannedArchive],
    facts: Facts,
    build_arguments: tuple[str, ...],
    build_python: BuildPython,
    venv: VenvPlan | None,
) -> list[Command]:
    commands = []
    if any(not a.present for a in archives):
        commands.append(
            Command.quoted(
                "download and extract exactly these MKL/MAGMA archives into the cache",
                lambda: fetch_command(facts.os, options, cuda, archives),
            )
        )
    if not build_python.present:
        commands.append(
            Command.quoted(
                f"download and extract CPython {build_python.version} from NuGet into the cache",
                lambda: python_fetch_command(facts.os, options, build_python),
            )
        )
    if venv is not None:
        commands += venv_commands(facts.os, options, era, venv)
    if vcvars:
        commands.append(Command.quoted(f"enter the compiler environment of {vcvars.instance}", lambda: vcvars.command))
    what = "build LibTorch only" if options.libtorch else f"build ({options.mode})"
    python = venv.python if venv else build_python.executable

    def build_line() -> str:
        if venv is not None:
            quote_argument(facts.os, options.cache_dir, "the cache folder")
        return command_line(facts.os, [python, *build_arguments])

    commands.append(Command.quoted(what, build_line))
    return commands


def _jobs_changes(
    knowledge: Knowledge,
    era: Era,
    facts: Facts,
    options: Options,
    cuda: CudaInstall | None,
    plan: _Builder,
    measured_job_gib: float | None,
) -> None:
    """MAX_JOBS: --jobs wins; otherwise min(cores, available memory / memory per job)."""
    arch_list = next((c.value for c in reversed(plan.changes) if c.name == "TORCH_CUDA_ARCH_LIST"), None)
    memory = job_memory(knowledge.resources, era.name, cuda is not None, arch_count(arch_list), measured_job_gib)
    if options.jobs:
        plan.set(
            "MAX_JOBS",
            str(options.jobs),
            f"at most {options.jobs} parallel compile jobs (--jobs; about {memory.gib:g} GiB per {memory.what})",
        )
        return
    decision = default_jobs(facts, memory)
    if decision.jobs is None:
        plan.decisions.append(decision.reason)
    else:
        plan.set("MAX_JOBS", str(decision.jobs), decision.reason)
        plan.decisions.append(
            f"MAX_JOBS {decision.jobs}: {decision.reason}; --jobs N overrides it ({decision.source})."
        )
    if decision.warning:
        plan.warnings.append(decision.warning)


def _nvcc_host_decision(cuda: CudaInstall, host: HostChoice | None) -> str:
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


def make_plan(
    options: Options,
    facts: Facts,
    knowledge: Knowledge,
    *,
    source_version: tuple[str, str] | None = None,
    locate_archive: ArchiveLocator | None = None,
    caller_notes: tuple[str, ...] = (),
    measured_job_gib: float | None = None,
    tree_requires: tuple[str, ...] = (),
    tree_backend: str | None = None,
) -> Plan:
    """Decide everything a build needs. `source_version` is (version, where it was read);
    `tree_backend` is the source tree's own PEP 517 backend when the tree has no setup.py (then only CMake's own
    environment variables reach CMake: there is no tools/setup_helpers to translate PyTorch's);
    `caller_notes` are decisions the caller made and the facts cannot show (e.g. where a --host
    plan's cache folder is); `measured_job_gib` is the peak memory of one compile job measured by an
    earlier build of this configuration on this machine (it replaces the cited figure)."""
    options.validate(knowledge)
    check_request(facts, options.python)
    pinned = source_version[0] if source_version else options.pytorch_version  # else each era's newest
    choice = resolve_era(
        knowledge,
        facts,
        cuda=options.cuda,
        vs=options.vs,
        pytorch_version=options.pytorch_version,
        source_version=source_version,
        usable_cuda=lambda era: tuple(
            cuda.version
            for cuda in sorted(facts.cuda, key=lambda c: version_tuple(c.version), reverse=True)
            if _usable_cuda(knowledge, era, facts, options, cuda, arch_names(knowledge, options, pinned or era.newest))
            is None
        ),
        python=options.python,
    )
    era = choice.era
    names = arch_names(knowledge, options, choice.pytorch_version)
    plan = _Builder(warnings=list(choice.warnings))
    plan.decisions.append(f"PyTorch {choice.pytorch_version} (from {choice.source}) → era {era.name}.")
    if era.cwrap_prep:
        plan.decisions.append(
            "Source prep (seed 002, step 1): `invoke build` replaces a tools/shared/cwrap_common.py that git checked "
            "out as the text of its symbolic link (core.symlinks=false) by the file the link names, and supplies "
            "aten/src/ATen/common_with_cwrap.py there when the file is missing."
        )
    plan.decisions.extend(caller_notes)
    if tree_backend is not None:
        plan.decisions.append(
            f"Build front end: {tree_backend}, the tree's pyproject.toml [build-system] (it has no setup.py), so "
            "the generator, toolset and job count go in CMake's own variables, not tools/setup_helpers'."
        )
    build_python = choose_build_python(
        era, facts, options.python, cache_python=_python_locator(facts.os, options.cache_dir, locate_archive)
    )
    plan.decisions.append(f"Build Python: {build_python.label}: {build_python.reason}.")
    build_arguments = _build_arguments(era, options)
    venv = None
    if options.build_venv:
        # pip without build isolation imports the tree's build backend from the venv: its own requires go in too.
        unisolated = "--no-build-isolation" in build_arguments
        venv = plan_venv(
            facts.os,
            options.cache_dir,
            era.name,
            build_python.executable,
            build_python.version,
            knowledge.build_requirements.requirements_for(era.name, build_python.minor),
            checked_requires(tree_requires) if unisolated else (),
        )
        plan.decisions.append(
            f"Build venv: {venv.folder} (key {venv.key}: this interpreter and these requirements; reused while both "
            f"are unchanged), holding {', '.join(venv.specs)}"
            + (" (the last from the tree's pyproject.toml [build-system] requires)." if venv.tree_requires else ".")
        )
    windows = facts.os == "windows"
    if not windows and (options.vs != "auto" or options.toolset):
        raise ConfigurationError(
            "--vs and --toolset choose Visual Studio, which exists only on Windows.",
            fix="leave them out on Linux, or plan for a Windows machine with --host FILE.",
        )

    cuda = choose_cuda(knowledge, era, facts, options, plan, names)
    msc_range, range_source = (
        _cuda_range(cuda, knowledge.cuda_release(cuda.version)) if cuda and windows else (None, "")
    )
    compiler = cuda_host = vcvars = nvcc_host = None
    if cuda and not windows:
        nvcc_host = choose_host_compiler(era, facts, cuda)
        plan.decisions.append(_nvcc_host_decision(cuda, nvcc_host))
    if windows:
        cuda_host = choose_compiler(knowledge, options, facts, era, cuda.version if cuda else None, msc_range)
        compiler = cuda_host
        if cuda_host.instance.product_line == "2015" and options.vs == "auto" and not options.toolset:
            newer = [c for c in _compilers(facts, options, era) if c.instance.product_line != "2015"]
            if newer and era.prebuild_command and options.generator != "vs":
                compiler = _best(newer)
        vcvars = vcvars_call(knowledge, compiler, era.vcvars_arch)
        plan.decisions.append(
            f"Compiler: {compiler.instance.label}, toolset {compiler.toolset} (_MSC_VER {compiler.msc_ver})"
            + (
                f", accepted by CUDA {cuda.version} ({_range_text(msc_range)} from {range_source})."
                if cuda and compiler is cuda_host
                else "."
            )
        )
        if cuda and compiler is not cuda_host:
            plan.decisions.append(
                f"CUDA host compiler: {cuda_host.instance.label} toolset {cuda_host.toolset}, entered through "
                f"PREBUILD_COMMAND (CUDA {cuda.version} accepts {_range_text(msc_range)})."
            )
    generator = choose_generator(facts, options, plan)
    cache_name = choose_compiler_cache(knowledge, era, facts, options, generator, plan)
    archives = plan_archives(era, facts, options, cuda, locate_archive, plan)

    _cuda_changes(knowledge, era, facts, options, cuda, plan, names)
    if nvcc_host and nvcc_host.overridden:
        plan.set(
            "CUDAHOSTCXX",
            nvcc_host.compiler.path,
            f"nvcc's host compiler: {nvcc_host.compiler.family} {nvcc_host.compiler.version}, which CUDA "
            f"{cuda.version if cuda else ''} accepts ({nvcc_host.limits})",
        )
    _generator_changes(knowledge, era, facts, generator, compiler, plan, tree_backend)
    if windows:
        if compiler and cuda and generator == "ninja" and cuda_host and cuda_host.instance.product_line == "2015":
            _vs2015_host_changes(era, compiler, cuda_host, plan)
        both = {"2015", "2017"} <= {vs.product_line for vs in facts.visual_studio}
        plan.set(
            "DISTUTILS_USE_SDK",
            "1",
            "use the compiler environment vcvars made instead of letting distutils search for one"
            + (
                "; both VS 2015 and VS 2017 are installed, and without it distutils picks VS 2015 (the seeds' warning)"
                if both
                else ""
            ),
        )
    _compiler_cache_changes(knowledge, era, facts, options, cache_name, cuda, plan)
    _jobs_changes(knowledge, era, facts, options, cuda, plan, measured_job_gib)
    if tree_backend is not None:
        _own_cmake_jobs(tree_backend, plan)
    if windows:
        for switch in era.windows_off:
            plan.set(switch.name, switch.value, switch.reason)
        if era.distributed == "libuv":
            plan.warnings.append(
                f"torch.distributed on Windows (PyTorch {era.name}) builds only when CMake finds libuv; without "
                "it distributed is switched off silently. "
                "To have it: conda install -c conda-forge libuv, then set libuv_ROOT to that environment's "
                "Library folder before building."
            )
    _archive_changes(archives, facts, plan)
    if venv is not None:
        plan.set("VIRTUAL_ENV", venv.folder, "the build venv, as its activate script sets it")
        plan.prepend(
            "PATH",
            str(_paths(facts.os)(venv.python).parent),
            "the build venv's scripts first, as its activate script does (ninja and cmake installed there are found)",
        )
    _path_warnings(knowledge, facts, options, plan)
    check_cmake(era, choice.pytorch_version, facts, plan)

    return Plan(
        os=facts.os,
        pytorch_version=choice.pytorch_version,
        pytorch_version_source=choice.source,
        era=era,
        python=f"{build_python.version} (64-bit) {build_python.executable}"
        + (f", in the venv {venv.folder}" if venv else ""),
        build_python=build_python,
        venv=venv,
        compiler=compiler,
        cuda_host_compiler=cuda_host,
        vcvars=vcvars,
        cuda=cuda,
        cuda_msc_range=msc_range,
        cuda_msc_range_source=range_source,
        nvcc_host=nvcc_host,
        generator="Ninja" if generator == "ninja" else vs_generator(knowledge, era, compiler),  # type: ignore[arg-type]
        compiler_cache=cache_name,
        archives=tuple(archives),
        changes=tuple(plan.changes),
        commands=tuple(_commands(era, options, vcvars, cuda, archives, facts, build_arguments, build_python, venv)),
        build_arguments=build_arguments,
        decisions=tuple(plan.decisions),
        warnings=tuple(plan.warnings),
        path_separator=";" if windows else ":",
        gpus=tuple(facts.gpus or ()),
    )
