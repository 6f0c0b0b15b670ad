"""The Windows compiler of a plan: the Visual Studio instance and toolset, the vcvars call that enters it,
and the VS 2015 host case (nvcc of CUDA 8 needs VS 2015's cl.exe while the rest may use VS 2017).

A CUDA release accepts only a range of _MSC_VER, so this choice is where most "install this component" answers
come from; it is kept apart so the CUDA choice can ask whether a toolset fits without choosing one.
"""

from __future__ import annotations

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.model import CudaInstall, Facts
from pytorch_winbuild.knowledge.choices import Generator, VsLine
from pytorch_winbuild.knowledge.model import CudaRelease, Era, Knowledge, ToolsetInfo, version_tuple
from pytorch_winbuild.planning.context import PlanContext
from pytorch_winbuild.planning.fixes import Choices, Fix, FixableToolchainError, install_way, toolset_way
from pytorch_winbuild.planning.installs import visual_studio_install
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.plan_model import CompilerChoice, PlanBuilder, VcvarsCall


def range_text(msc_range: tuple[int, int] | None) -> str:
    return "any _MSC_VER" if msc_range is None else f"_MSC_VER {msc_range[0]}–{msc_range[1] - 1}"


def cuda_msc_range(cuda: CudaInstall, release: CudaRelease) -> tuple[tuple[int, int], str]:
    if cuda.msc_range is not None:
        return cuda.msc_range, f"{cuda.path}\\include\\crt\\host_config.h"
    return release.msc_range, "build_config/cuda.toml (fallback: host_config.h not read)"


def installed_compilers(facts: Facts, options: Options, era: Era) -> list[CompilerChoice]:
    """Every installed toolset of the Visual Studio lines the era knows (and --vs allows)."""
    instances = [
        vs
        for vs in facts.visual_studio
        if options.vs in (VsLine.AUTO, vs.product_line) and vs.product_line in era.visual_studio
    ]
    return [CompilerChoice(vs, toolset) for vs in instances for toolset in vs.toolsets]


def best_compiler(choices: list[CompilerChoice]) -> CompilerChoice:
    return max(choices, key=lambda c: (c.msc_ver, version_tuple(c.toolset), version_tuple(c.instance.version)))


def _component_to_install(knowledge: Knowledge, msc_range: tuple[int, int]) -> ToolsetInfo | None:
    fitting = [t for t in knowledge.toolsets if msc_range[0] <= t.msc_ver < msc_range[1]]
    return fitting[-1] if fitting else None


def _no_visual_studio(
    knowledge: Knowledge, options: Options, facts: Facts, msc_range: tuple[int, int] | None
) -> ToolchainError:
    found = ", ".join(vs.label for vs in facts.visual_studio) or "none"
    wanted = _component_to_install(knowledge, msc_range) if msc_range else knowledge.toolsets[-1]
    if options.vs is not VsLine.AUTO:
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


def _toolset_fix(knowledge: Knowledge, toolset: str, installed: list[CompilerChoice]) -> Fix:
    """Add the toolset's component (planned with it installed), or pass an installed toolset that plans."""
    info = next((t for t in knowledge.toolsets if t.version == toolset), None)
    add: str | Choices = f"install the MSVC {toolset} toolset"
    if info is not None:
        text = f"add the component '{info.component}' in the Visual Studio Installer"
        add = install_way(text, [visual_studio_install(knowledge, info.product_line, text, info)])
    shorts = sorted({c.short for c in installed}, key=version_tuple, reverse=True)
    return Fix((add, Choices(tuple(toolset_way(short) for short in shorts))), joiner=", or ")


def choose_compiler(context: PlanContext, cuda_label: str | None, msc_range: tuple[int, int] | None) -> CompilerChoice:
    """The newest installed toolset that the CUDA release accepts (any toolset for CPU builds)."""
    knowledge, options, facts, era = context.knowledge, context.options, context.facts, context.era
    choices = installed_compilers(facts, options, era)
    if not choices:
        raise _no_visual_studio(knowledge, options, facts, msc_range)
    if options.toolset:
        matching = [c for c in choices if c.short == options.toolset]
        if not matching:
            installed = ", ".join(sorted({f"{c.short} ({c.instance.product_line})" for c in choices}))
            raise FixableToolchainError(
                f"toolset {options.toolset} ({options.label('toolset')}) is not installed (installed: {installed}).",
                fix=_toolset_fix(knowledge, options.toolset, choices),
            )
        choices = matching
    if msc_range is None:
        return best_compiler(choices)
    accepted = [c for c in choices if msc_range[0] <= c.msc_ver < msc_range[1]]
    if accepted:
        return best_compiler(accepted)
    if options.toolset:
        raise ConfigurationError(
            (
                f"toolset {options.toolset} (_MSC_VER {choices[0].msc_ver}) is not accepted by CUDA {cuda_label}, "
                f"which accepts {range_text(msc_range)}; nvcc would stop with 'unsupported Microsoft Visual Studio "
                "version'."
            ),
            fix="pass a toolset inside that range, or leave --toolset out and let the plan choose.",
        )
    installed = ", ".join(f"{c.instance.label} toolset {c.toolset} (_MSC_VER {c.msc_ver})" for c in choices)
    wanted = _component_to_install(knowledge, msc_range)
    if wanted is None:
        fix = Fix((f"install a Visual Studio whose toolset has {range_text(msc_range)}",))
    else:
        same_line = [vs for vs in facts.visual_studio if vs.product_line == wanted.product_line]
        where = (
            f"to {same_line[0].label} at {same_line[0].path}"
            if same_line
            else f"with {knowledge.products[wanted.product_line].installer}"
        )
        text = (
            f"in the Visual Studio Installer, add the component '{wanted.component}' {where}, then run again (the "
            f"plan will select it with -vcvars_ver={wanted.version})"
        )
        fix = Fix((install_way(text, [visual_studio_install(knowledge, wanted.product_line, text, wanted)]),))
    raise FixableToolchainError(
        (
            f"CUDA {cuda_label} accepts MSVC toolsets with {range_text(msc_range)}, and none is installed "
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


def vs2015_host_changes(era: Era, outer: CompilerChoice, host: CompilerChoice, plan: PlanBuilder) -> None:
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


def build_compiler(era: Era, facts: Facts, options: Options, cuda_host: CompilerChoice) -> CompilerChoice:
    """The toolset the build runs: `cuda_host`, the one CUDA accepts, except in the VS 2015 host case: when CUDA
    needs VS 2015, no flag pins the Visual Studio line or toolset, the era has PREBUILD_COMMAND and the generator
    is not asked to be Visual Studio's, the newest other installed toolset builds the rest."""
    if cuda_host.instance.product_line == "2015" and options.vs is VsLine.AUTO and not options.toolset:
        newer = [c for c in installed_compilers(facts, options, era) if c.instance.product_line != "2015"]
        if newer and era.prebuild_command and options.generator is not Generator.VS:
            return best_compiler(newer)
    return cuda_host


def compiler_decisions(
    compiler: CompilerChoice,
    cuda_host: CompilerChoice,
    cuda: CudaInstall | None,
    msc_range: tuple[int, int] | None,
    range_source: str,
) -> list[str]:
    """The plan's "Compiler" line, and its "CUDA host compiler" line when nvcc gets another toolset."""
    decisions = [
        f"Compiler: {compiler.instance.label}, toolset {compiler.toolset} (_MSC_VER {compiler.msc_ver})"
        + (
            f", accepted by CUDA {cuda.version} ({range_text(msc_range)} from {range_source})."
            if cuda and compiler is cuda_host
            else "."
        )
    ]
    if cuda and compiler is not cuda_host:
        decisions.append(
            f"CUDA host compiler: {cuda_host.instance.label} toolset {cuda_host.toolset}, entered through "
            f"PREBUILD_COMMAND (CUDA {cuda.version} accepts {range_text(msc_range)})."
        )
    return decisions


def windows_compiler_changes(
    era: Era,
    facts: Facts,
    cuda: CudaInstall | None,
    generator: Generator,
    compiler: CompilerChoice | None,
    cuda_host: CompilerChoice | None,
    plan: PlanBuilder,
) -> None:
    """The VS 2015 host case under Ninja, and DISTUTILS_USE_SDK: the build keeps the compiler vcvars entered."""
    if compiler and cuda and generator is Generator.NINJA and cuda_host and cuda_host.instance.product_line == "2015":
        vs2015_host_changes(era, compiler, cuda_host, plan)
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
