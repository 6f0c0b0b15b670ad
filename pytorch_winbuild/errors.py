"""Every fatal error the user can meet, each owning an exit code and a message that says what to do.

Tasks never print tracebacks for these: `tasks.reports_errors` turns them into one paragraph on
stderr and the class's exit code. Anything else is a bug and exits with `InternalError.exit_code`.
"""

from __future__ import annotations

from pytorch_winbuild.text.redact import redact_text
from pytorch_winbuild.text.terminal_text import terminal_safe


class WinbuildError(Exception):
    """Base class: a problem the user can fix, described in one paragraph."""

    exit_code = 1
    title = "error"

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def paragraph(self) -> str:
        """The one paragraph a user sees: the last gate, so a credential is masked and a control sequence
        quoted from a path, a log or git cannot act on the terminal."""
        text = f"{self.title}: {self.message}"
        if self.fix:
            text += f" Fix: {self.fix}"
        return terminal_safe(redact_text(text))


class ConfigurationError(WinbuildError):
    """Bad options, config values, facts files or knowledge files."""

    exit_code = 2
    title = "configuration error"


class ToolchainError(WinbuildError):
    """Something the build needs is missing or incompatible on the machine."""

    exit_code = 3
    title = "toolchain error"


class DependencyError(WinbuildError):
    """Something the build fetches could not be had: MKL/MAGMA (downloaded, verified or extracted), a NuGet CPython,
    or the --repo source (SourceError)."""

    exit_code = 4
    title = "dependency error"


class SourceError(DependencyError):
    """git could not clone, fetch, check out or update the submodules of the --repo source (or a nightly entry's
    repo). Exit 4, as a failed download: a script that retries when the network or a server failed retries both."""

    title = "source error"


class BuildError(WinbuildError):
    """The build itself failed (compiler, linker, CMake, setup.py)."""

    exit_code = 5
    title = "build failed"


class VerificationError(WinbuildError):
    """The build finished but the result does not import or work."""

    exit_code = 6
    title = "verification failed"


class BusyError(WinbuildError):
    """Another run holds the lock on the cache or the nightly."""

    exit_code = 7
    title = "busy"


class InterruptedByUser(WinbuildError):
    """Ctrl-C, or another stop signal (SIGTERM, SIGHUP; SIGBREAK on Windows): the process tree was stopped.

    130 for Ctrl-C; a signal's stop passes its own code, 128 + its number (143 for SIGTERM, 129 for SIGHUP)."""

    exit_code = 130
    title = "interrupted"

    def __init__(self, message: str, *, fix: str | None = None, exit_code: int | None = None) -> None:
        super().__init__(message, fix=fix)
        if exit_code is not None:
            self.exit_code = exit_code


class InternalError(WinbuildError):
    """A bug in pytorch-winbuild itself."""

    exit_code = 70
    title = "internal error"
