"""GPU architectures: what TORCH_CUDA_ARCH_LIST says, what a CUDA release builds, what a GPU runs.

The plan uses this to default the list to the machine's GPUs, to refuse a list the chosen nvcc
would reject ("nvcc fatal : Unsupported gpu architecture 'compute_50'") before a build starts,
and to see which GPUs a list leaves out. The rules are NVIDIA's (CUDA C++ Programming Guide,
"Binary Compatibility" and "PTX Compatibility"): a cubin for X.y runs on X.z with z >= y; PTX for
X.Y is compiled by the driver for any GPU of X.Y or newer; `a` builds (9.0a) run only on that
exact GPU. The names are PyTorch's (torch/utils/cpp_extension.py `named_arches`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ConfigurationError

_ENTRY = re.compile(r"(?P<major>\d{1,2})\.(?P<minor>\d)(?P<suffix>[af]?)(?P<ptx>\+PTX)?")


@dataclass(frozen=True, order=True)
class Arch:
    """One TORCH_CUDA_ARCH_LIST entry: 8.6, 9.0a, 7.5+PTX."""

    major: int
    minor: int
    suffix: str = ""  # "a": this GPU only; "f": this family (CUDA 12.9+)
    ptx: bool = False

    @property
    def capability(self) -> str:
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        return f"{self.capability}{self.suffix}{'+PTX' if self.ptx else ''}"

    def runs_on(self, capability: str) -> bool:
        """Whether code built for this entry runs on a GPU of `capability` (NVIDIA's compatibility rules)."""
        gpu = capability_key(capability)
        own = (self.major, self.minor)
        if self.suffix == "a":
            return gpu == own
        if gpu[0] == self.major and gpu[1] >= self.minor:
            return True
        return self.ptx and self.suffix == "" and gpu >= own


def capability_key(capability: str) -> tuple[int, int]:
    major, minor = capability.split(".")
    return int(major), int(minor)


def split_entries(text: str) -> list[str]:
    """PyTorch reads spaces as semicolons (cpp_extension.py: `replace(' ', ';')`); empty entries are skipped."""
    return [part for part in re.split(r"[;\s]+", text.strip()) if part]


def parse_arch_list(text: str, names: dict[str, str], flag: str = "--arch-list") -> tuple[Arch, ...]:
    """Entries, PyTorch's names expanded ('Ampere' → 8.0;8.6+PTX); ConfigurationError naming the bad entry."""
    entries: list[Arch] = []
    for part in split_entries(text):
        expanded = names.get(part)
        for item in split_entries(expanded) if expanded is not None else [part]:
            match = _ENTRY.fullmatch(item)
            if match is None:
                known = ", ".join(names)
                raise ConfigurationError(
                    f"{flag} entry {part!r} is not a compute capability (X.Y, X.Y+PTX, X.Ya, X.Yf) or one of PyTorch's architecture names ({known}).",
                    fix=f"pass your GPU's compute capability, e.g. {flag} 8.6 or {flag} \"7.5;8.6+PTX\" (nvidia-smi --query-gpu=name,compute_cap --format=csv prints it; NVIDIA lists every GPU at https://developer.nvidia.com/cuda-gpus).",
                )
            arch = Arch(int(match["major"]), int(match["minor"]), match["suffix"], bool(match["ptx"]))
            if arch not in entries:
                entries.append(arch)
    if not entries:
        raise ConfigurationError(f"{flag} is empty.", fix=f"pass your GPU's compute capability, e.g. {flag} 8.6, or leave {flag} out.")
    return tuple(entries)


def format_arch_list(entries: tuple[Arch, ...]) -> str:
    """Numbers only, ';'-separated: every era's CMake and cpp_extension read that form (names came later)."""
    return ";".join(str(entry) for entry in entries)


def unsupported(entries: tuple[Arch, ...], buildable: tuple[str, ...]) -> list[Arch]:
    """Entries the CUDA release's nvcc would refuse: its capability is not one nvcc compiles for."""
    return [entry for entry in entries if entry.capability not in buildable]


def covers(entries: tuple[Arch, ...], capability: str) -> bool:
    return any(entry.runs_on(capability) for entry in entries)


def default_for_gpus(capabilities: list[str], buildable: tuple[str, ...]) -> tuple[tuple[Arch, ...], list[str]]:
    """The list for these GPUs with this CUDA, and the GPUs it can reach only through PTX or not at all.

    A GPU the release builds for gets its own entry. One newer than the release's newest gets
    the newest entry as PTX, which its driver compiles at first use (NVIDIA's PTX compatibility);
    one older than the release's oldest cannot be reached (CUDA 13 dropped Maxwell to Volta).
    """
    entries: list[Arch] = []
    notes: list[str] = []
    ordered = sorted(buildable, key=capability_key)
    for capability in sorted(set(capabilities), key=capability_key):
        if capability in buildable:
            entry = Arch(*capability_key(capability))
        elif ordered and capability_key(capability) > capability_key(ordered[-1]):
            entry = Arch(*capability_key(ordered[-1]), ptx=True)
            notes.append(f"{capability} is newer than anything this CUDA builds natively: {entry} (PTX, compiled by the driver at first use)")
        else:
            notes.append(f"{capability} cannot be built by this CUDA (it builds {ordered[0]} to {ordered[-1]})" if ordered else f"{capability}: this CUDA's architectures are unknown")
            continue
        if entry not in entries:
            entries.append(entry)
    return tuple(sorted(entries)), notes
