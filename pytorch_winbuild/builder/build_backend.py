"""Before the era's build command runs: the checkout holds what it runs, and pip can import its backend.

From 2.5 the command is `python -m pip install --no-build-isolation -v .` (build_config/eras.toml).
pip builds a folder that has a pyproject.toml or a setup.py; without build isolation it imports the
tree's PEP 517 backend from the build's own Python instead of installing it, so a missing backend
(scikit-build-core on PyTorch `main` since setup.py was removed, pytorch/pytorch#189758) would stop
the build only after pip has started, with pip's "BackendUnavailable". Both are checked first.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.facts.source_tree import build_backend

# pip's own rule for a local project folder (pip/_internal/req/constructors.py, is_installable_dir).
_PIP_PROJECT_FILES = ("pyproject.toml", "setup.py")


def check_checkout(source: Path, arguments: tuple[str, ...] | list[str], python: str) -> None:
    """Refuse a checkout the command cannot build (exit 2), or a build Python without its backend (exit 3)."""
    if tuple(arguments[:2]) == ("-m", "pip"):
        if not any((source / name).is_file() for name in _PIP_PROJECT_FILES):
            raise ConfigurationError(
                f"{source} has neither a pyproject.toml nor a setup.py, so pip cannot build it: it is not a "
                "PyTorch checkout.",
                fix="pass --source with the folder of a PyTorch checkout, or --repo URL to clone one.",
            )
        if "--no-build-isolation" in arguments:
            _check_backend(source, python)
        return
    script = next((argument for argument in arguments if argument.endswith(".py")), "setup.py")
    if not (source / script).is_file():
        raise ConfigurationError(
            f"{source} has no {script}, so it is not a PyTorch checkout this build can run.",
            fix="pass --source with the folder of a PyTorch checkout, or --repo URL to clone one.",
        )


def _check_backend(source: Path, python: str) -> None:
    backend = build_backend(source)
    if backend is None:
        return  # a setup.py-only tree: pip runs setup.py through setuptools, which the era's Python has
    found = subprocess.run(
        [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)",
         backend.module],
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )  # fmt: skip
    if found.returncode == 0:
        return
    requirements = source / "requirements-build.txt"
    install = (
        f"`{python} -m pip install -r {requirements}`"
        if requirements.is_file()
        else f"`{python} -m pip install` the packages of its [build-system] requires"
        + (f" ({', '.join(backend.requires)})" if backend.requires else "")
    )
    raise ToolchainError(
        f"the checkout is built by the Python package {backend.module!r} ({backend.declared_in} of {source}), "
        f"which {python} cannot import; the build runs pip with --no-build-isolation, so pip would not install it.",
        fix=f"install the checkout's build requirements into that Python: {install}, then run the build again.",
    )
