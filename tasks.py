"""Invoke entry point. The tasks themselves live in pytorch_winbuild/faces/tasks.py, so the same
collection also runs as the `pytorch-winbuild` console script outside this repo."""

import sys

# Invoke turns bytecode writing off before it loads this file (its --write-pyc flag, so that no
# tasks.pyc appears beside tasks.py). Left off, every run compiles our whole package from source
# again: about 0.1-0.2 s of each command. Give the interpreter back its own choice (-B or
# PYTHONDONTWRITEBYTECODE) for the package's modules.
sys.dont_write_bytecode = bool(sys.flags.dont_write_bytecode)

from pytorch_winbuild.faces.tasks import namespace  # noqa: E402  (after the bytecode setting above)

ns = namespace
