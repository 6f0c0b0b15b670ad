"""A SIMULATION (nothing is built): the wall time of a nightly spread over N runners, longest entries first.

GitHub Actions gives each queued job of the matrix, in the order `invoke nightly --matrix-json` lists
them (longest first), to the next idle runner that has its labels. With runners that all have every
label, that is list scheduling in longest-processing-time-first order, which this script replays:
each job starts on the runner that frees up first. It ignores queueing delays, the plan and publish
jobs, checkout and bootstrap (add them with --overhead-minutes per job), and it assumes durations
are as recorded.

    python scripts/simulate_fleet.py                          # 8 entries x 3 h on 1, 2, 4, 8 runners
    python scripts/simulate_fleet.py --hours 4,4,3.5,3,3,2.5,1,1 --runners 1,2,3,4,8
"""

from __future__ import annotations

import argparse
import heapq
from collections.abc import Sequence


def wall_hours(durations: Sequence[float], runners: int, *, longest_first: bool = True) -> float:
    """When the last job ends, jobs taken in order (longest first, or as given) by the first free runner."""
    order = sorted(durations, reverse=True) if longest_first else list(durations)
    free_at = [0.0] * max(runners, 1)
    heapq.heapify(free_at)
    end = 0.0
    for duration in order:
        start = heapq.heappop(free_at)
        end = max(end, start + duration)
        heapq.heappush(free_at, start + duration)
    return end


def _numbers(text: str, kind: type[float] | type[int]) -> list:
    return [kind(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", default="3,3,3,3,3,3,3,3", help="each entry's build, in hours (default: 8 x 3)")
    parser.add_argument("--runners", default="1,2,4,8", help="fleet sizes to simulate (default: 1,2,4,8)")
    parser.add_argument("--overhead-minutes", type=float, default=0.0, help="added to every job (checkout, bootstrap)")
    args = parser.parse_args(argv)
    durations = [hours + args.overhead_minutes / 60 for hours in _numbers(args.hours, float)]
    print(
        f"SIMULATION, not a measurement: {len(durations)} entries of {', '.join(args.hours.split(','))} h"
        + (f" (+{args.overhead_minutes:g} min each)" if args.overhead_minutes else "")
        + ", longest first, each job to the first free runner."
    )
    print(f"{'runners':>8} {'wall time':>10} {'given order':>12} {'busy':>6}")
    for runners in _numbers(args.runners, int):
        lpt = wall_hours(durations, runners)
        given = wall_hours(durations, runners, longest_first=False)
        busy = sum(durations) / (runners * lpt) if lpt else 0.0
        print(f"{runners:>8} {lpt:>9.2f}h {given:>11.2f}h {busy:>6.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
