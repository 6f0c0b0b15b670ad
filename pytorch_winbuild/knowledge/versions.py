"""PyTorch versions as the user and the source tree state them, parsed strictly (PEP 440).

`packaging` is the reference implementation of PEP 440 (pip's own parser), so "2.6.0a0+git1234"
(a source tree's version.txt) and "v2.6.0" (a git tag) mean what pip says they mean. Beyond PEP
440 a PyTorch version must name at least MAJOR.MINOR and at most MAJOR.MINOR.PATCH, and may hold
no whitespace or control character: it is printed into plans and scripts.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from pytorch_winbuild.errors import ConfigurationError

if TYPE_CHECKING:
    from packaging.version import Version

# Words that mean "the newest era" wherever a PyTorch version is asked for.
NEWEST_WORDS = ("latest", "main", "master", "nightly")
RELEASE_TAG = re.compile(r"v(\d+\.\d+\.\d+)")  # PyTorch's release tags: v1.0.1, v2.6.0


@lru_cache(maxsize=4096)
def version_tuple(text: str) -> tuple[int, ...]:
    """'2.13.0a0+git1234' → (2, 13, 0); used to compare PyTorch, Python and CMake versions.

    Cached: a plan and its fixes compare the same few dozen versions of the knowledge files millions of times (the
    fix-promise matrix called this 19 million times, 37% of its time); the answer is an immutable tuple of the text
    alone, and a refusal (ConfigurationError) is raised again each time, as lru_cache keeps no exceptions."""
    numbers: list[int] = []
    for part in text.strip().split("."):
        digits = ""
        for char in part:
            if not ("0" <= char <= "9"):  # ASCII only: "²".isdigit() is true, int("²") fails
                break
            digits += char
        if not digits:
            break
        numbers.append(int(digits))
        if len(digits) != len(part):
            break
    if not numbers:
        raise ConfigurationError(f"'{text}' is not a version number.")
    return tuple(numbers)


def release_tuple(text: str) -> tuple[int, int, int]:
    """'1.7' → (1, 7, 0): a release as eras and ranges write it, compared with the (major, minor, patch) keys."""
    parts = (*version_tuple(text), 0, 0)
    return parts[0], parts[1], parts[2]


def _shown(text: str) -> str:
    """The text as a Python literal, so a control character is visible and harmless in a message."""
    return ascii(text)


def parse_pytorch_version(text: str, where: str) -> Version:
    """'2.6', '2.6.0a0+git1234', 'v1.0.1' → Version; anything else is exit 2, naming `where`."""
    from packaging.version import InvalidVersion, Version  # 6 ms to import: only when a version is given

    fix = "pass MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. --pytorch-version 1.0.1 or 2.6 (or latest)."
    if not text or any(not char.isprintable() or char.isspace() for char in text):
        raise ConfigurationError(
            f"{where}: {_shown(text)} is not a PyTorch version (it is empty or holds whitespace or a control "
            "character).",
            fix=fix,
        )
    try:
        version = Version(text)
    except InvalidVersion:
        raise ConfigurationError(f"{where}: {_shown(text)} is not a PyTorch version (PEP 440).", fix=fix) from None
    if not 2 <= len(version.release) <= 3 or version.epoch:
        raise ConfigurationError(
            f"{where}: {_shown(text)} is not a PyTorch version: it needs MAJOR.MINOR, at most MAJOR.MINOR.PATCH.",
            fix=fix,
        )
    return version


def release_key(version: Version) -> tuple[int, int, int]:
    """(major, minor, patch) without pre/dev/local parts: main's '2.6.0a0' belongs to 2.6."""
    release = (*version.release, 0, 0)
    return release[0], release[1], release[2]


class ReleaseRange:
    """PyTorch releases [first, end) as written in `pytorch` (["1.2", "1.7"]), compared as release keys."""

    pytorch: tuple[str, str]

    @property
    def first(self) -> tuple[int, int, int]:
        return release_tuple(self.pytorch[0])

    @property
    def end(self) -> tuple[int, int, int]:
        return release_tuple(self.pytorch[1])

    def holds(self, release: tuple[int, ...]) -> bool:
        """Whether a release key falls in the range ((1, 6) is 1.6.0)."""
        key = (*release, 0, 0)[:3]
        return self.first <= key < self.end


def python_accepts(low: str, end: str, version: str) -> bool:
    """Whether Python `version` ("3.6.8", or a release "3.6") lies in [low, end): a release meets a patch
    minimum ("3.6.1") when one of its patches may; the installed interpreter is checked by its own version."""
    key, floor = version_tuple(version), version_tuple(low)
    return (floor[:2] if len(key) == 2 else floor) <= key < version_tuple(end)[:2]


def python_minors(low: str, end: str) -> list[str]:
    """The Python releases "3.X" in [low, end), newest first."""
    first, last = version_tuple(low)[:2], version_tuple(end)[:2]
    return [f"{first[0]}.{minor}" for minor in range(last[1] - 1, first[1] - 1, -1)] if first[0] == last[0] else []
