"""What the nightly tasks do once their flags are read: check them, then build the matrix on this runner
(`invoke nightly`), print a fleet's jobs (--matrix-json) or this runner's labels (--runner-labels), merge
the runners' parts into one channel (`invoke nightly-merge`), or make an output folder's pip index and
dashboard again (`invoke nightly-site`). Kept apart from commands.py, whose tasks plan and build one
configuration.
"""

from __future__ import annotations

import sys
from pathlib import Path

from invoke import Context

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces.commands import checked_mirror, tag_cache
from pytorch_winbuild.faces.flags import (
    cache_choice,
    finite_number,
    flag_label,
    path_flag,
    whole_number,
    writable_folder,
)


def nightly(
    c: Context,
    *,
    matrix: str | None,
    only: list[str] | None,
    force: bool,
    output_dir: str | None,
    keep_days: str | None,
    min_free_gb: str | None,
    cache_dir: str | None,
    mirror: str | None,
    matrix_json: bool = False,
    plan_file: str | None = None,
    previous: str | None = None,
    runner_labels: bool = False,
) -> None:
    """The `nightly` task."""
    from pytorch_winbuild.nightly.matrix import MAX_KEEP_DAYS
    from pytorch_winbuild.nightly.run import NightlyOptions, run_nightly

    for value, label in ((matrix, "--matrix"), (output_dir, "--output-dir"), (mirror, "--mirror")):
        path_flag(value, label)
    if any(not name.strip() for name in only or ()):
        raise ConfigurationError(
            "--only is empty.", fix="name a matrix entry, e.g. --only cu124-py311, or leave --only out for every entry."
        )
    keep = whole_number(keep_days, "--keep-days", maximum=MAX_KEEP_DAYS, unit=" days")
    if runner_labels:
        if matrix_json:
            raise ConfigurationError(
                "--runner-labels and --matrix-json print different things.", fix="pass one of them at a time."
            )
        nightly_runner_labels()
        return
    if matrix_json:
        nightly_matrix_json(
            matrix=matrix, only=tuple(only or ()), force=force, keep_days=keep, previous=previous, plan_file=plan_file
        )
        return
    for value, label in ((plan_file, "--plan-file"), (previous, "--previous")):
        if value is not None:
            raise ConfigurationError(
                f"{label} plans a fleet's night, and this command builds.",
                fix=f"add --matrix-json to plan (it builds nothing), or leave {label} out to build.",
            )
    min_free = finite_number(min_free_gb, "--min-free-gb")
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.nightly.matrix import load_matrix

    # The matrix and --only are checked before the cache is touched (tagged, locked): a broken file needs none.
    loaded = load_matrix(Path(matrix) if matrix else None, load_knowledge())
    loaded.select(tuple(only or ()))
    cache = cache_choice(c, cache_dir)
    cache.check_writable()
    folder = cache.folder
    tag_cache(folder)
    if output_dir:
        writable_folder(Path(output_dir), "--output-dir")
    options = NightlyOptions(
        matrix=loaded,
        cache_dir=folder,
        only=tuple(only or ()),
        force=force,
        output_dir=Path(output_dir) if output_dir else None,
        keep_days=keep,
        min_free_gb=min_free,
        mirror=checked_mirror(c, mirror),
        mirror_label=flag_label("mirror", mirror),
    )
    run_nightly(options)


def nightly_runner_labels() -> None:
    """`invoke nightly --runner-labels`: the labels this machine's runner registers with, from what `invoke doctor`
    finds (config.cmd --labels takes them comma-separated; GitHub adds self-hosted, the OS and the architecture)."""
    from pytorch_winbuild.facts.probe import probe
    from pytorch_winbuild.nightly.runner_labels import load_label_rules, registration_labels

    print(",".join(registration_labels(probe(gpus=False), load_label_rules())))


def nightly_matrix_json(
    *,
    matrix: str | None,
    only: tuple[str, ...],
    force: bool,
    keep_days: int | None,
    previous: str | None,
    plan_file: str | None,
) -> None:
    """`invoke nightly --matrix-json`: the night's jobs as JSON on stdout (the plan, for a person, on stderr)."""
    import json
    import tempfile

    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.nightly.fleet_plan import plan_fleet
    from pytorch_winbuild.nightly.matrix import load_matrix
    from pytorch_winbuild.nightly.runner_labels import load_label_rules

    for value, label in ((plan_file, "--plan-file"), (previous, "--previous")):
        path_flag(value, label)
    site = Path(previous) if previous else None
    if site is not None and not site.is_dir():
        raise ConfigurationError(
            f"--previous {previous} is not a folder.",
            fix="pass the channel published last night (the artifact nightly-channel), or leave --previous out to "
            "build every entry.",
        )
    target = Path(plan_file) if plan_file else None
    if target is not None and target.exists() and not target.is_file():
        raise ConfigurationError(
            f"--plan-file {plan_file} is not a regular file (a folder, pipe or device).",
            fix="name a new file, e.g. --plan-file plan.json.",
        )
    knowledge = load_knowledge()
    loaded = load_matrix(Path(matrix) if matrix else None, knowledge).with_overrides(
        output_dir=None, keep_days=keep_days, min_free_gb=None
    )
    with tempfile.TemporaryDirectory(prefix="pytorch-winbuild-plan-") as work:
        plan = plan_fleet(
            loaded, loaded.select(only), previous=site, force=force, rules=load_label_rules(), work_dir=Path(work)
        )
    if target is not None:
        plan.write(target)
    print(plan.describe(), file=sys.stderr, flush=True)
    print(json.dumps(plan.matrix_json()), flush=True)


def nightly_merge(
    c: Context,
    *,
    part: list[str] | None,
    output_dir: str | None,
    previous: str | None,
    plan: str | None,
    keep_days: str | None,
) -> None:
    """The `nightly-merge` task."""
    from pytorch_winbuild.nightly.matrix import MAX_KEEP_DAYS
    from pytorch_winbuild.nightly.merge import run_merge

    for value, label in [(output_dir, "--output-dir"), (previous, "--previous"), (plan, "--plan")] + [
        (name, "--part") for name in part or ()
    ]:
        path_flag(value, label)
    if output_dir is None:
        raise ConfigurationError(
            "--output-dir is missing: the merge needs a folder for the channel.",
            fix="pass --output-dir OUT (a new folder, or the channel to update).",
        )
    keep = whole_number(keep_days, "--keep-days", maximum=MAX_KEEP_DAYS, unit=" days")
    writable_folder(Path(output_dir), "--output-dir")
    run_merge(
        [Path(name) for name in part or ()],
        Path(output_dir),
        previous=Path(previous) if previous else None,
        plan_path=Path(plan) if plan else None,
        keep_days=keep,
    )


def nightly_site(c: Context, *, output_dir: str, nights: str | None, stage: str | None, wheels: str) -> None:
    """The `nightly-site` task."""
    from pytorch_winbuild.nightly.dashboard import DEFAULT_NIGHTS
    from pytorch_winbuild.nightly.site import run_site

    for value, label in ((output_dir, "OUTPUT_DIR"), (stage, "--stage")):
        path_flag(value, label)
    shown = whole_number(nights, "--nights", minimum=0)
    folder = Path(output_dir)
    if folder.is_dir():  # else run_site says it is not a folder
        writable_folder(folder, "OUTPUT_DIR")
    if stage is not None:
        writable_folder(Path(stage), "--stage")
    run_site(
        folder,
        nights=DEFAULT_NIGHTS if shown is None else shown,
        stage=Path(stage) if stage is not None else None,
        wheels=wheels,
    )
