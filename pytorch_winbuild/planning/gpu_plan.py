"""The GPU side of a plan: which architectures to build, and whether the driver runs the chosen CUDA.

Everything is decided before a build starts: an architecture the chosen nvcc does not compile
is refused here, not by nvcc an hour in; the default list is the machine's own GPUs, not every
architecture the release knows (each one compiles every kernel again); a CUDA release the
driver cannot run is refused with the driver to install.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.facts.model import Facts, Gpu
from pytorch_winbuild.knowledge.arch_list import (
    Arch,
    NameTable,
    capability_key,
    covers,
    default_for_gpus,
    expand_arch_list,
    format_arch_list,
)
from pytorch_winbuild.knowledge.choices import ArchRequest, parse_arch_request
from pytorch_winbuild.knowledge.default_arches import DefaultArches
from pytorch_winbuild.knowledge.model import CudaRelease, Knowledge, driver_key, version_tuple
from pytorch_winbuild.planning.fixes import Choices, Fix, FixableConfigurationError, Way, cuda_way
from pytorch_winbuild.planning.installs import Install, cuda_install

DRIVER_DOWNLOAD = "https://www.nvidia.com/Download/index.aspx"


@dataclass
class ArchDecision:
    value: str | None  # TORCH_CUDA_ARCH_LIST, or None to leave PyTorch's default
    reason: str
    decisions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def driver_cuda(knowledge: Knowledge, facts: Facts) -> str | None:
    """The newest CUDA the driver runs: as the driver says (NVML, nvidia-smi), else from NVIDIA's driver table."""
    if facts.driver_cuda:
        return facts.driver_cuda
    if not facts.driver_version:
        return None
    ours = driver_key(facts.driver_version)
    runnable = [release.version for release in knowledge.cuda.values() if driver_key(release.driver[facts.os]) <= ours]
    return max(runnable, key=version_tuple) if runnable else None


def driver_problem(knowledge: Knowledge, facts: Facts, release: CudaRelease) -> tuple[str, str] | None:
    """(problem, fix) when the installed driver cannot run `release`; None when it can or nothing is known.

    A driver of the same CUDA major runs newer minor releases (NVIDIA's minor version
    compatibility, CUDA 11 on), so only a newer major, or a pre-11 release newer than the
    driver, is a problem; the newer-minor case is a warning (see driver_warning).
    """
    newest = driver_cuda(knowledge, facts)
    if newest is None or version_tuple(release.version) <= version_tuple(newest):
        return None
    wanted_major = version_tuple(release.version)[0]
    if wanted_major == version_tuple(newest)[0] and str(wanted_major) in knowledge.gpu.minor_compatible:
        return None
    minimum = release.driver[facts.os]
    driver = facts.driver_version or "installed"
    return (
        f"the NVIDIA driver {driver} runs CUDA up to {newest}, and CUDA {release.version} needs driver "
        f"{minimum} or newer on {facts.os.capitalize()} (NVIDIA's CUDA Toolkit release notes, Table 3); a "
        "build would fail at its first CUDA call with 'The NVIDIA driver on your system is too old'.",
        f"install driver {minimum} or newer ({DRIVER_DOWNLOAD}), or pass --cuda with a release up to {newest}.",
    )


def cuda_with_driver(knowledge: Knowledge, facts: Facts, version: str) -> Install:
    """Installing CUDA `version`, with the driver it needs when this machine's cannot run it."""
    release = knowledge.cuda[version]
    needs = driver_problem(knowledge, facts, release) is not None
    return cuda_install(knowledge, facts.os, version, release.driver[facts.os] if needs else None)


def driver_warning(knowledge: Knowledge, facts: Facts, release: CudaRelease) -> str | None:
    """The minor-version-compatibility case: it runs, but the driver will not JIT PTX for it."""
    newest = driver_cuda(knowledge, facts)
    if (
        newest is None
        or version_tuple(release.version) <= version_tuple(newest)
        or driver_problem(knowledge, facts, release)
    ):
        return None
    major = release.version.split(".")[0]
    return (
        f"The NVIDIA driver {facts.driver_version or ''} runs CUDA up to {newest}; CUDA {release.version} "
        "runs on it through NVIDIA's minor version compatibility (any driver from "
        f"{knowledge.gpu.minor_compatible[major][facts.os]} runs CUDA {major}.x), "
        "without PTX JIT, so every GPU needs its own architecture in TORCH_CUDA_ARCH_LIST (no +PTX "
        f"fallback). Driver {release.driver[facts.os]} or newer lifts that ({DRIVER_DOWNLOAD})."
    )


def _capabilities(facts: Facts) -> list[str]:
    return [gpu.compute_capability for gpu in facts.gpus or () if gpu.compute_capability]


def buildable_gpus_problem(facts: Facts, release: CudaRelease) -> str | None:
    """Why `release` cannot build for any installed GPU (CUDA 13 and a Pascal card), or None."""
    capabilities = _capabilities(facts)
    if not capabilities:
        return None
    oldest = min(release.sm, key=capability_key)
    if all(capability_key(c) < capability_key(oldest) for c in capabilities):
        names = ", ".join(
            f"{gpu.name} ({gpu.compute_capability})" for gpu in facts.gpus or () if gpu.compute_capability
        )
        return (
            f"CUDA {release.version} builds for compute capability {oldest} and newer, and this machine's GPUs "
            f"are older: {names}"
        )
    return None


def _named(requested: ArchRequest, names: NameTable) -> str:
    """'Blackwell → 10.0, Ampere → 8.0;8.6': the names of `requested` and what the plan's table makes of them."""
    return ", ".join(
        f"{part} → {names.names[part]}" for part in requested.entries if isinstance(part, str) and part in names.names
    )


def checked_arch_list(
    knowledge: Knowledge,
    release: CudaRelease,
    requested: ArchRequest,
    names: NameTable,
    gpus: list[Gpu] | None = None,
    flag: str = "--arch-list",
) -> tuple[Arch, ...]:
    """The entries of `requested` (names read with `names`); ConfigurationError when the release's nvcc would
    refuse one."""
    entries = expand_arch_list(requested.entries, names, flag)
    refused = [entry for entry in entries if not release.accepts(entry.capability + entry.suffix)]
    if refused:
        expanded = _named(requested, names)
        raise FixableConfigurationError(
            f"{flag} {requested.text!r}"
            + (f" ({expanded} in {names.label})" if expanded else "")
            + f": CUDA {release.version}'s nvcc does not compile for "
            f"{', '.join(str(e) for e in refused)} (it compiles {_range(release)}); the build would stop "
            'with "nvcc fatal : Unsupported gpu architecture".',
            fix=_arch_fix(knowledge, release, gpus or [], refused[0], flag),
        )
    return entries


def plan_arch_list(
    knowledge: Knowledge,
    facts: Facts,
    requested: ArchRequest | None,
    release: CudaRelease,
    names: NameTable,
    defaults: DefaultArches | None = None,
    flag: str = "--arch-list",
) -> ArchDecision:
    """TORCH_CUDA_ARCH_LIST for this build: --arch-list (names read with `names`) checked against nvcc, else the
    installed GPUs. `defaults`: what the release's CMake builds when it finds no GPU (None for build-ext); `flag`:
    how messages name the list (--arch-list, or the setting it came from)."""
    gpus = [gpu for gpu in facts.gpus or () if gpu.compute_capability]
    if defaults is not None:
        everything = (
            f"its {defaults.count} default architectures for CUDA {release.version} ({defaults.arch_list}; "
            f"{defaults.source}{'; ' + defaults.note if defaults.note else ''}), each compiling every kernel again"
        )
    else:
        count = len(release.arch_list.split(";"))
        everything = (
            f"CUDA {release.version}'s {count} common architectures ({release.arch_list}), each compiling every "
            "kernel again"
        )
    if requested:
        entries = checked_arch_list(knowledge, release, requested, names, gpus, flag)
        decision = ArchDecision(
            format_arch_list(entries),
            f"build kernels only for these GPUs ({flag}): shorter builds, and the fix for 'no kernel "
            "image is available'",
        )
        expanded = _named(requested, names)
        if expanded:
            decision.decisions.append(
                f"{flag} names, read with {names.label}: {expanded}." + (f" {names.note}" if names.note else "")
            )
        for gpu in gpus:
            if not covers(entries, gpu.compute_capability or ""):
                decision.warnings.append(
                    f"{flag} {format_arch_list(entries)} does not cover GPU {gpu.index} {gpu.name} "
                    f"(compute capability {gpu.compute_capability}): PyTorch built this way cannot run "
                    f"kernels on it ('no kernel image is available'). Add {gpu.compute_capability} to "
                    f"{flag}."
                )
        return decision
    if not gpus:
        why = (
            "no GPU was found"
            if facts.gpus == ()
            else "the facts do not list GPUs"
            if facts.gpus is None
            else "the driver does not report the GPUs' compute capability"
        )
        return ArchDecision(
            None,
            "",
            decisions=[
                f"TORCH_CUDA_ARCH_LIST not set ({why}): PyTorch builds for the GPUs it finds at configure "
                f"time, else {everything}; --arch-list with the target GPUs' capabilities makes the build "
                "much shorter."
            ],
        )
    entries, notes = default_for_gpus([gpu.compute_capability or "" for gpu in gpus], release.sm)
    listed = ", ".join(f"{gpu.name} ({gpu.compute_capability})" for gpu in gpus)
    if not entries:
        raise ToolchainError(
            f"CUDA {release.version} cannot build for any GPU of this machine: {'; '.join(notes)}. GPUs: {listed}.",
            fix=f"pass --cuda with a release that builds {gpus[0].compute_capability} (see "
            "build_config/cuda.toml), or --cuda cpu.",
        )
    decision = ArchDecision(
        format_arch_list(entries),
        f"this machine's GPUs: {listed}. Unset, PyTorch's CMake looks for GPUs by running a CUDA program at "
        f"configure time and builds {everything} when that fails (cmake/public/utils.cmake → "
        "select_compute_arch.cmake 'Auto'); set, the build is the same on every run. --arch-list overrides",
    )
    decision.warnings += [f"GPU compute capability {note}." for note in notes]
    return decision


def _arch_fix(knowledge: Knowledge, release: CudaRelease, gpus: list[Gpu], refused: Arch, flag: str) -> Fix:
    """Architectures the release's nvcc compiles (one of this machine's GPUs when it can), or the newest CUDA that
    compiles the refused one, or why there is none."""
    suggested = _suggest(release, gpus)
    arch_list = parse_arch_request(suggested, knowledge.gpu.any_release(), flag)
    typed = "--arch-list" if flag.startswith("winbuild.") else flag  # the flag wins over the setting
    inside = Way(f"{typed} {suggested}", lambda o: replace(o, arch_list=arch_list))
    lead = "pass architectures from that range, e.g. "
    items: list[str | Choices] = [Choices((inside,), lead=lead, lead_after=lead)]
    releases = [r.version for r in knowledge.cuda.values() if r.accepts(refused.capability + refused.suffix)]
    if not releases:
        items.append(
            f"no CUDA release pytorch-winbuild knows compiles {refused} (NVIDIA lists every GPU's compute "
            "capability at https://developer.nvidia.com/cuda-gpus)"
        )
        return Fix(tuple(items), joiner="; ")
    newest = max(releases, key=version_tuple)
    other = cuda_way(knowledge, newest)
    items.append(
        Choices((Way(f"{other.text} (the newest CUDA that compiles {refused})", other.applied),), lead="pass ")
    )
    return Fix(tuple(items), joiner=", or ")


def _range(release: CudaRelease) -> str:
    ordered = sorted(release.sm, key=capability_key)
    return f"{ordered[0]} to {ordered[-1]}: {';'.join(ordered)}"


def _suggest(release: CudaRelease, gpus: list[Gpu]) -> str:
    wanted = [g.compute_capability for g in gpus if g.compute_capability in release.sm]
    return wanted[0] if wanted else sorted(release.sm, key=capability_key)[-1]
