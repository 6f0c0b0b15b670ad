"""Turn errors into one paragraph and an exit code, never a traceback for user errors."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from typing import Any, Callable, TypeVar

from invoke.exceptions import Exit

from .errors import InternalError, InterruptedByUser, WinbuildError

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(task_body: F) -> F:
    """Wrap a task body: WinbuildError → its paragraph + exit code; anything else → InternalError."""

    @functools.wraps(task_body)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return task_body(*args, **kwargs)
        except Exit:
            raise
        except WinbuildError as exc:
            raise Exit(exc.paragraph(), code=exc.exit_code) from None
        except BrokenPipeError:
            # the reader went away (`invoke diagnose x.log | head`): stop quietly, as Unix tools do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return None
        except KeyboardInterrupt:
            error = InterruptedByUser("stopped by Ctrl-C.")
            raise Exit(error.paragraph(), code=error.exit_code) from None
        except Exception as exc:  # a bug: keep the traceback, but say what it is
            traceback.print_exc(file=sys.stderr)
            error = InternalError(
                f"{type(exc).__name__}: {exc}",
                fix="this is a bug in pytorch-winbuild; please report it with the traceback above and `invoke doctor --json`.",
            )
            raise Exit(error.paragraph(), code=error.exit_code) from None

    return wrapper  # type: ignore[return-value]
