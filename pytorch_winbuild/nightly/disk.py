"""Free disk space before an entry starts: a full disk found an hour into a build wastes the night.

The folders an entry writes to may not exist yet (the first clone), so each is checked on its
nearest existing parent, which is on the same drive.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pytorch_winbuild.errors import ToolchainError

GB = 1024**3


def _existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_free_space(folders: list[Path], needed_gb: float, entry: str, needed_from: str) -> float:
    """The smallest free space (GB) among the folders' drives; ToolchainError when below `needed_gb`,
    naming `needed_from`, where the threshold was set (the flag or the matrix key the user can lower)."""
    free, folder = min((shutil.disk_usage(_existing(folder)).free / GB, folder) for folder in folders)
    if free < needed_gb:
        raise ToolchainError(
            f"entry '{entry}' needs {needed_gb:g} GB free ({needed_from}), and the drive of {folder} has "
            f"{free:.1f} GB.",
            fix="free space on that drive (old build folders, `invoke clean --downloads`, the compiler cache), "
            f"move the cache or output folder to a larger drive, or lower {needed_from}.",
        )
    return free
