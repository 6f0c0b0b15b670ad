"""End the process as soon as a successful command is done, without Python's teardown.

After the last line is printed, a normal exit still frees every object and module the command
loaded: about 40 ms for Invoke alone and 50-130 ms after a plan or a fetch on the 2-core machine
of scripts/bench_cli.py, a fifth of a dry run. mypy ends its runs the same way for the same reason
(`hard_exit` in mypy/util.py: "faster than a normal exit() since objects are not freed").

What a normal exit does that anyone could observe still happens, in the same order: other threads
have finished (if a non-daemon one still runs, the normal exit waits for it), the atexit handlers
run, and stdout/stderr are flushed (if a flush fails, the normal exit reports it). Only a command
that returned normally takes this path, and only in the process the command line started; errors,
Ctrl-C and in-process callers such as the tests exit the usual way.
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


def end_successful_process() -> None:
    """Exit 0 now, as a normal exit would after the atexit handlers; return (for the normal exit)
    when a non-daemon thread still runs, atexit cannot be run, or flushing the output fails."""
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)  # what the interpreter calls at exit (CPython)
    if run_exitfuncs is None or _other_threads_running():
        return
    run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(0)
