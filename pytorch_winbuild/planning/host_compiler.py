"""Linux: the compiler nvcc uses for host code, checked against what the CUDA release accepts.

nvcc refuses a host compiler newer than its `include/crt/host_config.h` allows, which a distribution with a fresh GCC
meets at the first .cu file. When the era's compiler is refused, the plan sets CUDAHOSTCXX to the newest accepted
one (GCC before clang). Which compiler each era gives nvcc (FindCUDA.cmake, cuda.cmake): docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.facts.model import CudaInstall, Facts, HostCompiler
from pytorch_winbuild.knowledge.model import Era, Knowledge, version_tuple
from pytorch_winbuild.planning.fixes import Choices, Fix, FixableToolchainError, cuda_way, install_way
from pytorch_winbuild.planning.installs import gcc_install

# How each way of reaching nvcc is named for people.
_HOW = {
    "CUDAHOSTCXX": "CUDAHOSTCXX from your environment",
    "CC": "CC from your environment (FindCUDA's CMAKE_C_COMPILER)",
    "cc": "cc on PATH (FindCUDA's CMAKE_C_COMPILER)",
    "gcc": "gcc on PATH (nvcc's own default)",
}


@dataclass(frozen=True)
class HostChoice:
    """The compiler nvcc will run for host code, and the one it would have run unless told."""

    compiler: HostCompiler
    default: HostCompiler | None
    limits: str  # "GCC ≤ 15, clang ≤ 20"
    source: str  # where the limits were read

    @property
    def overridden(self) -> bool:
        """The plan sets CUDAHOSTCXX to `compiler` because `default` is refused or missing."""
        return self.compiler != self.default


def limits_text(cuda: CudaInstall) -> str:
    limits = [(name, limit) for name, limit in (("GCC", cuda.gcc_max), ("clang", cuda.clang_max)) if limit is not None]
    return ", ".join(f"{name} ≤ {limit}" for name, limit in limits)


def accepts(cuda: CudaInstall, compiler: HostCompiler) -> bool:
    """True when no guard of the CUDA's header refuses the compiler's major version."""
    limit = cuda.gcc_max if compiler.family == "gcc" else cuda.clang_max
    return limit is None or compiler.major <= limit


def reached_by(compiler: HostCompiler) -> str:
    """How the build reaches this compiler: 'gcc on PATH (nvcc's own default)', 'g++-13 on PATH'."""
    return _HOW.get(compiler.found_as, f"{compiler.found_as} on PATH")


def describe(compiler: HostCompiler) -> str:
    return f"{compiler.label}, {reached_by(compiler)}"


def default_host(era: Era, facts: Facts) -> HostCompiler | None:
    """The compiler the era's build hands nvcc when the plan sets nothing."""
    if era.cudahostcxx and facts.host_compiler("CUDAHOSTCXX"):
        return facts.host_compiler("CUDAHOSTCXX")
    if "CUDA" in era.launchers:  # the era compiles .cu files through CMake's CUDA language (1.11+)
        return facts.host_compiler("gcc")
    return facts.host_compiler("CC") or facts.host_compiler("cc")


def _install_fix(knowledge: Knowledge, cuda: CudaInstall, facts: Facts, refused: HostCompiler | None) -> Fix:
    """Install an accepted GCC; or, when another installed CUDA accepts the refused GCC, use that CUDA."""
    wanted = cuda.gcc_max
    items: list[str | Choices] = [
        install_way(
            f"install GCC {wanted} or older with its C++ compiler (Debian/Ubuntu: `apt-get install g++-{wanted}`; "
            f"Fedora: a gcc-toolset; conda: `conda install gxx={wanted}`), then plan again: it sets CUDAHOSTCXX to it",
            [gcc_install(wanted, f"GCC {wanted}")],
        )
        if wanted is not None
        else "install a GCC that the CUDA release accepts, then plan again"
    ]
    if refused is not None and refused.family == "gcc":
        newer = [c.version for c in facts.cuda if c.version != cuda.version and (c.gcc_max or 0) >= refused.major]
        if newer and newer[-1] in knowledge.cuda:
            lead = f"build with an installed CUDA that accepts GCC {refused.major}: "
            items.append(Choices((cuda_way(knowledge, newer[-1]),), lead=lead, lead_after=lead))
    return Fix(tuple(items))


def choose_host_compiler(knowledge: Knowledge, era: Era, facts: Facts, cuda: CudaInstall) -> HostChoice | None:
    """The host compiler for nvcc; None when the facts cannot tell (no compilers probed, no guard read).

    ToolchainError (exit 3) when nothing installed is accepted, or when the user's own CUDAHOSTCXX
    (or, before 1.11, CC) names a refused compiler: the plan does not silently replace a choice
    the user made."""
    if facts.host_compilers is None or (cuda.gcc_max is None and cuda.clang_max is None):
        return None
    limits = limits_text(cuda)
    source = f"{cuda.path}/include/crt/host_config.h"
    default = default_host(era, facts)
    if default is not None and accepts(cuda, default):
        return HostChoice(default, default, limits, source)
    refused = f"CUDA {cuda.version} accepts {limits} ({source})"
    fitting = accepted_compilers(facts, cuda)
    if default is not None and default.found_as in ("CUDAHOSTCXX", "CC"):
        raise ToolchainError(
            f"{default.found_as} names {default.label}, which nvcc refuses: {refused}.",
            fix=(
                f"point {default.found_as} at an accepted compiler"
                + (f" such as {fitting[0].path}" if fitting else "")
                + f", or unset it and let the plan choose; else {_install_fix(knowledge, cuda, facts, default).text()}"
            ),
        )
    if fitting and era.cudahostcxx:
        return HostChoice(fitting[0], default, limits, source)
    what = f"nvcc would use {describe(default)}" if default else "no gcc is on PATH for nvcc"
    if fitting:  # an era whose build reads no CUDAHOSTCXX: only CC reaches nvcc
        raise ToolchainError(
            f"{what}, which it refuses: {refused}; PyTorch {era.name} reads no CUDAHOSTCXX.",
            fix=f"set CC={fitting[0].path} (an accepted compiler that is installed) and plan again.",
        )
    raise FixableToolchainError(
        f"{what}{', which it refuses' if default else ''}: {refused}; no accepted compiler is installed.",
        fix=_install_fix(knowledge, cuda, facts, default),
    )


def accepted_compilers(facts: Facts, cuda: CudaInstall) -> list[HostCompiler]:
    """Installed compilers the CUDA accepts, best first: GCC before clang, newest first, and of one
    version the C++ driver (g++-13 before gcc: CMake documents CUDAHOSTCXX as a C++ compiler)."""
    candidates = [c for c in facts.host_compilers or () if c.found_as != "CUDAHOSTCXX" and accepts(cuda, c)]
    return sorted(
        candidates, key=lambda c: (c.family == "gcc", version_tuple(c.version), "++" in c.found_as), reverse=True
    )


def host_problem(knowledge: Knowledge, era: Era, facts: Facts, cuda: CudaInstall) -> str | None:
    """Why `--cuda auto` cannot use this CUDA for lack of a host compiler, or None."""
    try:
        choose_host_compiler(knowledge, era, facts, cuda)
    except ToolchainError as error:
        return error.message.rstrip(".")
    return None
