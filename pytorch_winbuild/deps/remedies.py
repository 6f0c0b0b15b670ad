"""What a failed fetch tells the user to do, by where the archives come from.

The public bucket, a mirror given with --mirror, one set as winbuild.mirror in the configuration,
and a folder given with --from-dir each fail for their own reasons and are fixed in their own
place: a remedy never says "another --mirror" to someone who gave none, nor "leave out --mirror"
to someone whose mirror comes from invoke.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytorch_winbuild.deps.records import Source
from pytorch_winbuild.knowledge.catalog import Archive

_PARTIAL = "The partial download was deleted: the next run starts it afresh (only a run stopped with Ctrl-C resumes)."
_LIMITS = "The limits are [download] max_size, speed_limit, speed_time and deadline in build_config/deps.toml."
_PROXY = "HTTPS_PROXY/HTTP_PROXY where a proxy is required (NO_PROXY for hosts reached directly)"


@dataclass(frozen=True)
class Remedies:
    """The fix text of each kind of failure of one archive's download or copy."""

    missing: str  # the server or folder does not hold the file
    network: str  # attempts in a row without progress, or the deadline passed while retrying
    unresolved: str  # the host name does not resolve
    limits: str  # too large, too slow, too long
    replaced: str  # the server's file has another size than the one recorded
    bad_url: str  # requests cannot use the URL


def _leave_out(label: str) -> str:
    """How to stop using the mirror, where it was set."""
    if label.startswith("--"):
        return f"leave out {label}"
    return "remove `mirror:` from invoke.yaml (or -f FILE), or unset INVOKE_WINBUILD_MIRROR"


def remedies_for(source: Source, archive: Archive) -> Remedies:
    """The remedies for `archive` fetched from `source`."""
    by_hand = f"download {archive.url} by hand into a folder and pass --from-dir DIR"
    if source.folder is not None and source.from_dir:
        missing = f"download {archive.url} by hand into {source.folder}, or leave out --from-dir to download it."
        return Remedies(missing, missing, missing, missing, missing, missing)  # a copy never reaches the others
    if source.folder is None and source.base_url is None:
        return Remedies(
            missing="the public bucket no longer serves this file: pick another version (--mkl-version, "
            "--magma-version), or get the file elsewhere and pass --from-dir.",
            network=f"check the network connection and {_PROXY}; where the bucket is blocked or slow, use a mirror "
            f"(--mirror URL, or winbuild.mirror) or {by_hand}. {_PARTIAL}",
            unresolved=f"check the network connection, its DNS server and {_PROXY}; or use a mirror (--mirror URL, "
            f"or winbuild.mirror), or {by_hand}.",
            limits=f"the public bucket is misbehaving or too slow from here: use a mirror (--mirror URL, or "
            f"winbuild.mirror), or {by_hand}. {_LIMITS}",
            replaced=f"the public bucket now serves another file under this name; if that is expected, accept it with "
            f"--update-lock, else {by_hand} from a copy you trust.",
            bad_url=f"the catalog's URL {archive.url} cannot be used: check build_config/deps.toml, or {by_hand}.",
        )
    label = source.label
    instead = f"point {label} at another mirror, {_leave_out(label)} to use the public bucket, or {by_hand}"
    return Remedies(
        missing=f"a mirror is a flat folder holding the same file names as {archive.base_url}: copy "
        f"{archive.file_name} there, or {_leave_out(label)} to use the public bucket.",
        network=f"check that the mirror given as {label} is up and reachable from here ({_PROXY}); or {instead}. "
        f"{_PARTIAL}",
        unresolved=f"check the spelling of the host in {label}, the network connection, its DNS server and {_PROXY}; "
        f"or {instead}.",
        limits=f"the mirror given as {label} is misbehaving or too slow: {instead}. {_LIMITS}",
        replaced="check the mirror holds the same files as the public bucket; if the file was really replaced, "
        "accept it with --update-lock.",
        bad_url=f"give {label} as http(s)://host/folder/ or file:///folder/.",
    )
