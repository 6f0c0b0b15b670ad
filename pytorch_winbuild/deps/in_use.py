"""The folders of the cache a running build uses (its clone, its venv, its compiler cache), claimed so that `clean`
leaves them alone.

A build claims a folder with a lock file of its own beside it, `.<name>.in-use-<pid>-<n>`, held (an OS file lock) until
the build ends: a build that crashed holds nothing, so its file is stale and `clean` removes it with the folder.
Claims are taken under the cache lock, and `clean` holds that lock while it looks and removes, so no build starts
using a folder between clean's look and its removal. Several builds may claim one folder: each has its own file.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pytorch_winbuild.deps.cache import cache_lock

if TYPE_CHECKING:
    from filelock import BaseFileLock

CLAIM_INFIX = ".in-use-"
_serial = itertools.count()  # one file per claim, also for two claims of one folder in one process (nightly threads)
# A build waits this long for a `clean` (or a fetch) holding the cache lock before it claims its folders.
CLAIM_TIMEOUT = 3600.0


def is_claim_file(name: str) -> bool:
    """Whether a folder entry is a claim file (never an item of its own to list or size)."""
    return name.startswith(".") and CLAIM_INFIX in name


def claim_files(folder: Path) -> list[Path]:
    """The claim files of `folder` (live or stale), found beside it."""
    prefix = f".{folder.name}{CLAIM_INFIX}"
    try:
        with os.scandir(folder.parent) as entries:
            return [Path(entry.path) for entry in entries if entry.name.startswith(prefix)]
    except OSError:
        return []


def in_use(folder: Path) -> bool:
    """Whether a live process holds a claim on `folder`. A claim file that cannot be opened (a read-only cache)
    counts as held: clean never guesses in favour of removing."""
    from filelock import FileLock, Timeout

    for file in claim_files(folder):
        lock = FileLock(str(file))
        try:
            lock.acquire(timeout=0)
        except (Timeout, OSError):
            return True
        lock.release()
    return False


def _inside(folder: Path, cache_dir: Path) -> bool:
    return folder.absolute().is_relative_to(cache_dir.absolute())


def build_folders(cache_dir: Path, venv_folder: str | None, compiler_cache: str) -> list[Path]:
    """The folders a build of a plan uses besides its clone: its venv and its compiler cache's objects
    (<cache>/<name>, build_config/compiler_caches.toml)."""
    used = [Path(venv_folder)] if venv_folder else []
    return used + ([cache_dir / compiler_cache] if compiler_cache != "none" else [])


@contextmanager
def claimed(
    cache_dir: Path, folders: Iterable[Path], *, log: Callable[[str], None], timeout: float = CLAIM_TIMEOUT
) -> Iterator[None]:
    """Claim the `folders` that lie in the cache for the block (others are not clean's to remove)."""
    from filelock import FileLock

    inside = list(dict.fromkeys(folder.absolute() for folder in folders if _inside(folder, cache_dir)))
    locks: list[BaseFileLock] = []
    made: list[Path] = []  # removed again when nothing was put there (a clone refused before it began)
    try:
        if inside:
            with cache_lock(cache_dir, timeout=timeout, log=log):
                for folder in inside:
                    if not folder.parent.is_dir():
                        folder.parent.mkdir(parents=True)
                        made.append(folder.parent)
                    name = f".{folder.name}{CLAIM_INFIX}{os.getpid()}-{next(_serial)}"
                    lock = FileLock(str(folder.parent / name))
                    lock.acquire(timeout=0)  # a file of its own: nobody else locks it
                    locks.append(lock)
        yield
    finally:
        for held in reversed(locks):
            held.release()
            with contextlib.suppress(OSError):
                os.unlink(held.lock_file)
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
