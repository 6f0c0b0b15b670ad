"""The plan's TORCH_CUDA_ARCH_LIST, read by the PyTorch code that reads it.

- build (invoke build/env): the release's cmake/public/utils.cmake macro
  torch_cuda_get_nvcc_gencode_flag and select_compute_arch.cmake (CUDA_SELECT_NVCC_ARCH_FLAGS), run
  by cmake in script mode (arch_flags.cmake) with CUDA_VERSION set as FindCUDA sets it;
- build-ext (invoke build-ext): torch.utils.cpp_extension._get_cuda_arch_flags, of the installed
  torch 2.13.0 and of the 1.13.1 and 2.6.0 trees (the function taken from the file with ast and run
  on its own: with TORCH_CUDA_ARCH_LIST set it reads nothing else of torch).

For each release, CUDA and --arch-list (none: the facts' GPUs; each name PyTorch has had; numbers),
PyTorch's reading of the user's list is the truth: where PyTorch turns it into -gencode flags that
the chosen CUDA's nvcc compiles (cuda.toml `sm`), the plan must accept it and its
TORCH_CUDA_ARCH_LIST must give PyTorch the same flags; where PyTorch refuses it, or nvcc could not
compile what it asks for, the plan must refuse it too.
"""

from __future__ import annotations

import ast
import collections
import functools
import logging
import os
import re
import subprocess
import typing
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from client_support import CLIENT_DIR
from plan_machine import KNOWLEDGE, PlanCase, host_files

from pytorch_winbuild.errors import ConfigurationError, ToolchainError

pytestmark = [pytest.mark.client, pytest.mark.xdist_group("client")]

HOSTS = {path.stem: path for path in host_files()}
# (release, reader, facts file, CUDA releases): the readers each release's builds use.
TARGETS = [
    ("1.13.1", "cmake", "vs2019-cuda116-cuda117", ("11.6", "11.7")),
    ("2.6.0", "cmake", "vs2019-vs2022-cuda12", ("12.4", "12.8")),
    ("1.13.1", "cpp_extension", "vs2019-cuda116-cuda117", ("11.7",)),
    ("2.6.0", "cpp_extension", "vs2019-vs2022-cuda12", ("12.8",)),
    ("2.13.0", "cpp_extension", "vs2019-vs2022-cuda12", ("12.4", "12.8")),
]
# --arch-list values: none (the facts' GPUs), every name of PyTorch's tables, a name with +PTX, numbers.
ARCH_INPUTS = (
    None,
    "Kepler",
    "Kepler+Tesla",
    "Maxwell",
    "Maxwell+Tegra",
    "Pascal",
    "Volta",
    "Volta+Tegra",
    "Turing",
    "Ampere",
    "Ampere+Tegra",
    "Ada",
    "Hopper",
    "Blackwell",
    "Blackwell+Tegra",
    "Ampere+PTX",
    "8.6",
    "7.5;8.6+PTX",
)

# Where our plan differs from PyTorch's reading today (strict: each must still fail). Key: (release, reader,
# CUDA, --arch-list).
KNOWN: dict[tuple[str, str, str, str | None], str] = {}


def cases() -> list:
    params = []
    for release, reader, host, cudas in TARGETS:
        for cuda in cudas:
            for arch in ARCH_INPUTS:
                key = (release, reader, cuda, arch)
                marks = [pytest.mark.xfail(strict=True, reason=KNOWN[key])] if key in KNOWN else []
                params.append(
                    pytest.param(release, reader, host, cuda, arch, id=f"{release}/{reader}/{cuda}/{arch}", marks=marks)
                )
    return params


Flags = frozenset[str]  # "arch=compute_86,code=sm_86", as nvcc's -gencode takes them


def _cmake_pairs(text: str) -> Flags:
    items = [item for item in text.split(";") if item]
    return frozenset(item for item in items if item != "-gencode")


@functools.cache
def cmake_flags(tree: Path, cuda: str, arch_list: str) -> Flags | str:
    """-gencode flags from the release's own CMake code, or its error."""
    result = subprocess.run(
        ["cmake", f"-DTREE={tree}", f"-DCUDA_VERSION={cuda}", "-P", str(CLIENT_DIR / "arch_flags.cmake")],
        env={**os.environ, "TORCH_CUDA_ARCH_LIST": arch_list},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = re.search(r"TORCH_GENCODE=(.*)", result.stdout)
    if result.returncode != 0 or "CMake Error" in result.stderr or not found:
        return (
            (result.stderr.strip() or result.stdout.strip()).splitlines()[0]
            if result.stderr or result.stdout
            else "failed"
        )
    return _cmake_pairs(found.group(1))


def _release_cpp_extension(tree: Path) -> Callable[[], list[str]]:
    """The release's own _get_cuda_arch_flags, taken out of torch/utils/cpp_extension.py with ast."""
    source = (tree / "torch" / "utils" / "cpp_extension.py").read_text(encoding="utf-8")
    module = ast.parse(source)
    function = next(
        node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == "_get_cuda_arch_flags"
    )
    namespace = {
        "os": os,
        "collections": collections,
        "re": re,
        "warnings": warnings,
        "List": typing.List,  # noqa: UP006 - the name the old release's annotations use
        "Optional": typing.Optional,
        "torch": None,  # only read when TORCH_CUDA_ARCH_LIST is unset, which it never is here
        "logger": logging.getLogger("cpp_extension"),
    }
    exec(
        compile(ast.Module([function], type_ignores=[]), str(tree / "torch/utils/cpp_extension.py"), "exec"), namespace
    )
    return namespace["_get_cuda_arch_flags"]


@functools.cache
def cpp_extension_reader(release: str, tree: Path | None) -> Callable[[], list[str]]:
    if tree is None:
        from torch.utils.cpp_extension import _get_cuda_arch_flags

        return _get_cuda_arch_flags
    return _release_cpp_extension(tree)


def cpp_extension_flags(release: str, tree: Path | None, arch_list: str) -> Flags | str:
    reader = cpp_extension_reader(release, tree)
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
    try:
        return frozenset(flag.removeprefix("-gencode=") for flag in reader())
    except ValueError as error:
        return str(error)
    finally:
        if saved is None:
            del os.environ["TORCH_CUDA_ARCH_LIST"]
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved


def architectures(flags: Flags) -> set[str]:
    """The X.Y each flag builds for: compute_86 → 8.6, sm_100 → 10.0, sm_90a → 9.0."""
    found = set()
    for flag in flags:
        for digits in re.findall(r"(?:compute|sm)_(\d+)", flag):
            found.add(f"{digits[:-1]}.{digits[-1]}")
    return found


def plan_flags_expected(arch_list: str) -> Flags:
    """The flags the plan's own numbers stand for: X.Y → sm_XY, X.Y+PTX → sm_XY and compute_XY."""
    flags = set()
    for entry in arch_list.replace(" ", ";").split(";"):
        number = entry.removesuffix("+PTX").replace(".", "")
        flags.add(f"arch=compute_{number},code=sm_{number}")
        if entry.endswith("+PTX"):
            flags.add(f"arch=compute_{number},code=compute_{number}")
    return frozenset(flags)


@pytest.mark.parametrize(("release", "reader", "host", "cuda", "arch_list"), cases())
def test_plan_arch_list_means_what_pytorch_reads(release, reader, host, cuda, arch_list, sources):
    tree = sources.tree(release) if release != "2.13.0" else None

    def read(text: str) -> Flags | str:
        if reader == "cmake":
            return cmake_flags(tree, cuda, text)
        return cpp_extension_flags(release, tree, text)

    case = PlanCase(release, HOSTS[host], cuda, "ninja", "none", arch_list=arch_list, extension=reader != "cmake")
    try:
        planned = case.plan()["env"]["TORCH_CUDA_ARCH_LIST"]
    except (ConfigurationError, ToolchainError) as error:
        planned = None
        refusal = error.message if hasattr(error, "message") else str(error)
    if arch_list is None:
        assert planned is not None, refusal
        assert read(planned) == plan_flags_expected(planned), f"PyTorch reads {planned!r} as {read(planned)}"
        return
    truth = read(arch_list)
    compiles = set(KNOWLEDGE.cuda_release(cuda).sm)
    if isinstance(truth, str) or not architectures(truth) <= compiles:
        why = truth if isinstance(truth, str) else f"CUDA {cuda}'s nvcc lacks {sorted(architectures(truth) - compiles)}"
        assert planned is None, (
            f"PyTorch {release} ({reader}) cannot build {arch_list!r} ({why}); the plan wrote {planned!r}"
        )
        return
    assert planned is not None, (
        f"PyTorch {release} ({reader}) builds {arch_list!r} as {sorted(truth)}; the plan refused: {refusal}"
    )
    assert read(planned) == truth, (
        f"{arch_list!r}: PyTorch builds {sorted(truth)}, the plan's {planned!r} builds {read(planned)}"
    )


@pytest.mark.parametrize(("reader", "expected"), [("cmake", "10.0"), ("cpp_extension", "10.0+PTX")])
def test_blackwell_with_2_6_0_and_cuda_12_8(reader, expected, sources):
    """Issue 28's case: v2.6.0's select_compute_arch.cmake reads Blackwell as 10.0 and its cpp_extension.py as
    10.0+PTX; CUDA 12.8 compiles both, so the plan writes what the reader makes of the name."""
    tree = sources.tree("2.6.0")
    case = PlanCase("2.6.0", HOSTS["vs2019-vs2022-cuda12"], "12.8", "ninja", "none", "Blackwell", reader != "cmake")
    planned = case.plan()["env"]["TORCH_CUDA_ARCH_LIST"]
    assert planned == expected
    if reader == "cmake":
        assert cmake_flags(tree, "12.8", planned) == cmake_flags(tree, "12.8", "Blackwell")
    else:
        assert cpp_extension_flags("2.6.0", tree, planned) == cpp_extension_flags("2.6.0", tree, "Blackwell")
