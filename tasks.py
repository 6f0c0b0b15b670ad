"""Invoke entry point. The tasks themselves live in pytorch_winbuild/faces/tasks.py, so the same
collection also runs as the `pytorch-winbuild` console script outside this repo."""

from pytorch_winbuild.faces.tasks import namespace

ns = namespace
