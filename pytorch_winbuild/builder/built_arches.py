"""What a built extension library holds for the GPU, and whether that runs on this machine's GPUs.

A build for the wrong architectures imports fine and fails at its first kernel launch, so after build-ext its libraries
are read with cuobjdump (`--list-elf`, `--list-ptx`; NVIDIA's CUDA Binary Utilities) and judged with
knowledge/arch_list.py's rules, as verify.py judges torch. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import stat
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild import child_processes
from pytorch_winbuild.facts.model import Gpu
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.arch_list import arch_list_flag, capability_key, covering_archs

# What setuptools' build_ext links an extension module into: beside the sources with --inplace
# (build-ext's inplace and develop modes), in build/lib.<platform>/ before `install` copies it.
LIBRARY_SUFFIXES = (".so", ".pyd")

# cuobjdump's lines for embedded code, e.g. "ELF file    1: x.1.sm_80.cubin" and "PTX file    1:
# x.1.sm_90.ptx": a PTX file is named after the real architecture ("sm_90"), yet holds the virtual one
# (compute_90). An 'f' (family) cubin is listed without its suffix (sm_100f as "sm_100.cubin", CUDA
# 13.5's cuobjdump), which the family rule reads the same way.
_LISTED = re.compile(r"(?P<kind>ELF|PTX) file\s+\d+:\s*(?P<name>\S.*)")
_ARCH = re.compile(r"\.(?:sm|compute)_(?P<digits>\d+[af]?)\.(?:cubin|ptx)$")
# What cuobjdump says (exit status 255) about a library without device code: a CPU extension.
NO_DEVICE_CODE = "does not contain device code"
CUOBJDUMP_TIMEOUT = 120  # seconds; listing a large library's fat binaries takes well under one


@dataclass(frozen=True)
class Holdings:
    """The GPU code of one library, in torch.cuda.get_arch_list()'s names, which arch_runs_on reads."""

    library: Path
    archs: tuple[str, ...]  # 'sm_80': a cubin; 'compute_90': PTX; (): no device code (a CPU extension)
    problem: str | None = None  # why cuobjdump could not list it; archs is then ()


def parse_listing(text: str) -> tuple[str, ...]:
    """The architectures of a `cuobjdump --list-elf --list-ptx` listing, each once, in listing order."""
    found: list[str] = []
    for line in text.splitlines():
        listed = _LISTED.fullmatch(line.strip())
        arch = _ARCH.search(listed["name"]) if listed else None
        if listed is None or arch is None:
            continue
        name = ("sm_" if listed["kind"] == "ELF" else "compute_") + arch["digits"]
        if name not in found:
            found.append(name)
    return tuple(found)


def find_cuobjdump(cuda_root: str | None) -> str | None:
    """cuobjdump from the plan's CUDA (the one that built the library), else PATH, else NVIDIA's
    nvidia-cuda-cuobjdump wheel in this Python (nvidia/cu13/bin/cuobjdump, .exe on Windows, and no script on
    PATH; the way to get it where a minimal toolkit, such as a Linux CUDA container's, left it out)."""
    spec = importlib.util.find_spec("nvidia")  # a namespace package: finding it imports nothing
    roots = (spec.submodule_search_locations or []) if spec else []
    wheels = sorted((str(found) for root in roots for found in Path(root).glob("cu*/bin")), reverse=True)  # cu13 first
    places = [os.path.join(cuda_root, "bin")] if cuda_root else []
    for path in [*places, None, *wheels]:  # None: PATH
        found = shutil.which("cuobjdump", path=path)
        if found:
            return found
    return None


def read_holdings(cuobjdump: str, library: Path) -> Holdings:
    """List one library's cubins and PTX."""
    try:
        done = child_processes.run_bounded(
            [cuobjdump, "--list-elf", "--list-ptx", str(library)], timeout=CUOBJDUMP_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return Holdings(library, (), str(error))
    archs = parse_listing(done.stdout)
    if done.returncode == 0 and archs:
        return Holdings(library, archs)
    if NO_DEVICE_CODE in done.stdout + done.stderr:
        return Holdings(library, ())
    said = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return Holdings(library, (), said[-1] if said else f"exit status {done.returncode} and no listing")


def built_libraries(folder: Path) -> list[Path]:
    """The extension libraries under the extension's folder (its sources and build/), each once: setuptools
    links into build/lib.<platform>/ and --inplace copies the library beside the sources, where Python
    imports it, so that copy is the one named. Those of a virtual environment or hidden folder inside it
    are not the extension's."""
    found: list[Path] = []
    for root, folders, files in os.walk(folder):
        folders[:] = sorted(
            name
            for name in folders
            if not name.startswith(".") and not os.path.exists(os.path.join(root, name, "pyvenv.cfg"))
        )
        found += [
            Path(root, name) for name in sorted(files) if name.endswith(LIBRARY_SUFFIXES) and _regular(Path(root, name))
        ]
    found.sort(key=lambda path: folder / "build" in path.parents)  # stable: the in-place copies first
    sizes = Counter(_size(path) for path in found)
    unique: dict[object, Path] = {}
    for path in found:  # only libraries of one size can be copies of each other: only those are hashed
        unique.setdefault(_digest(path) if sizes[_size(path)] > 1 else path, path)
    return list(unique.values())


def _regular(path: Path) -> bool:
    """A library the build wrote: a regular file, not a link (a link may lead anywhere, /dev/zero included, which
    hashing would read forever) nor a device or pipe."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # unreadable: cuobjdump says why
        return -1


def _digest(path: Path) -> object:
    try:
        with path.open("rb") as library:
            return hashlib.file_digest(library, "sha256").digest()
    except OSError:  # unreadable: cuobjdump says why
        return path


def describe(archs: Sequence[str]) -> str:
    """'sm_80 (cubin), compute_90 (PTX)'."""
    return ", ".join(f"{arch} ({'cubin' if arch.startswith('sm_') else 'PTX'})" for arch in archs)


def _gpu(gpu: Gpu) -> str:
    return f"GPU {gpu.index} {gpu.name} (compute capability {gpu.compute_capability})"


def judge(holdings: Holdings, gpus: Sequence[Gpu], shown: str) -> list[str]:
    """Notes on one library, `shown` as its name; a GPU that none of its code runs on is a warning
    with the --arch-list that builds for every GPU here."""
    if holdings.problem is not None:
        return [f"cuobjdump could not list the GPU code of {shown} ({holdings.problem}); not checked."]
    if not holdings.archs:
        return [f"{shown} holds no CUDA code (cuobjdump: no device code): no GPU architecture to check."]
    held = f"{shown} holds {describe(holdings.archs)}"
    compared = [gpu for gpu in gpus if gpu.compute_capability]
    unknown = [f"GPU {gpu.index} {gpu.name}" for gpu in gpus if not gpu.compute_capability]  # a driver too old to say
    if not compared:
        why = f"{', '.join(unknown)}: no compute capability reported" if unknown else "there was no GPU on this machine"
        return [f"{held}; not compared with a GPU ({why})."]
    lines = [f"{', '.join(unknown)}: no compute capability reported, not compared with {shown}."] if unknown else []
    runs = {gpu: covering_archs(holdings.archs, capability_key(gpu.compute_capability or "")) for gpu in compared}
    fine = [f"{_gpu(gpu)} through {' '.join(archs)}" for gpu, archs in runs.items() if archs]
    if fine:
        lines.append(f"{held}: it runs on {', '.join(fine)}.")
    missed = [gpu for gpu, archs in runs.items() if not archs]
    if missed:
        flag = arch_list_flag([capability_key(gpu.compute_capability or "") for gpu in compared])
        quoted = f'"{flag}"' if ";" in flag else flag
        lines.append(
            f"warning: {held}, and none of it runs on {' or '.join(_gpu(gpu) for gpu in missed)}: its kernels "
            "would fail there with 'no kernel image is available for execution on the device'. Rebuild for the "
            f"GPUs here with --arch-list {quoted} (TORCH_CUDA_ARCH_LIST={flag})."
        )
    return lines


def check_built_archs(folder: Path, gpus: Sequence[Gpu], cuda_root: str | None, os_name: str) -> list[str]:
    """What build-ext says after a successful build about each library it built, for the report; warnings
    start with 'warning: '. Nothing here fails the build: a check that cannot run says why."""
    libraries = built_libraries(folder)
    if not libraries:
        return [
            f"No built library ({', '.join('*' + s for s in LIBRARY_SUFFIXES)}) under {folder}: no GPU code to check."
        ]
    cuobjdump = find_cuobjdump(cuda_root)
    if cuobjdump is None:
        where = f"{os.path.join(cuda_root, 'bin')}, " if cuda_root else ""
        how = "`pip install nvidia-cuda-cuobjdump` installs it" + (
            " (the CUDA Toolkit installer also puts cuobjdump.exe in CUDA's bin folder)"
            if os_name == Platform.WINDOWS
            else ""
        )
        return [
            f"Skipped the check of the built libraries' GPU architectures: cuobjdump is not in {where}on PATH, "
            f"nor from the nvidia-cuda-cuobjdump wheel; {how}."
        ]
    lines = []
    for library in libraries:
        lines += judge(read_holdings(cuobjdump, library), gpus, str(library.relative_to(folder)))
    return lines
