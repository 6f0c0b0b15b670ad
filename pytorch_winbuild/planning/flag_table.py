"""The plan's flags, one row each: the name, which tasks take it, its default, its `winbuild.*` setting, whether
planning/options.py reads it as text, and its help.

Everything else is derived from this table: faces/flags.py's WINBUILD_DEFAULTS, config_check's settings that may
be numbers, plan_request's PLAN_FLAGS and TEXT_FLAGS, help.py's PLAN_HELP; tests/test_flag_table.py checks each
Invoke task's signature and help against it and parse_options' readers against its text flags. Pure data, cheap
to import: Invoke lists the tasks with it.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_SETTING = object()  # a flag without a `winbuild.<name>` configuration key
PLAN_TASKS = ("env", "build", "build_ext")  # the tasks that make a plan (faces/plan_request.py)


@dataclass(frozen=True, slots=True)
class Flag:
    """One flag. `default`: the task signature's (None: not given); `setting`: the `winbuild.<name>` default, or
    NO_SETTING; `number`: a setting YAML may write as a bare number; `text`: read by parse_options' reader of that
    name; `plan`: handed to plan_from_flags; `help`: for the planning tasks (other tasks word their own)."""

    name: str
    tasks: tuple[str, ...]
    help: str
    default: bool | None = None
    setting: object = NO_SETTING
    number: bool = False
    text: bool = False
    plan: bool = True
    help_for: tuple[tuple[str, str], ...] = ()  # (task, its wording) where a planning task says it otherwise

    def help_of(self, task: str) -> str:
        return dict(self.help_for).get(task, self.help)

    @property
    def option(self) -> str:
        return f"--{self.name.replace('_', '-')}"


_ENV_BUILD = ("env", "build")
_PLANNING = (*_ENV_BUILD, "build_ext")

FLAGS: tuple[Flag, ...] = (
    Flag(
        "cuda",
        (*_PLANNING, "fetch_deps"),
        "CUDA to build with: X.Y (e.g. 9.0), 'cpu', or 'auto' (newest installed that an installed toolset accepts). "
        "Default: auto.",
        setting="auto",
        text=True,
    ),
    Flag(
        "vs",
        _PLANNING,
        "Visual Studio product line: 2015, 2017, 2019, 2022, 2026 or auto (default).",
        setting="auto",
        number=True,
        text=True,
    ),
    Flag(
        "toolset",
        _PLANNING,
        "MSVC toolset, short form such as 14.11 (selected with -vcvars_ver). Default: newest the CUDA accepts.",
        setting=None,
        text=True,
    ),
    Flag(
        "generator",
        _ENV_BUILD,
        "CMake generator: ninja (parallel CUDA compiles), vs, or auto (ninja when installed; default).",
        setting="auto",
        text=True,
    ),
    Flag(
        "compiler_cache",
        _PLANNING,
        "clcache, sccache, ccache (Linux), none, or auto (the era's preferred one that is installed; default).",
        setting="auto",
        text=True,
    ),
    Flag(
        "arch_list",
        _PLANNING,
        "TORCH_CUDA_ARCH_LIST, e.g. '6.1' or '6.1;7.5+PTX': build only for your GPUs (much shorter builds).",
        setting=None,
        text=True,
    ),
    Flag(
        "jobs",
        (*_PLANNING, "fetch_deps"),
        "MAX_JOBS: parallel compile jobs (lower it when the machine runs out of memory).",
        setting=None,
        number=True,
    ),
    Flag(
        "pytorch_version",
        (*_PLANNING, "fetch_deps"),
        "PyTorch version being built (chooses the era's variables); default: the source tree's version.txt, else the "
        "newest era.",
        setting=None,
        text=True,
        help_for=(
            (
                "build_ext",
                "PyTorch version the extension builds against (chooses the era's variables). Default: the installed "
                "torch's version.",
            ),
        ),
    ),
    Flag(
        "python",
        (*_PLANNING, "fetch_deps", "verify"),
        "The build's Python (not the one running this tool): X.Y (e.g. 3.6), a path to python, or auto (default: the "
        "newest installed 64-bit CPython the era accepts; on Windows NuGet's CPython when none is installed). The "
        "build runs in a venv made from it under the cache.",
        setting=None,
        help_for=(
            (
                "build_ext",
                "The Python whose torch the extension builds against and runs: X.Y, a path, or auto (default: the one "
                "running this task when it has torch, else the build venv of this cache's last `invoke build`).",
            ),
        ),
    ),
    Flag(
        "cmake",
        _ENV_BUILD,
        "The build's CMake: auto (default: the newest CMake on PyPI inside the release's bounds, installed into the "
        "build venv), a release X.Y or X.Y.Z from PyPI (e.g. 3.31), or the path of an installed cmake. Checked "
        "against the release's cmake_minimum_required, CMake 4's refusal of old policies, the generator and CUDA.",
        setting=None,
        text=True,
    ),
    Flag(
        "source",
        (*_ENV_BUILD, "fetch_deps"),
        "PyTorch source folder (default: the current folder when it holds PyTorch's setup.py). Used for its version "
        "and path checks.",
        plan=False,
        help_for=(
            (
                "build",
                "PyTorch checkout to build (default: the current folder when it holds PyTorch's setup.py). With "
                "--repo: the folder to clone into (default: <cache>/src/<name>).",
            ),
        ),
    ),
    Flag(
        "cache_dir",
        (*_PLANNING, "fetch_deps", "clean", "verify", "nightly"),
        "pytorch-winbuild cache folder (downloads, MKL/MAGMA, compiler caches). Default: cache/ of the repo, or the "
        "user cache folder.",
        setting=None,
    ),
    Flag(
        "host",
        (*_ENV_BUILD, "doctor"),
        "Plan for the machine described by this facts file (written by `invoke doctor --json --output FILE`) instead "
        "of probing this one.",
        plan=False,
    ),
    Flag(
        "mkl_version",
        (*_ENV_BUILD, "fetch_deps"),
        "MKL archive version (default: the era's, as its Windows CI used it; see build_config/eras.toml).",
    ),
    Flag(
        "magma_version",
        (*_ENV_BUILD, "fetch_deps"),
        "MAGMA version (default: the newest the era uses that exists for the CUDA).",
    ),
    Flag(
        "magma_debug",
        (*_ENV_BUILD, "fetch_deps"),
        "Use MAGMA's debug build (for DEBUG=1 builds of PyTorch).",
        default=False,
    ),
    Flag("no_magma", (*_ENV_BUILD, "fetch_deps"), "Build without MAGMA even for CUDA builds.", default=False),
    Flag(
        "find_links",
        ("build",),
        "pip --find-links for the build venv's requirements: a folder of wheels (an offline machine; add --index-url "
        "to also use an index).",
        setting=None,
        plan=False,
    ),
    Flag(
        "index_url",
        ("build",),
        "pip --index-url for the build venv's requirements (a mirror of PyPI).",
        setting=None,
        plan=False,
    ),
    Flag(
        "mirror",
        ("fetch_deps", "nightly"),
        "Base URL of a flat folder holding the same file names as the public bucket: http(s)://... or file:///... "
        "(also winbuild.mirror / INVOKE_WINBUILD_MIRROR).",
        setting=None,
        plan=False,
    ),
)

BY_NAME = {flag.name: flag for flag in FLAGS}
# A task's own flag that shares a table flag's name but not its meaning: clean's --compiler-cache (a bool, remove the
# compiler caches' folders) is not the plans' --compiler-cache (which cache a build uses).
OTHER_MEANING = {("clean", "compiler_cache")}
# The `winbuild` configuration's keys and defaults (invoke.yaml, -f FILE, INVOKE_WINBUILD_<NAME>).
SETTINGS: dict[str, object] = {flag.name: flag.setting for flag in FLAGS if flag.setting is not NO_SETTING}
NUMBER_SETTINGS = tuple(flag.name for flag in FLAGS if flag.number)  # may be a bare YAML number
PLAN_FLAGS = tuple(flag.name for flag in FLAGS if flag.plan)  # handed to plan_from_flags, by their Options name
TEXT_FLAGS = tuple(flag.name for flag in FLAGS if flag.text)  # read as text by parse_options
PLAN_HELP = {flag.name: flag.help for flag in FLAGS}  # as the planning tasks word it; others quote it


def task_help(task: str) -> dict[str, str]:
    """The help of the table's flags that planning task `task` takes."""
    return {flag.name: flag.help_of(task) for flag in FLAGS if task in flag.tasks}
