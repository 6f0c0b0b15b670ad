"""What a fetch works with: where archive files come from, how far each archive is trusted, and
what this run did for it. Shared by fetch.py (the warm path) and pipeline.py (the cold path), so
neither imports the other's module for them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import ParseResult, urlparse
from urllib.request import url2pathname

from pytorch_winbuild.deps.lockfile import Pin
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.catalog import Archive
from pytorch_winbuild.text.redact import redact_text, userinfo_secrets

# How far an archive is trusted (FetchedArchive.trust).
VERIFIED = "verified"  # matches a published checksum: deps.toml [known] or the shipped build_config/deps.lock
FIRST_USE = "first use"  # nothing published: accepted now, as first seen, and recorded in the cache's lock
PINNED = "pinned"  # nothing published: matches what the cache's lock recorded at its first download
UNRECORDED = "unrecorded"  # nothing published nor recorded (extracted before the cache had a lock)


@dataclass(frozen=True)
class Source:
    """Where archive files come from: the catalog's bucket, a mirror URL, or a local folder."""

    base_url: str | None = None  # http(s) mirror ending in "/"; None with no folder → the catalog's URL
    folder: Path | None = None  # file:// mirror or --from-dir
    from_dir: bool = False
    label: str = "--mirror"  # how the user gave the mirror (--mirror or winbuild.mirror), for the messages


def mirror_url(mirror: str, label: str) -> ParseResult:
    """The mirror URL parsed, or ConfigurationError naming `label` (--mirror, winbuild.mirror). A URL
    whose user name and password cannot be read one way only is refused without being shown: the
    masking that keeps credentials out of messages reads them the same way."""
    if any(char.isspace() or unicodedata.category(char) == "Cc" for char in mirror):
        raise ConfigurationError(
            f"{label} holds a space, a tab or a control character, which a URL never holds (not shown here: it "
            "may hold a password).",
            fix="percent-encode it (a space is %20), in the user name and password too.",
        )
    try:
        parsed = urlparse(mirror)
        parsed.port  # noqa: B018 -- a port that is not a number raises here, not halfway through a download
    except ValueError:
        raise ConfigurationError(
            f"{label} {redact_text(mirror)} is not a well-formed URL (its host or port cannot be read).",
            fix="pass the base URL of a flat folder holding the archives, e.g. https://mirror.example.com/ossci-windows/.",
        ) from None
    userinfo = parsed.netloc.rpartition("@")[0]
    if parsed.scheme == "file" and userinfo:
        raise ConfigurationError(
            f"{label} is a file:// URL with a user name or password (not shown here), which a Windows share does "
            "not take from a URL.",
            fix="connect to the share first (net use \\\\host\\share /user:NAME), then pass file://host/share/ "
            "without the user name and password.",
        )
    if set(userinfo_secrets(mirror)) - {parsed.username, parsed.password}:
        raise ConfigurationError(
            f"{label} holds a user name or password with / ? or # before its @, so where it ends can be read two "
            "ways (not shown here: it may hold a password).",
            fix="percent-encode those characters in the user name and password (/ is %2F, ? is %3F, # is %23, "
            "@ is %40).",
        )
    if "?" in mirror or "#" in mirror:  # what a '?' or '#' in the user name or password leaves was refused above
        base = re.split(r"[?#]", mirror, maxsplit=1)[0]
        raise ConfigurationError(
            f"{label} {redact_text(base)} has a query or a fragment (a part after '?' or '#', not shown here: it may "
            "hold a token), and a mirror is a folder: each archive's file name is added to the URL, so every request "
            "would miss the file.",
            fix="pass the folder's URL alone, e.g. https://mirror.example.com/ossci-windows/; a mirror that needs a "
            "token takes it as the password in the URL (USER:TOKEN@ before the host name, sent as HTTP basic "
            "authentication and never printed) or from a netrc file for its host (~/.netrc, or %USERPROFILE%\\_netrc "
            "on Windows; NETRC names another); a '?' or '#' in a folder name is written %3F or %23.",
        )
    return parsed


def resolve_source(mirror: str | None, from_dir: str | Path | None, mirror_label: str = "--mirror") -> Source:
    """Validate --mirror / --from-dir and say where files come from."""
    if mirror and from_dir:
        raise ConfigurationError(
            "--mirror and --from-dir were both given.",
            fix="use --from-dir for files downloaded by hand, or --mirror for a server or folder holding them, "
            "not both.",
        )
    if from_dir:
        folder = Path(from_dir).expanduser()
        if not folder.is_dir():
            raise ConfigurationError(
                f"--from-dir {folder}: no such folder.", fix="pass the folder holding the downloaded .7z files."
            )
        return Source(folder=folder, from_dir=True)
    if not mirror:
        return Source()
    parsed = mirror_url(mirror, mirror_label)
    if parsed.scheme == "file":
        path = url2pathname(parsed.path)
        if parsed.netloc and parsed.netloc != "localhost":
            path = "//" + parsed.netloc + path  # a UNC share: file://server/share/
        folder = Path(path)
        if not folder.is_dir():
            raise ConfigurationError(
                f"{mirror_label} {redact_text(mirror)}: the folder {folder} does not exist.",
                fix="pass file:///path/to/folder/ of an existing folder holding the .7z files.",
            )
        return Source(folder=folder, label=mirror_label)
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return Source(base_url=mirror.rstrip("/") + "/", label=mirror_label)
    raise ConfigurationError(
        f"{mirror_label} {redact_text(mirror)} is not an http://, https:// or file:// URL.",
        fix="pass the base URL of a flat folder holding the archives, e.g. https://mirror.example.com/ossci-windows/ or file:///D:/mirror/.",
    )


@dataclass(frozen=True)
class FetchedArchive:
    """Where one archive is and what this run did for it."""

    archive: Archive
    path: Path
    downloaded_bytes: int
    seconds: float
    action: str  # "cached", "downloaded", "copied", "extracted from downloads/"
    trust: str = UNRECORDED  # VERIFIED, FIRST_USE, PINNED or UNRECORDED
    checked_against: str = ""  # where the checksum it matched (VERIFIED, PINNED) or was recorded (FIRST_USE) is
    sha256: str = ""

    @property
    def verified(self) -> bool:
        return self.trust == VERIFIED


def trust_of(pins: list[Pin], sha256: str) -> tuple[str, str]:
    """(trust, where) for an archive with this checksum that matched `pins`."""
    published = [pin for pin in pins if pin.published]
    if published:
        return VERIFIED, published[-1].where  # the shipped lock when it has an entry, else deps.toml
    if pins:
        return PINNED, pins[0].where
    return UNRECORDED, ""
