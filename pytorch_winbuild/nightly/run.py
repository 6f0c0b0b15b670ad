"""The nightly: a loop of plans over the matrix, under one lock, ending in retention and a summary.

The matrix is checked before the lock is taken (a broken file should not need a lock to be
reported), the machine is probed once, each entry runs to success, skip or failure without
stopping the others, and the summary is written whatever happens, Ctrl-C included.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pytorch_winbuild.errors import BuildError
from pytorch_winbuild.facts.probe import probe
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.nightly.entry import EntryResult, RunContext, prefetch_remote_commits, run_entry
from pytorch_winbuild.nightly.lock import NightlyLock
from pytorch_winbuild.nightly.matrix import Matrix
from pytorch_winbuild.nightly.retention import apply_retention
from pytorch_winbuild.nightly.site import write_site
from pytorch_winbuild.nightly.state import NightlyState
from pytorch_winbuild.nightly.summary import NightlySummary, publish_to_github

LOCK_FILE = Path("nightly") / "nightly.lock"  # under the cache folder, which the entries share


@dataclass(frozen=True)
class NightlyOptions:
    """What `invoke nightly` asks for, read by the faces: the matrix loaded and each entry parsed once."""

    matrix: Matrix
    cache_dir: Path
    only: tuple[str, ...] = ()
    force: bool = False
    output_dir: Path | None = None
    keep_days: int | None = None
    min_free_gb: float | None = None
    mirror: str | None = None
    mirror_label: str = "--mirror"  # how messages name the mirror: --mirror or winbuild.mirror


def _write_site(output_dir: Path) -> None:
    """The pip index and the dashboard, regenerated from the kept folders (site.py); never the night's undoing."""
    try:
        print(write_site(output_dir).describe(), flush=True)
    except Exception as exc:  # the wheels and summaries stand; the site is regenerated next night or by hand
        print(
            f"-- warning: the pip index and dashboard in {output_dir} were not updated ({type(exc).__name__}: {exc}); "
            f"`invoke nightly-site {output_dir}` writes them again.",
            flush=True,
        )


def run_nightly(options: NightlyOptions) -> NightlySummary:
    """Build every selected entry; raises BuildError (exit 5) after the summary when any entry failed."""
    knowledge = load_knowledge()
    matrix = options.matrix.with_overrides(
        output_dir=options.output_dir, keep_days=options.keep_days, min_free_gb=options.min_free_gb
    )
    entries = matrix.select(options.only)
    with NightlyLock(options.cache_dir / LOCK_FILE):
        now = datetime.now(UTC)
        output_dir = matrix.settings.output_dir.absolute()
        summary = NightlySummary(
            started=now.isoformat(timespec="seconds"),
            date=now.date().isoformat(),
            host=socket.gethostname(),
            matrix=matrix.source,
            run_dir=output_dir / now.date().isoformat(),
            stamp=now.strftime("%Y%m%d-%H%M%S"),
            forced=options.force,
            entries=[EntryResult.for_entry(entry) for entry in entries],
        )
        clock = time.monotonic()
        try:
            context = RunContext(
                matrix=matrix,
                facts=probe(),
                knowledge=knowledge,
                cache_dir=options.cache_dir.absolute(),
                run_dir=summary.run_dir,
                date=summary.date,
                state=NightlyState(output_dir),
                force=options.force,
                mirror=options.mirror,
                mirror_label=options.mirror_label,
            )
            prefetch_remote_commits(entries, context)
            for entry, result in zip(entries, summary.entries, strict=True):
                run_entry(entry, context, result)
            summary.retention = apply_retention(output_dir, matrix.settings.keep_days, now.date())
        finally:
            summary.seconds = time.monotonic() - clock
            summary.write()
            publish_to_github(summary, dict(os.environ))
            print(
                "\n"
                f"== nightly {summary.date}: {summary.headline()} ==\n"
                f"  summary  {summary.json_path}\n"
                f"  markdown {summary.markdown_path}",
                flush=True,
            )
            _write_site(output_dir)
    failed = summary.failed
    if failed:
        names = ", ".join(f"{entry.name} (at {entry.stage})" for entry in failed)
        raise BuildError(
            f"{len(failed)} of {len(summary.entries)} nightly entries failed: {names}.",
            fix=f"read the failures in {summary.markdown_path}; each names its first error, diagnosis and report.",
        )
    return summary
