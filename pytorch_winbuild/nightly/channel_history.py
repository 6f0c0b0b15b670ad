"""What a published channel says about each entry: its last good build, and how long a build of it takes.

A fleet's planner and its merge both read the channel the last night published (its date folders'
summaries and the wheels they name) rather than a state file of their own: the channel is what the
users see, so "unchanged since the last published night" means unchanged since what they can
install. A summary that cannot be read costs the planner a rebuild, never a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytorch_winbuild.json_file import JsonObject
from pytorch_winbuild.nightly.dashboard import Links, Night, entry_name, load_nights

GOOD = ("success", "skipped")  # a skipped entry still stands on its last success's wheel


@dataclass(frozen=True)
class LastGood:
    """An entry's newest good record whose wheel the channel still holds."""

    record: JsonObject  # the entry as the night's summary recorded it
    night: Night
    wheel: Path  # where that wheel is now, inside the channel

    @property
    def revision(self) -> str | None:
        return _text(self.record, "revision")

    @property
    def table_hash(self) -> str | None:
        return _text(self.record, "table_hash")

    @property
    def when(self) -> str:
        return self.night.label


@dataclass
class ChannelHistory:
    root: Path
    nights: list[Night] = field(default_factory=list)
    last_good: dict[str, LastGood] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # entry → its newest successful build's duration
    problems: list[str] = field(default_factory=list)


def _text(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        return None
    return float(value)


def read_channel(site: Path | None, *, leave_out: Path | None = None) -> ChannelHistory:
    """The channel in `site` (none: an empty history, as for the first night), without the night whose summary is
    `leave_out` (the merge's own night, when it is merged again)."""
    if site is None or not site.is_dir():
        return ChannelHistory(root=site or Path())
    nights, problems = load_nights(site)
    if leave_out is not None:
        nights = [night for night in nights if night.summary.absolute() != leave_out.absolute()]
    history = ChannelHistory(root=site, nights=nights, problems=problems)
    links = Links(site)
    for night in nights:  # oldest first: a newer record replaces an older one
        for record in night.entries:
            name = entry_name(record)
            result = _text(record, "result")
            if result == "success" and (seconds := _seconds(record.get("seconds"))) is not None:
                history.seconds[name] = seconds
            if result in GOOD and _text(record, "revision"):
                wheel = links.local(record.get("wheel"), night)
                if wheel is not None:
                    history.last_good[name] = LastGood(record, night, wheel)
    return history
