"""Invoke entry point. The tasks themselves live in pytorch_winbuild/tasks.py, so the same
collection also runs as the `pytorch-winbuild` console script outside this repo."""

from pytorch_winbuild.tasks import namespace

ns = namespace
