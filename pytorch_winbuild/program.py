"""The `pytorch-winbuild` console script: the same task collection as `invoke` in the repo."""

from __future__ import annotations

from invoke import Program

from . import __version__
from .tasks import namespace


def main() -> None:
    Program(name="pytorch-winbuild", binary="pytorch-winbuild", version=__version__, namespace=namespace).run()
