"""The `pytorch-winbuild` console script: the same task collection as `invoke` in the repo."""

from __future__ import annotations

import sys

from pytorch_winbuild import __version__
from pytorch_winbuild.faces import process_exit
from pytorch_winbuild.faces.cli_errors import CheckedProgram
from pytorch_winbuild.faces.tasks import namespace


class WinbuildProgram(CheckedProgram):
    """Invoke's Program with our command-line errors (CheckedProgram, faces/cli_errors.py), and the
    modules our tasks import later keep their bytecode.

    Invoke turns bytecode writing off while it parses its own flags (`--write-pyc`, meant for a
    tasks.py beside the user's files); the package's lazily imported modules (probe, deps, builder)
    would then compile from source on every run. The interpreter's own choice (-B,
    PYTHONDONTWRITEBYTECODE) is restored.
    """

    def parse_core(self, argv: list[str] | None) -> None:
        super().parse_core(argv)
        if not self.args["write-pyc"].value:
            sys.dont_write_bytecode = bool(sys.flags.dont_write_bytecode)


def main() -> None:
    program = WinbuildProgram(
        name="pytorch-winbuild", binary="pytorch-winbuild", version=__version__, namespace=namespace
    )
    process_exit.mark_process_program(program)
    program.run()
