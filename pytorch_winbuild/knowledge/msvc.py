"""MSVC toolset versions and the `_MSC_VER` their compilers report.

Microsoft's scheme (docs: "Predefined macros", _MSC_VER): toolset 14.0 (VS 2015) reports 1900, and
each 14.N toolset after it reports 1900 + N (14.16 → 1916, 14.29 → 1929, 14.44 → 1944). CUDA's
host_config.h and the CUDA table compare against these numbers.
"""

from __future__ import annotations

from pytorch_winbuild.errors import ConfigurationError


def toolset_short(version: str) -> str:
    """'14.11.25503' → '14.11'; '14.0' stays '14.0'."""
    parts = version.split(".")
    return ".".join(parts[:2])


def toolset_msc_ver(version: str) -> int:
    """The `_MSC_VER` a toolset's compiler reports: 14.0 → 1900, 14.N → 1900 + N."""
    parts = version.split(".")
    if len(parts) < 2 or parts[0] != "14" or not (parts[1].isascii() and parts[1].isdigit()):
        raise ConfigurationError(
            f"'{version}' is not an MSVC toolset version (expected 14.x, e.g. 14.11 or 14.16.27023)."
        )
    return 1900 + int(parts[1])
