"""The plan's records and the builder that collects them: what every planning step reads and writes.

They live apart from the steps so that the acting packages (builder, nightly, faces) import what a plan is
without importing how it is made, and so that each step module can share one builder without cycles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Literal

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import CudaInstall, Gpu, VisualStudio
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.model import Era
from pytorch_winbuild.knowledge.msvc import toolset_msc_ver, toolset_short
from pytorch_winbuild.planning.host_compiler import HostChoice
from pytorch_winbuild.planning.python_choice import BuildPython
from pytorch_winbuild.planning.venv_plan import VenvPlan
from pytorch_winbuild.text import quoting_bat as bat

if TYPE_CHECKING:  # the catalog module loads when a plan places an archive
    from pytorch_winbuild.knowledge.catalog import Archive

Action = Literal["set", "prepend", "unset"]

# The variable that points a build at one CUDA toolkit, per OS (PyTorch reads CUDA_PATH on
# Windows, where the NVIDIA installer sets it, and CUDA_HOME on Linux).
CUDA_ROOT_VARIABLE = {"windows": "CUDA_PATH", "linux": "CUDA_HOME"}


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
class PlannedTool:
    """A tool the build runs: its version, the executable, where it comes from and why it was chosen."""

    name: str  # "CMake", "Ninja"
    version: str
    executable: str
    origin: str
    reason: str
    path_first: str | None = None  # a folder the build's PATH must start with (--cmake PATH), else None

    @property
    def label(self) -> str:
        return f"{self.name} {self.version} ({self.executable})"


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
    catalog_archive: Archive  # the archive of build_config/deps.toml, which fetch-deps takes
    set_vars: tuple[tuple[str, str], ...] = ()  # (variable, sub-path) from the catalog
    prepend_vars: tuple[tuple[str, str], ...] = ()


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


GitArgs = tuple[str, ...]  # the words after `git`


@dataclass(frozen=True)
class GitStep:
    """One step of getting the --repo source, as builder/source.py runs it: `tries` in order, until one succeeds
    (the checkout of a ref: its branch, else its tag, else the commit it names, else fetched by name); the git
    runs of one try run in order, each only when the one before succeeded. Most steps have one try of one run."""

    what: str
    tries: tuple[tuple[GitArgs, ...], ...]


@dataclass(frozen=True)
class SourcePlan:
    """The --repo source of a dry run, before the build gets it (builder/source.py acquire_source): the clone made
    or fetched in `folder`, which is also the folder the build runs in, and the git steps that get it there."""

    repo: str  # the repository as git is given it: an http(s) URL without its user and password
    ref: str | None  # None: the remote's default branch
    folder: str  # the clone, in the path form of the plan's machine
    action: Literal["clone", "fetch"]  # a new clone, or the existing one fetched
    steps: tuple[GitStep, ...]
    looked: bool = True  # False: a --host plan, whose folder is another machine's: a clone is planned, or its fetch


@dataclass(frozen=True)
class Plan:
    os: Platform
    pytorch_version: str
    pytorch_version_source: str
    era: Era
    python: str  # the build Python, as the plan shows it
    build_python: BuildPython
    venv: VenvPlan | None  # None: the commands run under build_python itself (build-ext)
    cmake: PlannedTool | None  # the CMake the build runs (None with no venv: build-ext runs no CMake)
    ninja: PlannedTool | None  # the Ninja in the build venv
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
    archs: int = 1  # the CUDA architectures each compile job builds: the list set, or PyTorch's default one
    checkout: SourcePlan | None = None  # a dry run of --repo: how the build gets the source, and where it runs

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
                previous = env.get(
                    change.name, f"%{change.name}%" if self.os == Platform.WINDOWS else f"${change.name}"
                )
                env[change.name] = change.value + self.path_separator + previous
        return env


# Given a catalog archive, where fetch-deps puts it and whether it is there (with a valid marker).
ArchiveLocator = Callable[["Archive"], "tuple[str, bool]"]


@dataclass
class PlanBuilder:
    """Collects changes, decisions and warnings while the plan is made."""

    changes: list[EnvChange] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    archs: int = 1  # the CUDA architectures each compile job builds (MAX_JOBS counts them)

    def set(self, name: str, value: str, reason: str) -> None:
        self.changes.append(EnvChange(name, value, "set", reason))

    def prepend(self, name: str, value: str, reason: str) -> None:
        self.changes.append(EnvChange(name, value, "prepend", reason))

    def unset(self, name: str, reason: str) -> None:
        self.changes.append(EnvChange(name, "", "unset", reason))


def plan_paths(os_name: Platform) -> type[PureWindowsPath] | type[PurePosixPath]:
    """The path type of the plan's machine, whatever machine makes the plan."""
    return PureWindowsPath if os_name == Platform.WINDOWS else PurePosixPath
