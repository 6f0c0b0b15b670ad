"""Turn errors into one paragraph and an exit code, never a traceback for user errors.

Each layer is one of Invoke's extension points: `reports_errors` (a task's body), `WinbuildTask` (its flags) and
`CheckedProgram` (the command line and the `-f` file, before any task runs). `adopt_invoke_program` makes the running
`invoke` binary's Program a CheckedProgram, so both entry points give the same messages and exit codes.
Why that one step is needed: docs/architecture.md.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ParamSpec, TypeGuard

from invoke import Program, Task
from invoke.exceptions import Exit, ParseError
from invoke.parser import ParserContext

from pytorch_winbuild.child_processes import stop_cause, stop_signals
from pytorch_winbuild.errors import ConfigurationError, InternalError, InterruptedByUser, WinbuildError
from pytorch_winbuild.faces import process_exit
from pytorch_winbuild.faces.flags import WINBUILD_DEFAULTS

P = ParamSpec("P")


def reports_errors(task_body: Callable[P, None]) -> Callable[P, None]:
    """Wrap a task body: WinbuildError → its paragraph + exit code; anything else → InternalError."""

    @functools.wraps(task_body)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            with stop_signals():  # SIGTERM, SIGHUP, SIGBREAK stop the child tree as Ctrl-C does
                return task_body(*args, **kwargs)
        except Exit:
            raise
        except WinbuildError as exc:
            raise Exit(exc.paragraph(), code=exc.exit_code) from None
        except BrokenPipeError:  # the reader went away (`invoke diagnose x.log | head`): stop quietly
            _quiet_stdout()
            return None
        except KeyboardInterrupt as stop:
            cause, exit_code = stop_cause(stop)
            interrupted = InterruptedByUser(f"stopped by {cause}.", exit_code=exit_code)
            raise Exit(interrupted.paragraph(), code=interrupted.exit_code) from None
        except Exception as exc:  # a bug: keep the traceback, but say what it is
            traceback.print_exc(file=sys.stderr)
            error = InternalError(
                f"{type(exc).__name__}: {exc}",
                fix="this is a bug in pytorch-winbuild; please report it with the traceback above and `invoke "
                "doctor --json`.",
            )
            raise Exit(error.paragraph(), code=error.exit_code) from None

    return wrapper


def _quiet_stdout() -> None:
    """Standard output to the null device, so the interpreter's last flush meets no closed pipe either."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


# ------------------------------------------------------------------ tasks and their short flags

HELP_FLAGS = ("--help", "-h")


class WinbuildTask(Task):
    """An Invoke task whose automatic short flags never take `-h`.

    Invoke gives each flag the first free letter of its name, so `--host` became `-h` on doctor and
    `--cache-dir` became `-h` on fetch-deps, and `invoke doctor -h` read the next word as a facts
    file instead of showing the help. With `h` reserved, `-h` after a task name is always help."""

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, object]:  # Task's own types
        return super().arg_opts(name, default, set(taken_names) | {"h"})


# ------------------------------------------------------------------ the command line, before a task runs

_CONFIG_HINT = "`invoke.yaml` (or the file given with -f)"


def _fail(program: Program, message: str, fix: str) -> Exit:
    error = ConfigurationError(message, fix=fix)
    return Exit(error.paragraph(), code=error.exit_code)


def _binary(program: Program) -> str:
    names = program.binary_names
    name = names[0] if names and names[0] else "invoke"
    return "invoke" if name.endswith(".py") else name


def _long_flags(context: ParserContext | None) -> list[str]:
    if context is None:
        return []
    return sorted(flag for flag in (*context.flags, *context.inverse_flags) if flag.startswith("--"))


def _task_names(program: Program) -> list[str]:
    return (
        sorted(program.parser.contexts) if getattr(program, "parser", None) else sorted(program.collection.task_names)
    )


def _tasks_with_flag(program: Program, flag: str, task: str) -> list[str]:
    """The other tasks that take `flag` (--host: build, doctor, env), for a flag given to the wrong task."""
    contexts = getattr(getattr(program, "parser", None), "contexts", {}) or {}
    return sorted(name for name, other in contexts.items() if name != task and flag in _long_flags(other))


def _did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else "."


def _is_task_context(context: ParserContext | None) -> TypeGuard[ParserContext]:
    return context is not None and bool(getattr(context, "name", None))


def _explain_parse_error(program: Program, exc: ParseError) -> Exit:
    """Invoke's parser message → one paragraph with the flag and the fix (exit 2)."""
    binary = _binary(program)
    context = exc.context
    task = context.name if _is_task_context(context) else None
    task_help = (
        f"run `{binary} {task} --help` for its flags"
        if task
        else f"run `{binary} --list` for the tasks and `{binary} TASK --help` for a task's flags"
    )
    text = str(exc)
    unknown = re.fullmatch(r"No idea what '(.*)' is!", text, re.DOTALL)
    if unknown:
        token = unknown.group(1)
        if token.startswith("-"):
            flag = token.split("=", 1)[0]
            if task:
                others = _tasks_with_flag(program, flag, task)
                if others:  # a flag of other tasks: say whose, not a look-alike of this task's
                    return _fail(
                        program,
                        f"`{binary} {task}` has no flag {flag}; {', '.join(others)} "
                        f"{'has' if len(others) == 1 else 'have'} it.",
                        f"{task_help}, or run the task that has it (`{binary} {others[0]} --help`).",
                    )
                return _fail(
                    program,
                    f"`{binary} {task}` has no flag {flag}{_did_you_mean(flag, _long_flags(context))}",
                    f"{task_help}.",
                )
            return _fail(
                program,
                f"{flag} is not a flag of {binary}{_did_you_mean(flag, _long_flags(program.initial_context))}",
                f"{task_help}.",
            )
        tasks = _task_names(program)
        if task:
            return _fail(
                program,
                f"`{binary} {task}` takes no argument {token!r}, and there is no task of that "
                f"name{_did_you_mean(token, tasks)}",
                f"{task_help}; a value belongs after its flag (--name VALUE).",
            )
        return _fail(
            program,
            f"there is no task named {token!r}{_did_you_mean(token, tasks)}",
            f"run `{binary} --list` for the tasks.",
        )
    needs_value = re.fullmatch(r"Flag <Argument: ([\w-]+)[^>]*> needed value and was not given one!", text)
    if needs_value:
        flag = "--" + needs_value.group(1).replace("_", "-")
        where = f" of `{binary} {task}`" if task else ""
        return _fail(
            program,
            f"{flag}{where} needs a value, and none was given.",
            f"write the value after the flag ({flag} VALUE), or leave the flag out; {task_help}.",
        )
    no_value = re.fullmatch(r"Flag <Argument: ([\w-]+)[^>]*> doesn't take any value!", text)
    if no_value:
        flag = "--" + no_value.group(1).replace("_", "-")
        return _fail(
            program,
            f"{flag} is a switch and takes no value.",
            f"write {flag} alone (leave it out for the default); {task_help}.",
        )
    positional = re.fullmatch(r"'(.+)' did not receive required positional arguments: (.+)", text)
    if positional:
        names = " ".join(name.strip(" '").upper() for name in positional.group(2).split(","))
        return _fail(
            program,
            f"`{binary} {positional.group(1)}` needs {names}, and none was given.",
            f"write it after the task name: `{binary} {positional.group(1)} {names}`; run `{binary} "
            f"{positional.group(1)} --help` for the details.",
        )
    return _fail(program, f"the command line cannot be read: {text}", f"{task_help}.")


def _empty_values(contexts: Iterable[ParserContext]) -> tuple[str | None, str] | None:
    """(task, flag) of the first flag or argument given as an empty string; '' is never a value (a task's context
    has its name; Invoke's type allows None)."""
    for context in contexts:
        for argument in context.args.values():
            value = argument.value
            values = value if isinstance(value, list) else [value]
            if any(isinstance(item, str) and not item.strip() for item in values):
                name = argument.name.replace("_", "-")
                return context.name, (name.upper() if argument.positional else f"--{name}")
    return None


def _help_given_as_argument(contexts: Iterable[ParserContext]) -> str | None:
    """The task whose PATH/LOGFILE took `--help` or `-h`: Invoke fills a missing positional argument
    before it looks for its own --help, so `invoke build-ext --help` read "--help" as the folder."""
    for context in contexts:
        if any(argument.positional and argument.value in HELP_FLAGS for argument in context.args.values()):
            return context.name
    return None


class CheckedProgram(Program):
    """Invoke's Program, with its own errors before a task runs made ours: reading the command line
    (`parse_tasks`) and the `-f` configuration file (`update_config`) give one paragraph and exit code 2.
    A successful command then ends without Python's teardown (`execute`, faces/process_exit.py)."""

    def parse_tasks(self) -> None:
        try:
            super().parse_tasks()
        except ParseError as exc:
            raise _explain_parse_error(self, exc) from None
        except ValueError as exc:  # a value Invoke itself converts (a core flag such as --command-timeout)
            raise _fail(
                self,
                f"a value on the command line cannot be read ({exc}).",
                f"run `{_binary(self)} TASK --help` for what each flag takes.",
            ) from None
        asked = _help_given_as_argument(self.tasks)
        if asked:
            self.core[0].args.help.value = asked  # handled by Invoke's parse_cleanup: that task's help, exit 0
            return
        empty = _empty_values(self.tasks)
        if empty:
            task, flag = empty
            raise _fail(
                self,
                f"{flag} of `{_binary(self)} {task}` is empty.",
                f"give it a value, or leave it out for its default; run `{_binary(self)} {task} --help` for "
                "what it takes.",
            )

    def parse_core(self, argv: list[str] | None) -> None:
        """Invoke prints --version here (the console script's; `invoke`'s own runs before our tasks load)."""
        try:
            super().parse_core(argv)
        except BrokenPipeError:
            _quiet_stdout()
            raise Exit(code=0) from None

    def parse_cleanup(self) -> None:
        """Invoke prints the help, a task's help or the task list here; a reader that went away
        (`pytorch-winbuild --help | head`) ends it quietly, as Unix tools do, not with a traceback."""
        try:
            super().parse_cleanup()
        except BrokenPipeError:
            _quiet_stdout()
            raise Exit(code=0) from None

    def update_config(self, merge: bool = True) -> None:
        _check_runtime_config(self)
        try:
            super().update_config(merge)
        except Exit:
            raise
        except Exception as exc:  # Invoke's own merge/load errors (e.g. a mapping where a value was expected)
            raise _fail(
                self,
                f"the configuration cannot be combined: {type(exc).__name__}: {exc}.",
                f"correct {_CONFIG_HINT}: each setting must have the same kind of value as its default.",
            ) from None

    def execute(self) -> None:
        super().execute()
        if process_exit.owns_process(self):
            process_exit.end_successful_process()


def _check_runtime_config(program: Program) -> None:
    """The `-f` file (or INVOKE_RUNTIME_CONFIG), checked as faces/config_check checks the others."""
    runtime = program.args.config.value or os.environ.get("INVOKE_RUNTIME_CONFIG")
    if not runtime:
        return
    from pytorch_winbuild.faces.config_check import SUFFIXES, check_config_files

    path = Path(runtime).expanduser()
    if not path.is_file():
        raise _fail(
            program,
            f"configuration file {runtime} (-f / INVOKE_RUNTIME_CONFIG) "
            f"{'is a folder' if path.is_dir() else 'does not exist'}.",
            "pass the path of a YAML, JSON or Python configuration file, or leave -f out.",
        )
    try:
        if path.suffix in SUFFIXES:  # a Python config file (.py) is Invoke's to load
            check_config_files([path], WINBUILD_DEFAULTS)
    except ConfigurationError as error:
        raise Exit(error.paragraph(), code=error.exit_code) from None


def adopt_invoke_program() -> None:
    """Make the Program of Invoke's own `invoke` binary (`invoke`, `inv`, `python -m invoke`) a
    CheckedProgram, when it loads our tasks; see the module docstring for why this one step is needed.

    That binary runs `invoke.main.program`, an instance of Invoke's Program made before any tasks.py
    is found; `__main__` holds it. Only that one object changes class, to a subclass that adds methods
    and no state, while its `run` is in `load_collection`: what `run` calls next (parse_tasks,
    update_config, execute) is CheckedProgram's. Invoke's classes and modules are left as they are,
    and any other Program (a test's, another tool's) is untouched."""
    program = getattr(sys.modules.get("__main__"), "program", None)
    if type(program) is Program:  # exactly Invoke's own class: never a Program someone made from it
        program.__class__ = CheckedProgram
