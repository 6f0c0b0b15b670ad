"""The Python `build-ext` builds an extension with: the one whose torch the extension extends.

An extension compiles against the torch of the Python that runs its setup.py, and runs there. So without
--python the choice follows torch: the Python running this task when it has torch, else the build venv of this
cache's last `invoke build` (remembered as soon as that build made or reused it, builder/pipeline.py) when torch
is there; the plan says which and why. With neither, the error's fix names what to run: pip into this Python, or
`invoke build` into this cache, after which build-ext finds that build's venv by itself.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

from pytorch_winbuild import child_processes
from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.faces.flags import CacheChoice, started_program
from pytorch_winbuild.facts.platform import Platform

# Runs in the candidate Python, whichever a build left (Python 2.7 and 3.5 syntax; importlib.metadata is 3.8+):
# the version and package folder of the distribution named torch (a fraction of a second), else of the torch
# package imported (a torch installed under another distribution's name, or without metadata: seconds). The
# folder is where build-ext's key reads torch's headers (builder/extension_key.py) without importing torch.
_TORCH_QUERY = (
    "try:\n"
    "    import importlib.metadata as m\n"
    "    d = m.distribution('torch')\n"
    "    print(d.version)\n"
    "    print(d.locate_file('torch'))\n"
    "except Exception:\n"
    "    import os, torch\n"
    "    print(torch.__version__)\n"
    "    print(os.path.dirname(torch.__file__))\n"
)
QUERY_SECONDS = 120  # importing torch from a cold disk on Windows takes tens of seconds


@dataclass(frozen=True)
class ExtensionPython:
    """The interpreter build-ext runs the extension's setup.py with, and the torch it builds against."""

    executable: str
    torch: str  # the version of its torch (--pytorch-version, when given with --python)
    decision: str | None  # why it was chosen, for the plan's decisions; None: --python named it
    torch_folder: str | None = None  # its torch package's folder; None: not asked (--python with --pytorch-version)


@dataclass(frozen=True)
class TorchInstall:
    """The torch a Python has: its version and its package folder (where torch/include is)."""

    version: str
    folder: str | None


def torch_install(python: str) -> TorchInstall | None:
    """The torch `python` has, or None: none there, or it does not answer. Asked outside any source tree:
    `python -c` puts the current folder first on sys.path, and a checkout's torch/ is not an installed torch."""
    try:
        answer = child_processes.run_bounded(
            [python, "-c", _TORCH_QUERY], timeout=QUERY_SECONDS, cwd=tempfile.gettempdir()
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in answer.stdout.strip().splitlines()]
    if answer.returncode != 0 or len(lines) < 2:
        return None
    return TorchInstall(lines[-2], lines[-1] or None)


class TorchQuery:
    """`torch_install(python)` asked in a thread, started before build-ext imports its planning: the child's start
    and its importlib.metadata (about 0.1 s) then overlap that work instead of following it. `answer` waits for it
    and raises what the thread raised (a stop signal)."""

    def __init__(self, python: str) -> None:
        self.python = python
        self._answer: TorchInstall | None = None
        self._raised: BaseException | None = None
        self._thread = threading.Thread(target=self._ask, name="torch query", daemon=True)
        self._thread.start()

    def _ask(self) -> None:
        try:
            self._answer = torch_install(self.python)
        except BaseException as error:  # re-raised in the thread that waits for the answer
            self._raised = error

    def answer(self) -> TorchInstall | None:
        self._thread.join()
        if self._raised is not None:
            raise self._raised
        return self._answer


def extension_python(
    named: str | None, cache: CacheChoice, pytorch_version: str | None, asked: TorchQuery | None = None
) -> ExtensionPython:
    """--python's interpreter (`named`), else the Python running this task when it has torch, else the build venv
    of this cache's last `invoke build` when it has torch; ToolchainError (exit 3) when the one chosen has none.
    `asked`: this Python's torch, already being asked (TorchQuery)."""
    if named is not None:
        if pytorch_version is None:
            from pytorch_winbuild.facts.interpreter import ask_python

            named = ask_python(named).executable  # a Python (exit 2 when it is not one), by its own name
        found = None if pytorch_version else torch_install(named)
        version = pytorch_version or (found.version if found else None)
        if version is None:
            raise ToolchainError(
                f"torch is not installed in {named}, and an extension builds against the installed torch.",
                fix=f"install PyTorch into that Python first: `{_pip_install(named, pytorch_version)}`; or pass "
                "--python with a Python that has torch.",
            )
        return ExtensionPython(named, version, None, found.folder if found else None)
    from pytorch_winbuild.builder.build_venv import last_venv

    running = sys.executable
    built = last_venv(cache.folder)
    here = asked.answer() if asked is not None and asked.python == running else torch_install(running)
    if here is not None:
        version = here.version
        other = f"; --python {built} would take the torch of this cache's last `invoke build` instead" if built else ""
        return ExtensionPython(
            running,
            version,
            f"Build Python (no --python): {running}, the Python running this task, which has torch {version}, the "
            f"torch the extension builds against{other}.",
            here.folder,
        )
    there = torch_install(built) if built else None
    if built is not None and there is not None:
        version = there.version
        return ExtensionPython(
            built,
            version,
            f"Build Python (no --python): {built}, the build venv of this cache's last `invoke build`, which has "
            f"torch {version}, the torch the extension builds against; the Python running this task ({running}) "
            "has none.",
            there.folder,
        )
    where = (
        f"nor in the build venv of this cache's last `invoke build` ({built})"
        if built
        else f"and this cache ({cache.folder}) holds no build venv of an `invoke build`"
    )
    raise ToolchainError(
        f"torch is not installed in the Python running this task ({running}), {where}; an extension builds against "
        "the torch of the Python it runs with.",
        fix=f"install torch into this Python: `{_pip_install(running, pytorch_version)}`, then run build-ext again; "
        f"or build PyTorch into this cache with `{_build_command(cache)}` (DIR: your PyTorch checkout), after which "
        "build-ext takes that build's venv; or pass --python with a Python that has torch.",
    )


def _pip_install(python: str, pytorch_version: str | None) -> str:
    """The command that installs torch (at --pytorch-version when given) into `python`, as this shell runs it."""
    from pytorch_winbuild.planning.commands_plan import quote_argument

    shell = Platform.running()
    spec = f"torch=={pytorch_version}" if pytorch_version else "torch"
    return f"{quote_argument(shell, python)} -m pip install {quote_argument(shell, spec)}"


def _build_command(cache: CacheChoice) -> str:
    """`invoke build` into the same cache, whose build venv build-ext then takes."""
    return f"{started_program()} build --source DIR{cache.again()}"
