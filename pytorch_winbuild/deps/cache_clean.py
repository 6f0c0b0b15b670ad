"""What `clean` can remove from the cache, kind by kind: one table (KINDS), what each kind holds now and its size,
and its removal.

Sizes are the files' apparent sizes (lstat st_size, as `du -sb`; folders themselves count 0), read with os.scandir
without following a link: a link or junction counts as itself, and removing one removes the link, never what it
points at, so nothing outside the cache is sized or removed. Removal happens under the cache lock and spares a
folder a running build has claimed (deps/in_use.py). Deleting only in a pytorch-winbuild cache (CACHEDIR.TAG) is
deps/cache.py's rule, checked first.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.deps.cache import TAG_NAME, cache_lock, is_cache, remove_tree
from pytorch_winbuild.deps.in_use import claim_files, in_use, is_claim_file
from pytorch_winbuild.errors import ConfigurationError, DependencyError

DAY_SECONDS = 86400.0


@dataclass(frozen=True)
class Kind:
    """One kind of cache content and the `clean` flag that names it."""

    flag: str  # the task's parameter: --compiler-cache is compiler_cache
    folders: tuple[str, ...]  # under the cache, "/"-separated
    each: bool  # True: every entry of the folders is an item of its own; False: each folder is one item
    holds: str
    pattern: str = "*"  # the entries taken (each=True)
    aged: bool = False  # --older-than applies


# The folder names are those of the modules that write there (tests/deps/test_cache_clean.py checks them):
# builder/source.py CLONES_FOLDER, nightly/entry.py SOURCES_FOLDER, planning/venv_plan.py, builder/pipeline.py
# default_log_dir, build_config/compiler_caches.toml's *_DIR and builder/compiler_cache.py LAUNCHERS_FOLDER.
# An item already taken by a kind above (deps/ as a whole) is not listed again by one below (pythons).
KINDS = (
    Kind("deps", ("deps",), False, "extracted MKL, MAGMA and NuGet CPythons"),
    Kind("downloads", ("downloads",), False, "downloaded archives and partial downloads"),
    Kind("venvs", ("venvs",), True, "build venvs, one per era x Python x requirement set"),
    Kind("sources", ("src", "nightly/src"), True, "clones made by build --repo and by the nightly"),
    Kind(
        "compiler_cache",
        ("sccache", "ccache", "clcache", "launchers"),
        False,
        "compiler caches' objects and build-ext's compiler wrappers",
    ),
    Kind("logs", ("logs",), True, "build logs and reports", aged=True),
    Kind("pythons", ("deps", "downloads"), True, "CPythons fetched from NuGet", pattern="python.*"),
)
BY_FLAG = {kind.flag: kind for kind in KINDS}


@dataclass(frozen=True)
class Item:
    kind: Kind
    path: Path


@dataclass(frozen=True)
class Removed:
    path: Path
    bytes: int


def _is_link(st: os.stat_result) -> bool:
    """A symbolic link, or on Windows any reparse point (a junction): never entered."""
    attributes = getattr(st, "st_file_attributes", 0)
    return stat.S_ISLNK(st.st_mode) or bool(attributes & stat.FILE_ATTRIBUTE_REPARSE_POINT)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def tree_bytes(path: Path) -> int:
    """The apparent size of the files under `path`, links counted as themselves and never entered."""
    st = _lstat(path)
    if st is None:
        return 0
    if _is_link(st) or not stat.S_ISDIR(st.st_mode):
        return st.st_size
    total, stack = 0, [str(path)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    entry_st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(entry_st.st_mode) and not _is_link(entry_st):
                    stack.append(entry.path)
                else:
                    total += entry_st.st_size
    return total


def _linked_on_the_way(cache_dir: Path, folder: str) -> bool:
    """Whether a folder between the cache and `folder` (itself included) is a link: its entries lie elsewhere."""
    path = cache_dir
    for part in folder.split("/"):
        path = path / part
        st = _lstat(path)
        if st is not None and _is_link(st):
            return True
    return False


def _entries(cache_dir: Path, kind: Kind, folder: str, older_than: float | None, now: float) -> list[Path]:
    root = cache_dir / folder
    if not kind.each:
        return [root] if _lstat(root) is not None else []
    if _linked_on_the_way(cache_dir, folder):
        return [root]  # the link itself goes, not what it points at
    try:
        with os.scandir(root) as scan:
            names = sorted(entry.name for entry in scan)
    except OSError:
        return []
    found = []
    for name in names:
        if is_claim_file(name) or not fnmatch.fnmatchcase(name, kind.pattern):
            continue
        if kind.aged and older_than is not None:
            st = _lstat(root / name)
            if st is None or now - st.st_mtime < older_than * DAY_SECONDS:
                continue
        found.append(root / name)
    return found


def items(cache_dir: Path, flags: Iterable[str], *, older_than: float | None = None) -> list[Item]:
    """What the named kinds hold now, in the table's order; `older_than` (days) keeps the newer entries of an aged
    kind (logs)."""
    chosen, now = set(flags), time.time()
    taken: list[Item] = []
    seen: set[Path] = set()
    for kind in KINDS:
        if kind.flag not in chosen:
            continue
        for folder in kind.folders:
            for path in _entries(cache_dir, kind, folder, older_than, now):
                if path in seen or any(parent in seen for parent in path.parents):
                    continue
                seen.add(path)
                taken.append(Item(kind, path))
    return taken


def refuse_foreign(cache_dir: Path, label: str, instead: str) -> None:
    """Clean deletes only in a pytorch-winbuild cache: a mistyped --cache-dir must not cost the user their
    Downloads folder. `label` names where the folder came from (a flag, a setting), `instead` how to choose another."""
    if cache_dir.exists() and not is_cache(cache_dir):
        raise ConfigurationError(
            f"{label} {cache_dir} is not a pytorch-winbuild cache (it has no {TAG_NAME} written by pytorch-winbuild "
            "and no archive it extracted), so clean deletes nothing there.",
            fix=f"check the folder name, and {instead}.",
        )


def _remove(path: Path) -> None:
    st = _lstat(path)
    if st is None:
        return
    if _is_link(st):  # the link goes, what it points at stays
        if getattr(st, "st_file_attributes", 0) & stat.FILE_ATTRIBUTE_DIRECTORY:
            os.rmdir(path)  # Windows: a junction, or a link to a folder
        else:
            os.unlink(path)
        return
    remove_tree(path)


def remove_items(found: list[Item], on_removed: Callable[[Removed], None]) -> list[Item]:
    """Remove each item not in use (with its stale claim files); call with the cache lock held. Returns the items
    kept because a running build claims them."""
    kept = []
    for item in found:
        if in_use(item.path):
            kept.append(item)
            continue
        size = tree_bytes(item.path)
        try:
            _remove(item.path)
            for claim in claim_files(item.path):
                claim.unlink(missing_ok=True)
        except OSError as exc:
            raise DependencyError(
                f"could not delete {item.path} ({exc.strerror or exc}: {exc.filename}).",
                fix="close programs that use files in it (a build, an editor, a shell inside it) and run "
                "the command again.",
            ) from None
        on_removed(Removed(item.path, size))
    return kept


def clean(
    cache_dir: Path,
    flags: Iterable[str],
    *,
    older_than: float | None,
    timeout: float,
    log: Callable[[str], None],
    on_removed: Callable[[Removed], None],
    label: str = "the cache folder",
    instead: str = "pass the cache folder with --cache-dir",
) -> list[Item]:
    """Remove what the named kinds hold, only in a pytorch-winbuild cache, under its lock (waiting up to `timeout`
    seconds for a run that holds it). Returns what was kept because a running build uses it."""
    if not cache_dir.exists():
        return []
    refuse_foreign(cache_dir, label, instead)
    with cache_lock(cache_dir, timeout=timeout, log=log):
        return remove_items(items(cache_dir, flags, older_than=older_than), on_removed)
