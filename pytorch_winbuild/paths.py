"""Where pytorch-winbuild keeps its cache when the user does not say."""

from __future__ import annotations

import os
from pathlib import Path

# The checkout's root (tasks.py, build_config/, invoke.yaml) when running from the repo.
REPO_ROOT = Path(__file__).resolve().parent.parent


def running_from_checkout() -> bool:
    """True when the package runs from this repo rather than from an installed copy."""
    return (REPO_ROOT / "tasks.py").is_file() and (REPO_ROOT / "build_config").is_dir()


def default_cache_dir() -> Path:
    """cache/ of the checkout when run from the repo; the user's cache folder when installed."""
    if running_from_checkout():
        return REPO_ROOT / "cache"
    if os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "pytorch-winbuild"


def peaks_file(cache_dir: Path) -> Path:
    """The compiler peaks that builds record for the next plan (builder/memory_record.py)."""
    return cache_dir / "memory" / "peaks.json"
