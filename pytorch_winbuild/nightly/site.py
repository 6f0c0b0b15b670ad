"""The nightly's output folder as a static site: the pip index and the dashboard, and a copy to publish.

`write_site` regenerates both from what is on disk, after every nightly (failed ones too) and by hand (`invoke
nightly-site OUTPUT_DIR`); `--stage FOLDER` makes a copy to publish, with an index and a dashboard of exactly that.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.nightly.dashboard import DEFAULT_NIGHTS, write_dashboard
from pytorch_winbuild.nightly.index import HASH_CACHE, IndexResult, write_index
from pytorch_winbuild.nightly.retention import WHEEL_RECORD_SUFFIX, date_folders, newest_wheels, published


@dataclass(frozen=True)
class SiteResult:
    index: IndexResult
    dashboard: Path

    def describe(self) -> str:
        return f"  index     {self.index.root / 'index.html'} ({self.index.describe()})\n  dashboard {self.dashboard}"


def write_site(output_dir: Path, nights: int = DEFAULT_NIGHTS) -> SiteResult:
    """Regenerate `<output_dir>/simple/`, `<output_dir>/entries/*/simple/` and `<output_dir>/index.html`."""
    output_dir.mkdir(parents=True, exist_ok=True)
    index = write_index(output_dir)
    dashboard = write_dashboard(output_dir, keep=nights, index=index)
    return SiteResult(index, dashboard)


WHEEL_CHOICES = ("all", "newest", "none")


def _place(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def stage_site(output_dir: Path, destination: Path, wheels: str = "all", nights: int = DEFAULT_NIGHTS) -> SiteResult:
    """A publishable copy of the output folder in the empty `destination`, with its own index and dashboard.

    The date folders are copied (hard-linked where possible) without hidden or temporary files, and
    with all wheels, each entry's newest only (what retention always keeps: a bounded artifact),
    or none; then the index and the dashboard are made for exactly what the copy holds, so none
    of its links is dangling. state.json and other files outside the date folders stay behind.
    """
    if wheels not in WHEEL_CHOICES:
        raise ConfigurationError(f"--wheels {wheels!r} is not one of {', '.join(WHEEL_CHOICES)}.")
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise ConfigurationError(
            f"the staging folder {destination} is not empty.",
            fix="name a new or empty folder: staging never deletes anything.",
        )
    destination.mkdir(parents=True, exist_ok=True)
    newest = set(newest_wheels(output_dir).values())
    for _, folder in date_folders(output_dir):
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(output_dir)
            if path.is_symlink() or not path.is_file() or not published(relative):
                continue
            wheel = path if path.suffix == ".whl" else path.with_name(path.name.removesuffix(WHEEL_RECORD_SUFFIX))
            if wheel.suffix == ".whl" and (wheels == "none" or (wheels == "newest" and wheel not in newest)):
                continue
            _place(path, destination / relative)
    hashes = output_dir / HASH_CACHE
    if hashes.is_file():  # the copies keep size and time: no wheel is hashed again
        shutil.copy2(hashes, destination / HASH_CACHE)
    try:
        return write_site(destination, nights)
    finally:
        (destination / HASH_CACHE).unlink(missing_ok=True)


def run_site(output_dir: Path, *, nights: int = DEFAULT_NIGHTS, stage: Path | None = None, wheels: str = "all") -> None:
    """`invoke nightly-site`: the site regenerated in `output_dir`, and staged in `stage` when given; both described."""
    if wheels not in WHEEL_CHOICES:
        raise ConfigurationError(f"--wheels {wheels!r} is not one of {', '.join(WHEEL_CHOICES)}.")
    if not output_dir.is_dir():
        raise ConfigurationError(
            f"{output_dir} is not a folder.", fix="pass the nightly's output folder (e.g. dist/nightly)."
        )
    print(write_site(output_dir, nights).describe(), flush=True)
    if stage is not None:
        staged = stage_site(output_dir, stage, wheels, nights)
        print(f"staged in {stage}:\n{staged.describe()}", flush=True)
