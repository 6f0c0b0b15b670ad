"""The nightly's output folder as a static site: the pip index and the dashboard, and a copy to publish.

`write_site` regenerates both from what is on disk (the kept date folders' summaries and
wheels), so it runs after every nightly, failed ones included, and by hand:

    python -m pytorch_winbuild.nightly.site OUTPUT_DIR [--nights N]

    python -m pytorch_winbuild.nightly.site OUTPUT_DIR --stage FOLDER [--wheels all|newest|none]

`--stage` makes a publishable copy in an empty FOLDER: the date folders (hard-linked where it
can be; not state.json, hidden or temporary files), with all wheels, each entry's newest or none,
and an index and dashboard of exactly that. The GitHub workflow uploads it as an artifact and to
Pages.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.errors import ConfigurationError, WinbuildError
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytorch_winbuild.nightly.site",
        description="Regenerate the nightly's pip index (simple/) and dashboard (index.html) from the output folder.",
    )
    parser.add_argument("output_dir", type=Path, help="the nightly's output folder (the matrix's output_dir)")
    parser.add_argument("--nights", type=int, default=DEFAULT_NIGHTS, help="nights the dashboard shows per entry")
    parser.add_argument(
        "--stage", type=Path, help="also make a publishable copy (date folders, index, dashboard) in this empty folder"
    )
    parser.add_argument(
        "--wheels",
        choices=WHEEL_CHOICES,
        default="all",
        help="wheels the copy holds: all kept ones, each entry's newest, or none (default: all)",
    )
    args = parser.parse_args(argv)
    try:
        if not args.output_dir.is_dir():
            raise ConfigurationError(
                f"{args.output_dir} is not a folder.", fix="pass the nightly's output folder (e.g. dist/nightly)."
            )
        site = write_site(args.output_dir, args.nights)
        print(site.describe())
        if args.stage is not None:
            staged = stage_site(args.output_dir, args.stage, args.wheels, args.nights)
            print(f"staged in {args.stage}:\n{staged.describe()}")
    except WinbuildError as error:
        print(error.paragraph(), file=sys.stderr)
        return error.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
