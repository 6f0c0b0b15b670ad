"""Hostile input, round 3 (issue 36, points 1, 2, 4, 8): the channel publishes only what each runner built.

Parts as the nightly's own writer makes them (test_fleet_parts._windows_part), then changed as a hostile or broken
runner would: a record naming another entry's file, a symlinked folder leading out of the part, a symlinked date
folder in --previous, a summary with thousands of entries, numbers and times out of range, an entry named like a
summary file. Each: what is published, and nothing written when the merge refuses.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from test_fleet_parts import DAY, WINDOWS_PART, _plan, _windows_part

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.nightly.merge import merge_night

WHEEL = "mini_torch-2.12.0+{}-py3-none-any.whl"


def _summary(part: Path) -> tuple[Path, dict]:
    [summary] = part.glob(f"{DAY}/nightly-*.json")
    return summary, json.loads(summary.read_text(encoding="utf-8"))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_part_cannot_replace_another_entrys_wheel(tmp_path: Path) -> None:
    """Part B claims only cu128 but puts a file under cu124's folder of its night and names it as its wheel: cu124's
    wheel in the channel stays part A's, and B's record publishes nothing it did not build under its own folder."""
    part_a = _windows_part(tmp_path / "part-a", "cu124")
    part_b = _windows_part(tmp_path / "part-b", "cu128")
    own = _digest(part_a / DAY / "cu124" / WHEEL.format("cu124"))
    forged = part_b / DAY / "cu124" / WHEEL.format("cu124")
    forged.parent.mkdir(parents=True)
    forged.write_bytes(b"PK not the wheel part A built")
    summary, data = _summary(part_b)
    data["entries"][0]["wheel"] = f"{WINDOWS_PART}\\{DAY}\\cu124\\{WHEEL.format('cu124')}"
    summary.write_text(json.dumps(data), encoding="utf-8")
    output = tmp_path / "channel"
    result = merge_night([part_a, part_b], output, plan=_plan(cu124=True, cu128=True))
    by_name = {entry.name: entry for entry in result.summary.entries}
    assert _digest(output / DAY / "cu124" / WHEEL.format("cu124")) == own
    assert by_name["cu128"].wheel is None and any("not published" in note for note in by_name["cu128"].notes)


def test_a_symlinked_folder_in_a_part_publishes_nothing_outside_it(tmp_path: Path) -> None:
    secret = tmp_path / "home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n", encoding="utf-8")
    part = _windows_part(tmp_path / "part", "cpu")
    (part / DAY / "cpu" / "sub").symlink_to(secret, target_is_directory=True)
    summary, data = _summary(part)
    data["entries"][0]["log"] = f"{WINDOWS_PART}\\{DAY}\\cpu\\sub\\id_rsa"
    summary.write_text(json.dumps(data), encoding="utf-8")
    output = tmp_path / "channel"
    [entry] = merge_night([part], output, plan=_plan(cpu=True)).summary.entries
    assert entry.log is None and not list(output.rglob("id_rsa"))
    assert "PRIVATE KEY" not in "".join(p.read_text(errors="replace") for p in output.rglob("*") if p.is_file())


def test_a_symlinked_date_folder_in_the_previous_channel_is_not_copied(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "2026-03-01"
    outside.mkdir(parents=True)
    (outside / "stolen.txt").write_text("outside the channel\n", encoding="utf-8")
    previous = tmp_path / "previous"
    previous.mkdir()
    (previous / "2026-03-01").symlink_to(outside, target_is_directory=True)
    output = tmp_path / "channel"
    merge_night([_windows_part(tmp_path / "part", "cpu")], output, previous=previous, plan=_plan(cpu=True))
    assert not list(output.rglob("stolen.txt"))


def _refused(part: Path, output: Path, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as error:
        merge_night([part], output)
    assert error.value.exit_code == 2 and not output.exists()  # validated before anything is written


def test_a_part_with_more_entries_than_a_night_has_jobs_is_refused(tmp_path: Path) -> None:
    part = _windows_part(tmp_path / "part", "cpu")
    summary, data = _summary(part)
    data["entries"] = [{**data["entries"][0], "name": f"e{n}"} for n in range(300)]
    summary.write_text(json.dumps(data), encoding="utf-8")
    _refused(part, tmp_path / "channel", "has 300 entries; a night has at most 256")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("seconds", 3e11, "took 300000000000.0 seconds, not 0 to 604800"),
        ("started", "0001-01-01T00:00:00+00:00", "started '0001-01-01T00:00:00\\+00:00'"),
    ],
)
def test_out_of_range_numbers_are_refused_before_anything_is_written(
    tmp_path: Path, key: str, value: object, message: str
) -> None:
    part = _windows_part(tmp_path / "part", "cpu")
    summary, data = _summary(part)
    data[key] = value
    summary.write_text(json.dumps(data), encoding="utf-8")
    _refused(part, tmp_path / "channel", message)


def test_an_entry_named_like_a_summary_file_is_refused(tmp_path: Path) -> None:
    part = _windows_part(tmp_path / "part", "cpu")
    summary, data = _summary(part)
    data["entries"][0]["name"] = summary.name
    summary.write_text(json.dumps(data), encoding="utf-8")
    _refused(part, tmp_path / "channel", "which no matrix allows")


def test_a_wheel_changed_since_its_runner_built_it_is_not_published(tmp_path: Path) -> None:
    """The runner records each wheel's SHA-256 beside it (<wheel>.nightly.json, nightly/entry.py): the merge
    publishes the wheel only when it still has that hash."""
    part = _windows_part(tmp_path / "part", "cpu")
    wheel = part / DAY / "cpu" / WHEEL.format("cpu")
    record = wheel.with_name(wheel.name + ".nightly.json")
    record.write_text(json.dumps({"entry": "cpu", "sha256": _digest(wheel)}), encoding="utf-8")
    [entry] = merge_night([part], tmp_path / "good", plan=_plan(cpu=True)).summary.entries
    assert entry.wheel == str(tmp_path / "good" / DAY / "cpu" / wheel.name)
    wheel.write_bytes(b"PK swapped after the build")
    [entry] = merge_night([part], tmp_path / "bad", plan=_plan(cpu=True)).summary.entries
    assert entry.wheel is None and any("its runner recorded" in note for note in entry.notes)
    assert not (tmp_path / "bad" / DAY / "cpu" / wheel.name).exists()  # nor in the pip index, which lists the folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_merge_that_fails_part_way_leaves_the_published_channel_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The channel is made beside the output folder and put in place with two renames: a failure after the parts'
    files were placed (here the index writer, as a full disk would) leaves the old channel whole, and no staging
    folder behind."""
    from pytorch_winbuild.nightly import merge

    output = tmp_path / "channel"
    merge_night([_windows_part(tmp_path / "first", "cpu")], output, plan=_plan(cpu=True))
    before = _files(output)
    part = _windows_part(tmp_path / "second", "cu124")

    def full_disk(folder: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(merge, "write_index", full_disk)
    with pytest.raises(OSError, match="No space left"):
        merge_night([part], output, plan=_plan(cpu=False, cu124=True))
    assert _files(output) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["channel", "first", "second"]
    monkeypatch.undo()
    result = merge_night([part], output, plan=_plan(cpu=False, cu124=True))
    assert (output / DAY / "cu124" / WHEEL.format("cu124")).is_file() and result.dashboard == output / "index.html"
