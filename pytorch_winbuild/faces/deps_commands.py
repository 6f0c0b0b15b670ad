"""What the dependency tasks do once their flags are read: `fetch-deps` (MKL, MAGMA and NuGet's CPython into the
cache) and `clean` (what it downloaded or extracted). Kept apart from commands.py, whose tasks plan and build.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath, PureWindowsPath
from typing import TYPE_CHECKING

from invoke import Context

from pytorch_winbuild.errors import BusyError, ConfigurationError
from pytorch_winbuild.faces.commands import checked_mirror
from pytorch_winbuild.faces.flags import cache_choice, flag_label, path_flag, whole_number
from pytorch_winbuild.faces.plan_request import read_options, source_folder
from pytorch_winbuild.text.terminal_text import echoed, terminal_line

if TYPE_CHECKING:
    from pytorch_winbuild.deps.cache_clean import Item, Kind
    from pytorch_winbuild.knowledge.catalog import Archive
    from pytorch_winbuild.knowledge.model import CudaRelease, Knowledge
    from pytorch_winbuild.planning.era_choice import EraChoice
    from pytorch_winbuild.planning.options import Options


def fetch_era(knowledge: Knowledge, asked: Options, source: str | None) -> EraChoice:
    """The era whose MKL/MAGMA defaults a fetch takes: the source tree's version, else
    --pytorch-version, else the newest era that builds with --cuda (no compiler is needed to fetch,
    so the machine's Python and Visual Studio do not narrow it). `asked`: the parsed Options."""
    from pytorch_winbuild.facts.source_tree import is_pytorch_source, read_source_version
    from pytorch_winbuild.planning.era_choice import resolve_era
    from pytorch_winbuild.planning.era_obstacles import Question
    from pytorch_winbuild.planning.options import Options

    folder = source_folder(source)
    found = read_source_version(folder) if folder and is_pytorch_source(folder) else None
    only = Options(cuda=asked.cuda, pytorch_version=asked.pytorch_version, labels=asked.labels)
    return resolve_era(Question(knowledge, None, only), found)


# Why MAGMA is left out of a fetch without --cuda, and what to pass.
MAGMA_NOTE = (
    "\nMAGMA was not fetched: which one depends on the CUDA version. Pass --cuda X.Y (e.g. --cuda 10.1) "
    "for a CUDA build, or --cuda cpu to say the build has no CUDA."
)
OTHER_MACHINE_FIX = (
    "run the command on that Windows machine, add --dry-run to see what it would fetch, or pass a folder of this "
    "machine."
)


def _libraries(
    choice: EraChoice,
    release: CudaRelease | None,
    mkl_version: str | None,
    magma_version: str | None,
    *,
    magma_debug: bool,
    no_magma: bool,
) -> list[Archive]:
    """The MKL and MAGMA archives to fetch: the versions given, else the era's (`choice`); MAGMA for `release`."""
    from pytorch_winbuild.knowledge.catalog import magma_preference, select_archives

    return select_archives(
        cuda=release,
        mkl_version=mkl_version or choice.era.mkl,
        magma_versions=magma_preference(magma_version) or list(choice.era.magma),
        magma_debug=magma_debug,
        no_magma=no_magma,
    )


def _print_fetch_plan(
    archives: list[Archive],
    cache: PurePath,
    defaults: EraChoice | None,
    python_package: Archive | None,
    magma_note: str,
    mirror: str | None,
    from_dir: str | None,
) -> None:
    """`fetch-deps --dry-run`: what would be fetched where, from which era's defaults (`defaults`, the era
    choice, when versions were left to it), and the Python interpreter a fetched CPython gives."""
    from pytorch_winbuild.deps.fetch import describe_fetch
    from pytorch_winbuild.knowledge.catalog import python_interpreter

    era_line = (
        terminal_line(f"Versions not given take PyTorch {defaults.era.name}'s defaults (era from {defaults.source}).")
        + "\n"
        if defaults is not None
        else ""
    )
    print(era_line + describe_fetch(archives, cache_dir=cache, mirror=mirror, from_dir=from_dir), end="")
    if python_package is not None:
        from pytorch_winbuild.deps.cache import deps_dir

        interpreter = python_interpreter(deps_dir(cache, python_package))
        print(terminal_line(f"{python_package.description} interpreter (once fetched): {interpreter}"))
    if magma_note:
        print(magma_note.replace("was not fetched", "would not be fetched"))


def fetch_deps(
    c: Context,
    *,
    cuda: str | None,
    mkl_version: str | None,
    magma_version: str | None,
    magma_debug: bool,
    no_magma: bool,
    mirror: str | None,
    from_dir: str | None,
    update_lock: bool,
    cache_dir: str | None,
    jobs: str | None,
    lock_file: str | None,
    pytorch_version: str | None,
    source: str | None,
    python: str | None,
    dry_run: bool,
) -> None:
    """The `fetch-deps` task. `--python X.Y` alone fetches only that Python: MKL/MAGMA come too when a flag
    that picks them is given."""
    from pytorch_winbuild.deps.fetch import fetch_archives, format_summary
    from pytorch_winbuild.knowledge.catalog import python_interpreter, select_python

    downloads = whole_number(jobs, "--jobs", minimum=0, unit=" (0: one per archive, at most 4)") or 0
    for value, label in ((from_dir, "--from-dir"), (lock_file, "--lock-file"), (mirror, "--mirror")):
        path_flag(value, label)
    python_package = select_python(python) if python is not None else None
    picks_libraries = (
        magma_debug
        or no_magma
        or any(flag is not None for flag in (cuda, mkl_version, magma_version, pytorch_version, source))
    )
    from pytorch_winbuild.knowledge.choices import CudaWord, cuda_release_of
    from pytorch_winbuild.knowledge.model import load_knowledge

    knowledge = load_knowledge()
    asked = read_options(c, {"cuda": cuda, "pytorch_version": pytorch_version}, knowledge)
    release = cuda_release_of(asked.cuda)
    cuda_given = asked.cuda is not CudaWord.AUTO
    choice = fetch_era(knowledge, asked, source) if python is None or picks_libraries else None
    archives = (
        _libraries(choice, release, mkl_version, magma_version, magma_debug=magma_debug, no_magma=no_magma)
        if choice is not None
        else []
    ) + ([python_package] if python_package is not None else [])
    source_mirror = mirror if from_dir else checked_mirror(c, mirror)  # a configured mirror gives way to --from-dir
    cache = cache_choice(c, cache_dir)
    folder = cache.folder
    other_machine = os.name != "nt" and PureWindowsPath(str(folder)).drive  # a Windows plan's command, read on Linux
    needs_magma = release is not None and not no_magma
    magma_note = MAGMA_NOTE if choice is not None and not cuda_given and not no_magma else ""
    if dry_run:
        defaults = None if mkl_version and (magma_version or not needs_magma) else choice
        shown = PureWindowsPath(str(folder)) if other_machine else folder
        _print_fetch_plan(archives, shown, defaults, python_package, magma_note, source_mirror, from_dir)
        _no_venv_note(python_package)
        return
    if other_machine:
        raise ConfigurationError(
            f"{cache.label} {folder} is a Windows folder, and this machine is not Windows.", fix=OTHER_MACHINE_FIX
        )
    result = fetch_archives(
        archives,
        cache_dir=folder,
        mirror=source_mirror,
        mirror_label=flag_label("mirror", mirror),
        from_dir=from_dir,
        update_lock=update_lock,
        lock_path=Path(lock_file) if lock_file else None,
        jobs=downloads,
        before_writing=cache.check_writable,  # a cache holding everything may be read-only
    )
    print(format_summary(result))
    python_folder = result.folder("python")
    if python_package is not None and python_folder is not None:
        print(f"\n{terminal_line(f'{python_package.description} interpreter: {python_interpreter(python_folder)}')}")
    if magma_note:
        print(magma_note)
    _no_venv_note(python_package)


def _no_venv_note(package: Archive | None) -> None:
    """A NuGet CPython that cannot make the venv every build runs in is fetched as asked, and said so: plans do
    not use it (planning/python_choice.py nuget_python)."""
    from pytorch_winbuild.planning.python_choice import VENV_MODULE

    if package is not None and VENV_MODULE not in package.layout:
        print(
            terminal_line(
                f"note: {package.description} from NuGet has no venv module (NuGet's packages hold venv and "
                "ensurepip from 3.7.4 on), so a build cannot run in a venv made from it and plans do not use it; "
                f"for a release that needs Python {package.version.rsplit('.', 1)[0]}, install the 64-bit "
                "Python from python.org."
            )
        )


def older_than_days(text: str | None, *, aged: bool) -> float | None:
    """--older-than DAYS: a non-negative number of days, and only with a kind it applies to (--logs, --all)."""
    if text is None:
        return None
    if not aged:
        raise ConfigurationError(
            f"--older-than {echoed(text)} applies to logs only, and no --logs (or --all) was given; nothing was "
            "removed.",
            fix="add --logs to remove the logs and reports older than that, or leave --older-than out.",
        )
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not (0 <= days < float("inf")):
        raise ConfigurationError(
            f"--older-than {echoed(text)} is not a number of days; nothing was removed.",
            fix="pass a number of days of 0 or more, e.g. --older-than 30 (0: every log).",
        )
    return days


def clean(
    c: Context,
    *,
    kinds: dict[str, bool],
    all_kinds: bool,
    older_than: str | None,
    dry_run: bool,
    cache_dir: str | None,
) -> None:
    """The `clean` task: `kinds` maps each flag of deps/cache_clean.py KINDS to whether it was given."""
    from pytorch_winbuild.deps import cache_clean
    from pytorch_winbuild.deps.cache import is_cache
    from pytorch_winbuild.deps.progress import human_size, log_line

    chosen = [kind.flag for kind in cache_clean.KINDS if all_kinds or kinds.get(kind.flag)]
    if not chosen:
        raise ConfigurationError(
            "nothing to clean was named.",
            fix=f"pass one or more of {', '.join(_flag_names())}, or --all (add --dry-run to see sizes first).",
        )
    days = older_than_days(older_than, aged=any(cache_clean.BY_FLAG[flag].aged for flag in chosen))
    cache = cache_choice(c, cache_dir)
    folder = cache.folder
    found = cache_clean.items(folder, chosen, older_than=days) if folder.is_dir() else []
    if folder.exists() and not folder.is_dir():
        cache.check_writable()  # a file named as the cache: said so
    if dry_run:
        cache_clean.refuse_foreign(folder, cache.label, cache.instead)
        _print_dry_run(folder, chosen, found)
        return
    if found:
        cache.check_writable()
    elif is_cache(folder):  # nothing to remove: no lock to take, nothing written (the cache may be read-only)
        print(terminal_line(f"nothing to remove in {folder}"))
        return
    removed: list[int] = []

    def said(item: cache_clean.Removed) -> None:
        removed.append(item.bytes)
        print(terminal_line(f"removed {item.path} ({human_size(item.bytes)})"), flush=True)

    kept = cache_clean.clean(
        folder,
        chosen,
        older_than=days,
        timeout=10.0,
        log=log_line,
        on_removed=said,
        label=cache.label,
        instead=cache.instead,
    )
    if not removed and not kept:
        print(terminal_line(f"nothing to remove in {folder}"))
    _refuse_kept(kept)


def _flag_names() -> list[str]:
    from pytorch_winbuild.deps.cache_clean import KINDS

    return ["--" + kind.flag.replace("_", "-") for kind in KINDS]


def _refuse_kept(kept: list[Item]) -> None:
    """What a running build uses was kept; the command says so and fails, as it did not do all it was asked."""
    if not kept:
        return
    for item in kept:
        print(terminal_line(f"kept {item.path}: in use by a running build"))
    raise BusyError(
        f"{len(kept)} folder{'s' * (len(kept) != 1)} in use by a running build {'were' if len(kept) != 1 else 'was'} "
        "kept (listed above); everything else named was removed.",
        fix="run the same clean again when that build has finished.",
    )


def _none(folder: Path, kind: Kind, found: list[Item]) -> str:
    """A kind with nothing of its own to list: nothing there, or its folders go whole with a kind above (--all's
    --deps takes the fetched CPythons)."""
    roots = [folder / name for name in kind.folders]
    above = {
        "--" + item.kind.flag.replace("_", "-")
        for item in found
        if item.kind is not kind and any(item.path == root or item.path in root.parents for root in roots)
    }
    return f"--{kind.flag.replace('_', '-')}: " + (f"removed with {', '.join(sorted(above))}" if above else "nothing")


def _print_dry_run(folder: Path, chosen: list[str], found: list[Item]) -> None:
    """Each kind named, its size and the paths that would go (or stay, in use), and the total; nothing removed."""
    from pytorch_winbuild.deps.cache_clean import BY_FLAG, tree_bytes
    from pytorch_winbuild.deps.in_use import in_use
    from pytorch_winbuild.deps.progress import human_size

    print(terminal_line(f"dry run: nothing is removed from {folder} (sizes: the files' apparent bytes)"))
    total = 0
    for flag in chosen:
        kind = BY_FLAG[flag]
        mine = [(item, tree_bytes(item.path), in_use(item.path)) for item in found if item.kind is kind]
        freed = sum(size for _item, size, busy in mine if not busy)
        total += freed
        name = "--" + flag.replace("_", "-")
        count = f"{len(mine)} item{'s' * (len(mine) != 1)}"
        print(
            terminal_line(
                f"{name}: {count}, {human_size(freed)} ({kind.holds})" if mine else _none(folder, kind, found)
            )
        )
        for item, size, busy in mine:
            what = f"  kept, in use by a running build: {item.path}" if busy else f"  would remove {item.path}"
            print(terminal_line(f"{what} ({human_size(size)})"))
    print(terminal_line(f"total: {human_size(total)} would be freed"))
