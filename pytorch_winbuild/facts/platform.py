"""The OS a plan is for, as a type: what its paths, programs and scripts look like. Its own small module, as the
task list imports it (faces) and facts/model.py loads the knowledge."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import PurePath, PurePosixPath, PureWindowsPath


class Platform(StrEnum):
    """The OS a plan is for: what its paths, scripts, compilers and archives look like. A StrEnum, so the facts
    file's "windows"/"linux" and JSON output stay the same text."""

    WINDOWS = "windows"
    LINUX = "linux"

    @property
    def path_type(self) -> type[PurePath]:
        """Paths of that machine, on whichever machine plans for it."""
        return PureWindowsPath if self is Platform.WINDOWS else PurePosixPath

    def executable(self, name: str) -> str:
        """A program's file name there: cmake.exe, cmake."""
        return f"{name}.exe" if self is Platform.WINDOWS else name

    @classmethod
    def running(cls) -> Platform:
        """The OS this process runs on."""
        return cls.WINDOWS if sys.platform == "win32" else cls.LINUX
