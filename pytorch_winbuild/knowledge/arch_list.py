"""GPU architectures: what TORCH_CUDA_ARCH_LIST says, what a CUDA release builds, what a GPU runs.

The plan defaults the list to the machine's GPUs, refuses one the chosen nvcc would reject before a build starts, and
sees which GPUs a list leaves out. Rules: NVIDIA's CUDA C++ Programming Guide, "Binary Compatibility" and "PTX
Compatibility"; names: PyTorch's, per release and reader (build_config/gpu.toml [[arch_names]]).
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytorch_winbuild.errors import ConfigurationError

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

    def torch_names(self) -> list[str]:
        """What torch.cuda.get_arch_list() calls the code built for this entry: 'sm_90a'; '+PTX' adds 'compute_XY'."""
        digits = f"{self.major}{self.minor}{self.suffix}"
        return [f"sm_{digits}", *([f"compute_{digits}"] if self.ptx else [])]

    def runs_on(self, capability: str) -> bool:
        """Whether code built for this entry runs on a GPU of `capability` (NVIDIA's compatibility rules)."""
        return any(arch_runs_on(name, capability_key(capability)) for name in self.torch_names())


def capability_key(capability: str) -> tuple[int, int]:
    major, minor = capability.split(".")
    return int(major), int(minor)


def split_entries(text: str) -> list[str]:
    """PyTorch reads spaces as semicolons (cpp_extension.py: `replace(' ', ';')`); empty entries are skipped."""
    return [part for part in re.split(r"[;\s]+", text.strip()) if part]


@dataclass(frozen=True)
class NameTable:
    """The architecture names one plan reads --arch-list with, and where they were read.

    A name stands for different numbers in different releases and readers ('Blackwell' is 10.0 in
    2.6's CMake, 10.0;12.0 in 2.7's), so whatever refuses or expands a name says whose table it used.
    """

    names: dict[str, str]  # name → the entries it stands for; the NAME+PTX forms the reader accepts are keys too
    label: str  # "PyTorch 2.6.0's CMake names (v2.6.0 cmake/…/select_compute_arch.cmake lines 201-235)"
    note: str = ""  # set when the release is newer than every table read and the newest stands in

    def known(self) -> str:
        """The names, for a message, with the NAME+PTX forms as one remark."""
        plain = [name for name in self.names if not name.endswith("+PTX")]
        with_ptx = [name for name in self.names if name.endswith("+PTX")]
        if not plain:
            return "none: it reads only numbers"
        if len(with_ptx) == len(plain):
            return ", ".join(plain) + " (each also as NAME+PTX)"
        return ", ".join(plain) + (f"; also {', '.join(with_ptx)}" if with_ptx else "")


def _fix(flag: str) -> str:
    return (
        f'pass your GPU\'s compute capability, e.g. {flag} 8.6 or {flag} "7.5;8.6+PTX" '
        "(nvidia-smi --query-gpu=name,compute_cap --format=csv prints it; NVIDIA lists every "
        "GPU at https://developer.nvidia.com/cuda-gpus)."
    )


def _unknown(part: str, names: NameTable, flag: str) -> ConfigurationError:
    return ConfigurationError(
        f"{flag} entry {part!r} is not a compute capability (X.Y, X.Y+PTX, X.Ya, X.Yf) or one of "
        f"{names.label}: {names.known()}.",
        fix=_fix(flag),
    )


def parse_arch_entry(part: str, names: NameTable, flag: str = "--arch-list") -> Arch:
    """One numeric entry the user typed ('8.6', '9.0a', '7.5+PTX'); ConfigurationError naming it and `names`."""
    match = _ENTRY.fullmatch(part)
    if match is None:
        raise _unknown(part, names, flag)
    return Arch(int(match["major"]), int(match["minor"]), match["suffix"], bool(match["ptx"]))


def expand_arch_list(entries: tuple[Arch | str, ...], names: NameTable, flag: str = "--arch-list") -> tuple[Arch, ...]:
    """The parsed entries with each name expanded by the plan's table ('Ampere' → 8.0;8.6), duplicates dropped;
    ConfigurationError for a name this table lacks or expands to a form pytorch-winbuild does not write."""
    expanded_entries: list[Arch] = []
    for entry in entries:
        if isinstance(entry, Arch):
            items: list[Arch] = [entry]
        else:
            expanded = names.names.get(entry)
            if expanded is None:  # a name of another release's table
                raise _unknown(entry, names, flag)
            items = []
            for item in split_entries(expanded):
                match = _ENTRY.fullmatch(item)
                if match is None:  # CMake's Fermi: "2.1(2.0)", sm_21 built from compute_20
                    raise ConfigurationError(
                        f"{flag} entry {entry!r} stands for {expanded!r} in {names.label}, and pytorch-winbuild "
                        f"writes only X.Y, X.Y+PTX, X.Ya and X.Yf entries ({item!r} is none).",
                        fix=_fix(flag),
                    )
                items.append(Arch(int(match["major"]), int(match["minor"]), match["suffix"], bool(match["ptx"])))
        expanded_entries += [arch for arch in items if arch not in expanded_entries]
    return tuple(expanded_entries)


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

    A GPU the release builds for gets its own entry. One newer than the release's newest gets the
    newest desktop entry as PTX, which its driver compiles at first use (NVIDIA's PTX
    compatibility), and whose cubin runs on it natively when the major version is the same (8.6
    on an 8.9 GPU); a Tegra capability (8.7, Orin) would give a cubin no desktop GPU runs. One older
    than the release's oldest cannot be reached (CUDA 13 dropped Maxwell to Volta).
    """
    entries: list[Arch] = []
    notes: list[str] = []
    ordered = sorted(buildable, key=capability_key)
    desktop = [c for c in ordered if capability_key(c) not in TEGRA_CAPABILITIES]
    for capability in sorted(set(capabilities), key=capability_key):
        if capability in buildable:
            entry = Arch(*capability_key(capability))
        elif desktop and capability_key(capability) > capability_key(ordered[-1]):
            entry = Arch(*capability_key(desktop[-1]), ptx=True)
            native = Arch(entry.major, entry.minor).runs_on(capability)
            how = (
                f"its {entry.capability} code runs on it natively, same major version"
                if native
                else "PTX, compiled by the driver at first use"
            )
            notes.append(f"{capability} is newer than anything this CUDA builds natively: {entry} ({how})")
        else:
            notes.append(
                f"{capability} cannot be built by this CUDA (it builds {ordered[0]} to {ordered[-1]})"
                if ordered
                else f"{capability}: this CUDA's architectures are unknown"
            )
            continue
        if entry not in entries:
            entries.append(entry)
    return tuple(sorted(entries)), notes


# NVIDIA's rules, once: which torch.cuda.get_arch_list() entries ('sm_86', 'compute_90', 'sm_90a')
# run on a device. verify.py embeds these functions as they are into the script it runs in the
# build's Python (which may be as old as an era in build_config/eras.toml allows), so they stay
# Python 3.5 code: no annotations, no f-strings. Arch.runs_on asks the same function.

# The Tegra (Jetson) compute capabilities, which binary compatibility never reaches from or to a
# desktop GPU. NVIDIA's CUDA GPUs page (developer.nvidia.com/cuda-gpus, "Jetson"): TK1 3.2, TX1 and
# Nano 5.3, TX2 6.2, Xavier 7.2, Orin 8.7, Thor 11.0 (10.1 up to CUDA 12.9: the CUDA 13.0 release
# notes renamed sm_101 to sm_110). PyTorch's named_arches agree ("Ampere+Tegra" = 8.7). It is the
# one piece of data the functions below need, kept beside them because verify.py embeds them.
TEGRA_CAPABILITIES = ((3, 2), (5, 3), (6, 2), (7, 2), (8, 7), (10, 1), (11, 0))


def parse_cuda_arch(entry):
    """('sm' or 'compute', major, minor, suffix) of one arch-list entry, or None if it is none.

    torch.cuda.get_arch_list() names real architectures (SASS cubins) 'sm_XY' and virtual ones
    (PTX) 'compute_XY', with the compute capability's digits as major * 10 + minor: 'sm_86' is
    8.6, 'sm_100' is 10.0, 'sm_121' is 12.1 (the last digit is the minor version). An 'a' suffix
    ('sm_90a') is an architecture-specific target, an 'f' suffix ('sm_100f', CUDA 12.9+) a
    family-specific one.
    """
    kind, separator, rest = str(entry).strip().lower().partition("_")
    if not separator or kind not in ("sm", "compute"):
        return None
    suffix = ""
    if rest[-1:] in ("a", "f"):
        suffix, rest = rest[-1], rest[:-1]
    if len(rest) < 2 or any(character not in "0123456789" for character in rest):
        return None
    return kind, int(rest[:-1]), int(rest[-1]), suffix


def arch_runs_on(entry, capability):
    """Whether code built for one arch-list entry runs on a device of capability (major, minor).

    NVIDIA's rules: CUDA C++ Programming Guide, "Binary Compatibility", "PTX Compatibility" and
    "Application Compatibility"; for the suffixes, its appendix "Compute Capabilities" >
    "Feature Availability" ("Architecture-Specific Features", "Family-Specific Features", from
    CUDA 12.9) and NVIDIA's blog "NVIDIA Blackwell and NVIDIA CUDA 12.9 Introduce Family-Specific
    Architecture Features".

    - sm_XY, a cubin: binary compatibility holds from one minor revision to the next, never to a
      previous one nor across major revisions; "a cubin object generated for compute capability
      X.y will only execute on devices of compute capability X.z where z>=y". So sm_80 runs on
      8.0, 8.6 and 8.9, not on 9.0; sm_86 not on 8.0. The guide adds that this holds for
      desktop GPUs only, not for Tegra nor between desktop and Tegra: a Tegra cubin (sm_87, Orin)
      runs only on that exact capability, so not on an 8.9 GPU.
    - compute_XY, PTX: the driver JIT-compiles it for the device, for any compute capability
      equal to or higher than X.Y ("PTX code produced for some specific compute capability can
      always be compiled to binary code of greater or equal compute capability").
    - an 'a' suffix (sm_90a, compute_90a): architecture-specific features, which run only on
      exactly that compute capability, with no forward compatibility at all.
    - an 'f' suffix (sm_100f, compute_100f; family-specific features, from CUDA 12.9): runs on
      devices of the same family, the same major version with an equal or higher minor (sm_100f
      on 10.0 and 10.3, not on 11.0 or 12.0).
    """
    parsed = parse_cuda_arch(entry)
    if parsed is None:
        return False
    kind, major, minor, suffix = parsed
    device = (int(capability[0]), int(capability[1]))
    if suffix == "a":
        return device == (major, minor)
    if kind == "sm" and not suffix and (device in TEGRA_CAPABILITIES or (major, minor) in TEGRA_CAPABILITIES):
        return device == (major, minor)
    if suffix == "f" or kind == "sm":
        return device[0] == major and device[1] >= minor
    return device >= (major, minor)


def covering_archs(arch_list, capability):
    """The entries of an arch list (torch.cuda.get_arch_list()) that run on a device of capability (major, minor)."""
    return [entry for entry in arch_list if arch_runs_on(entry, capability)]


def arch_list_flag(capabilities):
    """The --arch-list value (TORCH_CUDA_ARCH_LIST) that builds for these capabilities: '9.0', '8.6;9.0'."""
    unique = sorted(set((int(major), int(minor)) for major, minor in capabilities))
    return ";".join("{}.{}".format(*pair) for pair in unique)
