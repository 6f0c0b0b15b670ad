"""The CMake generator and the compiler cache of a plan, and the variables that make the build use them.

The two are chosen together because a cache reaches the compiles only through compiler launchers, which the
Visual Studio generator ignores.
"""

from __future__ import annotations

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import CudaInstall, Facts
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.choices import CompilerCacheChoice, Generator
from pytorch_winbuild.knowledge.model import Era, Knowledge
from pytorch_winbuild.planning.context import PlanContext
from pytorch_winbuild.planning.fixes import Choices, Fix, FixableToolchainError, install_way
from pytorch_winbuild.planning.installs import tool_install
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.plan_model import CompilerChoice, PlanBuilder


def choose_generator(facts: Facts, options: Options, plan: PlanBuilder) -> Generator:
    """--generator vs or ninja as asked; auto: Ninja, which the build venv carries (build-ext: when installed),
    else the era's Visual Studio generator."""
    if options.generator is Generator.VS:
        if facts.os != Platform.WINDOWS:
            raise ConfigurationError(
                f"{options.label('generator')} vs needs Windows; on Linux the build uses Ninja.",
                fix="pass --generator ninja or auto.",
            )
        return Generator.VS
    if options.build_venv:
        plan.decisions.append("Generator: Ninja, from the build venv (below): parallel compiles, CUDA files included.")
        return Generator.NINJA
    if "ninja" in facts.tools:
        plan.decisions.append(
            f"Generator: Ninja ({facts.tools['ninja'].path}): parallel compiles, CUDA files included."
        )
        return Generator.NINJA
    if options.generator is Generator.NINJA:
        raise FixableToolchainError(
            f"{options.label('generator')} ninja was asked for, but ninja is not installed.",
            fix=Fix((_ninja_install("pip install ninja (in the Python that builds PyTorch), then run again"),)),
        )
    if facts.os != Platform.WINDOWS:
        raise FixableToolchainError(
            "ninja is not installed, and on Linux PyTorch builds with Ninja.",
            fix=Fix((_ninja_install("pip install ninja, then run again"),)),
        )
    plan.decisions.append(
        "Generator: Visual Studio (ninja is not installed; `pip install ninja` makes CUDA builds much faster)."
    )
    return Generator.VS


def choose_compiler_cache(context: PlanContext, generator: str) -> str:
    """Explicit choices must work; auto takes the era's preferred cache that is installed and fits the generator."""
    knowledge, era, facts, options, plan = context.knowledge, context.era, context.facts, context.options, context.plan
    if options.compiler_cache is CompilerCacheChoice.NONE:
        return CompilerCacheChoice.NONE
    candidates = (
        list(era.compiler_caches)
        if facts.os == Platform.WINDOWS
        else [name for name, cache in knowledge.compiler_caches.items() if "linux" in cache.os]
    )
    if options.compiler_cache is not CompilerCacheChoice.AUTO:
        cache = knowledge.compiler_caches[options.compiler_cache]
        if facts.os not in cache.os:
            raise ConfigurationError(
                f"{options.label('compiler_cache')} {cache.name}: {cache.name} does not run on {facts.os}.",
                fix=f"pass --compiler-cache with one of {', '.join(candidates) or 'none'}.",
            )
        if cache.name not in candidates:
            raise ConfigurationError(
                f"{options.label('compiler_cache')} {cache.name}: PyTorch {era.name}'s build cannot use it.",
                fix=f"pass --compiler-cache with one of {', '.join(candidates)} or none.",
            )
        if generator not in cache.generators:
            raise ConfigurationError(
                f"{cache.name} cannot reach the compiles of the Visual Studio generator, which ignores compiler "
                "launchers and runs the toolset's cl.exe whatever CC and CXX say.",
                fix="pass --generator ninja (pip install ninja), or --compiler-cache none.",
            )
        if cache.name not in facts.tools:
            raise FixableToolchainError(
                f"{options.label('compiler_cache')} {cache.name} was asked for, but {cache.name} is not installed.",
                fix=Fix((install_way(f"{cache.install}, then run again", [tool_install(cache.name, cache.name)]),)),
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
    return CompilerCacheChoice.NONE


def _ninja_install(text: str) -> Choices:
    return install_way(text, [tool_install("ninja", "ninja")])


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


def generator_changes(
    context: PlanContext, generator: str, compiler: CompilerChoice | None, tree_backend: str | None = None
) -> None:
    """The generator, and for Visual Studio its platform and toolset, in the variables the tree's build reads:
    the era's (tools/setup_helpers) or, for a tree without setup.py (`tree_backend`), CMake's own."""
    knowledge, era, facts, plan = context.knowledge, context.era, context.facts, context.plan
    if generator is Generator.NINJA:
        plan.set(
            "CMAKE_GENERATOR",
            "Ninja",
            "Ninja runs compiles in parallel, CUDA files included (the Visual Studio generator cannot)",
        )
        if facts.os == Platform.WINDOWS and era.ninja_switch == "use_ninja":
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


def compiler_cache_changes(context: PlanContext, cache_name: str, cuda: CudaInstall | None) -> None:
    knowledge, era, facts, options, plan = context.knowledge, context.era, context.facts, context.options, context.plan
    if cache_name == CompilerCacheChoice.NONE:
        return
    separator = "\\" if facts.os == Platform.WINDOWS else "/"
    for entry in knowledge.compiler_caches[cache_name].env:
        if entry.cuda_only and cuda is None:
            continue
        if entry.launcher and entry.launcher not in era.launchers:
            if entry.launcher == "CUDA":
                plan.decisions.append(_uncached_nvcc(era))
            continue
        plan.set(entry.name, entry.value.format(cache_dir=str(options.cache_dir), sep=separator), entry.reason)


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
