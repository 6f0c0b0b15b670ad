"""What a PyTorch source tree says about itself: whether it is one, and its version."""

from __future__ import annotations

import re
from pathlib import Path

from pytorch_winbuild.errors import ConfigurationError

# Old setup.py files (0.3–1.x) carry the version in a line such as `version = '0.4.0'`.
_SETUP_VERSION = re.compile(r"""^version\s*=\s*['"]([0-9][^'"]*)['"]""", re.MULTILINE)


def is_pytorch_source(folder: Path) -> bool:
    """A folder with PyTorch's setup.py (it names the torch package) is a source tree."""
    setup = folder / "setup.py"
    if not setup.is_file():
        return False
    try:
        text = setup.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "torch" in text and (
        (folder / "torch").is_dir() or (folder / "version.txt").is_file() or "pytorch" in text.lower()
    )


def default_source(cwd: Path) -> Path | None:
    """The current folder, when it holds PyTorch's setup.py."""
    return cwd if is_pytorch_source(cwd) else None


def read_source_version(folder: Path) -> tuple[str, str] | None:
    """(version, where it was read) from version.txt, or the `version = '...'` line of setup.py."""
    version_file = folder / "version.txt"
    if version_file.is_file():
        version = version_file.read_text(encoding="utf-8", errors="replace").strip()
        if not version:
            raise ConfigurationError(f"{version_file} is empty.", fix="restore it from git, or pass --pytorch-version.")
        return version, str(version_file)
    setup = folder / "setup.py"
    if setup.is_file():
        match = _SETUP_VERSION.search(setup.read_text(encoding="utf-8", errors="replace"))
        if match:
            return match.group(1), f"{setup} (version = ...)"
    return None
