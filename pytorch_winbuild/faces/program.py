"""The `pytorch-winbuild` console script: the same task collection as `invoke` in the repo."""

from __future__ import annotations

from invoke import Program

from pytorch_winbuild import __version__
from pytorch_winbuild.faces.tasks import namespace


def main() -> None:
    Program(name="pytorch-winbuild", binary="pytorch-winbuild", version=__version__, namespace=namespace).run()
