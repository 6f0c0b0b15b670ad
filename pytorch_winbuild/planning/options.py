"""What the user asked for, typed, and the parser that makes it from raw values.

Two edges gather raw values: faces/request.py (flags > invoke.yaml / INVOKE_WINBUILD_* > defaults)
and nightly/matrix.py (one matrix entry). Both hand them to `parse_options`, which reads every text
once with knowledge/choices.py and names the flag or key that is wrong. make_plan and everything
below it take these values as they are: they never see the user's text again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import MAX_CPU_COUNT
from pytorch_winbuild.knowledge.choices import (
    ArchRequest,
    CmakeRequest,
    CompilerCacheChoice,
    CudaChoice,
    CudaWord,
    Generator,
    Mode,
    VsLine,
    parse_arch_request,
    parse_cmake,
    parse_compiler_cache,
    parse_cuda,
    parse_generator,
    parse_mode,
    parse_pytorch_pin,
    parse_toolset,
    parse_vs,
)
from pytorch_winbuild.knowledge.model import Knowledge
from pytorch_winbuild.planning.python_choice import AUTO, PythonRequest

if TYPE_CHECKING:
    from pytorch_winbuild.knowledge.choices import PytorchPin


CMAKE_AUTO = CmakeRequest()  # the plan picks the CMake
RELATIVE_CACHE = PurePath("cache")  # the checkout's cache/ (paths.default_cache_dir): what a bare Options names


@dataclass(frozen=True)
class Options:
    """What the user asked for (flags, config file, environment, a matrix entry), parsed, before any decision."""

    cuda: CudaChoice = CudaWord.AUTO
    vs: VsLine = VsLine.AUTO
    toolset: str | None = None  # the short form, "14.11"
    generator: Generator = Generator.AUTO
    compiler_cache: CompilerCacheChoice = CompilerCacheChoice.AUTO
    arch_list: ArchRequest | None = None
    jobs: int | None = None
    pytorch_version: PytorchPin | None = None  # None: each era's newest release
    mode: Mode = Mode.INSTALL
    libtorch: bool = False  # build LibTorch only (the era's tools/build_libtorch.py) instead of --mode
    cache_dir: PurePath = RELATIVE_CACHE  # a Windows path when planning a Windows machine from Linux
    cache_dir_given: bool = False  # not this machine's default: commands the plan prints must name it
    source_dir: PurePath | None = None
    mkl_version: str | None = None
    magma_version: str | None = None
    magma_debug: bool = False
    no_magma: bool = False
    python: PythonRequest = AUTO  # the build's Python (--python)
    cmake: CmakeRequest = CMAKE_AUTO  # the build's CMake (--cmake): the plan's pick, a PyPI release or a path
    build_venv: bool = True  # run in a venv of the era's requirements (build-ext: in the Python that has torch)
    extension: bool = False  # build-ext: torch.utils.cpp_extension reads TORCH_CUDA_ARCH_LIST, not PyTorch's CMake
    # How messages name a value that did not come from its flag ("winbuild.cuda": invoke.yaml, -f FILE or
    # INVOKE_WINBUILD_CUDA; "entry 'cu128'.cuda"): a refusal blames, and a fix undoes, what the user really set.
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)

    def label(self, name: str) -> str:
        """How messages name the option `name` (an Options field): its flag, or the setting it came from."""
        return self.labels.get(name) or _flag(name)


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def checked_jobs(jobs: int | None, label: str = "--jobs") -> int | None:
    """More jobs than any machine has processors is a typing error, not a plan."""
    if jobs is not None and not 1 <= jobs <= MAX_CPU_COUNT:
        shown = str(jobs) if len(str(jobs)) <= 20 else f"{str(jobs)[:16]}…"
        raise ConfigurationError(
            f"{label} {shown} must be a positive number of parallel compile jobs, at most {MAX_CPU_COUNT}.",
            fix=f"pass about as many jobs as the machine has memory for, or leave {label} out for the plan's figure.",
        )
    return jobs


# The reader of each text flag (planning/flag_table.py TEXT_FLAGS) and of --mode: (knowledge, text, label) → value.
READERS: dict[str, Callable[[Knowledge, object, str], object]] = {
    "cuda": lambda knowledge, text, label: parse_cuda(text, knowledge, label),
    "vs": lambda _, text, label: parse_vs(text, label),
    "toolset": lambda _, text, label: parse_toolset(text, label),
    "generator": lambda _, text, label: parse_generator(text, label),
    "compiler_cache": lambda _, text, label: parse_compiler_cache(text, label),
    "arch_list": lambda knowledge, text, label: parse_arch_request(text, knowledge.gpu.any_release(), label),
    "pytorch_version": lambda _, text, label: parse_pytorch_pin(text, label),
    "mode": lambda _, text, label: parse_mode(text, label),
    "cmake": lambda _, text, label: parse_cmake(text, label),
}


def parse_options(
    knowledge: Knowledge, raw: Mapping[str, object], labels: Mapping[str, str] | None = None, **typed: object
) -> Options:
    """Options from raw values (text, or None for the default), each read once and named by `labels`
    (name → how an error names it: '--cuda', 'winbuild.cuda', "entry 'cu128'.cuda"; default: the flag).
    `typed` passes values the caller already holds as their type (paths, booleans, a PythonRequest)."""

    def label(name: str) -> str:
        return (labels or {}).get(name) or _flag(name)

    values: dict[str, Any] = dict(typed)
    for name, text in raw.items():
        if text is None:
            continue
        reader = READERS.get(name)
        if reader is None:
            raise TypeError(f"parse_options: no reader for {name!r}")  # a caller's mistake, not the user's
        values[name] = reader(knowledge, text, label(name))
    if "jobs" in values:
        checked_jobs(values["jobs"], label("jobs"))
    settings = {name: label(name) for name in values if not label(name).startswith("--")}
    return Options(**values, labels=settings)
