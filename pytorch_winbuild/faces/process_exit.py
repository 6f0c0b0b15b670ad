"""End the process as soon as a successful command is done, without Python's teardown.

The teardown costs 40-130 ms (scripts/bench_cli.py); mypy's `hard_exit` (mypy/util.py) skips it too. What anyone could
observe still happens, in order: threads waited for, atexit handlers, flushes. Only a command that returned normally,
in the process the command line started, with no profiler, tracer, `-X dev` or `-i`, takes this path.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from invoke import Program

_ENDS_PROCESS: set[int] = set()  # id() of the Program objects a console script runs


def mark_process_program(program: Program) -> None:
    """Let `program` end the process when its tasks succeed (the console script's own Program)."""
    _ENDS_PROCESS.add(id(program))


def owns_process(program: Program) -> bool:
    """Whether `program` is the command line of this process: `invoke` / `python -m invoke` (whose
    `__main__` holds Invoke's `program`) or a Program marked by our console script."""
    main = sys.modules.get("__main__")
    return id(program) in _ENDS_PROCESS or (main is not None and getattr(main, "program", None) is program)


def _other_threads_running() -> bool:
    current = threading.current_thread()
    return any(thread is not current and thread.is_alive() and not thread.daemon for thread in threading.enumerate())


def _being_examined() -> bool:
    """A profiler, tracer or debugger, development mode or an interactive prompt wants the normal exit."""
    return bool(
        sys.getprofile() or sys.gettrace() or sys.flags.dev_mode or sys.flags.inspect or os.environ.get("PYTHONINSPECT")
    )


def end_successful_process() -> None:
    """Exit 0 now, as a normal exit would after the atexit handlers; return (for the normal exit)
    when the process is being examined, a non-daemon thread still runs, atexit cannot be run, or
    flushing the output fails."""
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)  # what the interpreter calls at exit (CPython)
    if run_exitfuncs is None or _being_examined() or _other_threads_running():
        return
    run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(0)
