"""Where pytorch-winbuild keeps its cache when the user does not say."""

from __future__ import annotations

import os
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parent.parent


def running_from_checkout() -> bool:
    """True when the package runs from this repo rather than from an installed copy."""
    return (_REPO_ROOT / "tasks.py").is_file() and (_REPO_ROOT / "build_config").is_dir()


def default_cache_dir() -> Path:
    """cache/ of the checkout when run from the repo; the user's cache folder when installed."""
    if running_from_checkout():
        return _REPO_ROOT / "cache"
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "pytorch-winbuild"
