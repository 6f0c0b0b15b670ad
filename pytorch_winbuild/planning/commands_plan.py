"""The commands a plan prints for people to paste, and the build's own arguments.

Every word is quoted for the plan's shell (cmd on Windows, sh on Linux), and a value no quoting keeps literal is
refused rather than printed changed; kept apart from the decisions, which need no shell to be made.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Sequence

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import CudaInstall
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.knowledge.choices import CudaWord
from pytorch_winbuild.knowledge.model import Era
from pytorch_winbuild.planning.context import PlanContext
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.plan_model import Command, GitArgs, GitStep, PlannedArchive, SourcePlan, VcvarsCall
from pytorch_winbuild.planning.python_choice import BuildPython
from pytorch_winbuild.planning.venv_plan import PIP_INSTALL, VenvPlan
from pytorch_winbuild.text import quoting_bat as bat
from pytorch_winbuild.text.quoting import refuse_control_characters


def build_arguments_for(era: Era, options: Options) -> tuple[str, ...]:
    """What the build runs after the Python interpreter: the era's --mode command, or its LibTorch script."""
    if not options.libtorch:
        return era.commands[options.mode]
    if "libtorch" not in era.commands:
        raise ConfigurationError(
            f"PyTorch {era.name} has no LibTorch build script (tools/build_libtorch.py).",
            fix="build a newer PyTorch, or leave --libtorch out.",
        )
    return era.commands["libtorch"]


_ARGUMENT_FIX = (
    'use a value without it: for the cache folder, one whose path has none of " % ! nor control characters '
    "(--cache-dir, winbuild.cache_dir or the facts file's cache_dir)."
)


def quote_argument(os_name: Platform, value: str, what: str = "the argument") -> str:
    """One argument as the plan's shell reads it: cmd (a prompt or a .bat) on Windows, POSIX sh on Linux.
    A value no quoting keeps literal there is refused (ConfigurationError), never printed changed."""
    if os_name == Platform.WINDOWS:
        return bat.command_argument(value, what, _ARGUMENT_FIX)
    return shlex.quote(refuse_control_characters(value, what))


def command_line(os_name: Platform, words: Sequence[str]) -> str:
    """A command the plan prints, every word quoted for the plan's shell, so it works when pasted."""
    return " ".join(quote_argument(os_name, word) for word in words)


_GIT_FIX = (
    "use a --repo, --ref and folder without it: for the clone's folder, --source or a cache folder (--cache-dir) "
    'whose path has none of " % ! nor control characters.'
)
# Where a failed try of a step leaves git's message: a later try runs, and the last one's message is shown.
_QUIET = {Platform.WINDOWS: " 2>nul", Platform.LINUX: " 2>/dev/null"}


def git_command(os_name: Platform, args: GitArgs) -> str:
    """`git ARGS`, every word quoted for the plan's shell."""
    if os_name == Platform.WINDOWS:
        words = [bat.command_argument(word, "the git command's argument", _GIT_FIX) for word in args]
    else:
        words = [shlex.quote(refuse_control_characters(word, "the git command's argument")) for word in args]
    return " ".join(["git", *words])


def git_step_line(os_name: Platform, step: GitStep) -> str:
    """One step of getting the source as one line that cmd (a prompt or a .bat) and sh both read: its tries joined
    by `||`, each try's runs by `&&` (in parentheses when there are several), every try but the last silent."""
    tries = []
    for index, runs in enumerate(step.tries):
        line = " && ".join(git_command(os_name, args) for args in runs)
        if len(runs) > 1 and len(step.tries) > 1:
            line = f"({line})"
        tries.append(line if index == len(step.tries) - 1 else line + _QUIET[os_name])
    return " || ".join(tries)


def cd_line(os_name: Platform, folder: str) -> str:
    """Change to `folder` (and its drive, in cmd), quoted for the plan's shell."""
    if os_name == Platform.WINDOWS:
        return "cd /d " + bat.command_argument(folder, "the folder the build runs in", _GIT_FIX)
    return "cd -- " + shlex.quote(refuse_control_characters(folder, "the folder the build runs in"))


def source_commands(os_name: Platform, checkout: SourcePlan) -> list[Command]:
    """The git steps that get the --repo source, as the build runs them (builder/source.py)."""
    return [Command.quoted(step.what, functools.partial(git_step_line, os_name, step)) for step in checkout.steps]


def fetch_command(os_name: Platform, options: Options, cuda: CudaInstall | None, archives: list[PlannedArchive]) -> str:
    """`invoke fetch-deps` with every choice spelled out, so it fetches exactly the plan's archives
    whatever the era, source folder or configuration of the shell that runs it."""
    words = ["invoke", "fetch-deps", "--cuda", cuda.version if cuda else CudaWord.CPU]
    for archive in archives:
        words += [f"--{archive.name}-version", archive.version]
        if archive.catalog_archive.variant == "debug":
            words.append("--magma-debug")
    if cuda is not None and not any(a.name == "magma" for a in archives):
        words.append("--no-magma")
    line = command_line(os_name, words)
    if options.cache_dir_given:
        line += " --cache-dir " + quote_argument(os_name, str(options.cache_dir), "the cache folder")
    return line


def venv_commands(os_name: Platform, options: Options, era: Era, venv: VenvPlan) -> list[Command]:
    """Make the build venv and install the era's requirements, as the builder does (builder/build_venv.py).
    The venv lies in the cache folder: a cache folder no quoting keeps is named as such."""

    def line(words: list[str]) -> str:
        quote_argument(os_name, str(options.cache_dir), "the cache folder")
        return command_line(os_name, words)

    pips = [r.spec for r in venv.requirements if r.name == "pip"]  # as builder/build_venv.py installs them
    rest = [spec for spec in venv.specs if spec not in pips]
    return [
        Command.quoted(
            "make the build venv (the build reuses it while its key matches)",
            lambda: line([venv.base, "-m", "venv", venv.folder]),
        ),
    ] + [
        Command.quoted(what, lambda specs=specs: line([venv.python, *PIP_INSTALL, *specs]))  # type: ignore[misc]
        for what, specs in (
            ("upgrade the venv's pip first (the one bundled with an old Python is too old for the pins' wheels)", pips),
            (f"install PyTorch {era.name}'s build requirements into it", rest),
        )
        if specs
    ]


def python_fetch_command(os_name: Platform, options: Options, build_python: BuildPython) -> str:
    """`invoke fetch-deps --python X.Y`, into the plan's cache folder."""
    line = command_line(os_name, ["invoke", "fetch-deps", "--python", build_python.minor])
    if options.cache_dir_given:
        line += " --cache-dir " + quote_argument(os_name, str(options.cache_dir), "the cache folder")
    return line


def plan_commands(
    context: PlanContext,
    vcvars: VcvarsCall | None,
    cuda: CudaInstall | None,
    archives: list[PlannedArchive],
    build_arguments: tuple[str, ...],
    build_python: BuildPython,
    venv: VenvPlan | None,
    checkout: SourcePlan | None = None,
) -> list[Command]:
    era, options, facts = context.era, context.options, context.facts
    commands = source_commands(facts.os, checkout) if checkout is not None else []
    if any(not a.present for a in archives):
        commands.append(
            Command.quoted(
                "download and extract exactly these MKL/MAGMA archives into the cache",
                lambda: fetch_command(facts.os, options, cuda, archives),
            )
        )
    if not build_python.present:
        commands.append(
            Command.quoted(
                f"download and extract CPython {build_python.version} from NuGet into the cache",
                lambda: python_fetch_command(facts.os, options, build_python),
            )
        )
    if venv is not None:
        commands += venv_commands(facts.os, options, era, venv)
    if vcvars:
        commands.append(Command.quoted(f"enter the compiler environment of {vcvars.instance}", lambda: vcvars.command))
    what = "build LibTorch only" if options.libtorch else f"build ({options.mode})"
    python = venv.python if venv else build_python.executable

    def build_line() -> str:
        if venv is not None:
            quote_argument(facts.os, str(options.cache_dir), "the cache folder")
        return command_line(facts.os, [python, *build_arguments])

    if checkout is not None:
        commands.append(
            Command.quoted("go to the clone: the build runs in this folder", lambda: cd_line(facts.os, checkout.folder))
        )
    commands.append(Command.quoted(what, build_line))
    return commands
