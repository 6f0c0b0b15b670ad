"""PyTorch's default CUDA architectures (build_config/default_arches.toml): what its CMake builds without
TORCH_CUDA_ARCH_LIST when it finds no GPU, per release whose select_compute_arch.cmake was read and per CUDA.
The plan names the list and MAX_JOBS counts it: every compile job compiles each of its architectures."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.arch_list import split_entries
from pytorch_winbuild.knowledge.config_files import array, as_table, load_toml, require, string_list, string_values
from pytorch_winbuild.knowledge.versions import NEWEST_WORDS, release_tuple

FILE = "default_arches.toml"


@dataclass(frozen=True)
class DefaultArches:
    """The list for one release and CUDA, where it was read, and a note when the release's own file was not read."""

    arch_list: str
    source: str
    note: str = ""

    @property
    def count(self) -> int:
        return len(split_entries(self.arch_list))


@dataclass(frozen=True)
class Table:
    """One release range's lists, per CUDA X.Y, and where they were read."""

    pytorch: tuple[str, str]
    source: str
    lists: dict[str, str]  # CUDA X.Y → CUDA_COMMON_GPU_ARCHITECTURES


def default_arches(release: str, cuda: str) -> DefaultArches | None:
    """The list PyTorch `release` (a version, or main/latest) builds with CUDA `cuda` when it finds no GPU; None
    when no table read has that CUDA."""
    read = tables()
    key = None if release in NEWEST_WORDS else release_tuple(release)
    own = next(
        (t for t in read if key is not None and release_tuple(t.pytorch[0]) <= key < release_tuple(t.pytorch[1])),
        None,
    )
    nearest = own or _nearest(read, key)
    if cuda not in nearest.lists:
        return None
    note = (
        ""
        if own is not None
        else f"PyTorch {release}'s select_compute_arch.cmake was not read; this is PyTorch {nearest.pytorch[0]}'s, "
        "the nearest read (compare it with the source tree and update build_config/default_arches.toml)"
    )
    return DefaultArches(nearest.lists[cuda], nearest.source, note)


def _nearest(tables: tuple[Table, ...], key: tuple[int, ...] | None) -> Table:
    """The newest table read before `key` (None: main), else the oldest."""
    before = [t for t in tables if key is None or release_tuple(t.pytorch[1]) <= key]
    return before[-1] if before else tables[0]


@functools.cache
def tables() -> tuple[Table, ...]:
    """The tables of build_config/default_arches.toml, oldest first, read once."""
    data = load_toml(FILE)
    found = []
    for number, item in enumerate(array(data, "default_arch_lists", FILE)):
        where = f"{FILE}: default_arch_lists[{number}]"
        table = as_table(item, where)
        pytorch = string_list(table, "pytorch", where)
        if len(pytorch) != 2 or release_tuple(pytorch[0]) >= release_tuple(pytorch[1]):
            raise ConfigurationError(f"{where}.pytorch: expected [first, end) releases, got {pytorch!r}.")
        lists = string_values(as_table(table.get("lists"), f"{where}.lists"), f"{where}.lists")
        found.append(Table((pytorch[0], pytorch[1]), require(table, "source", str, where), lists))
    if not found or any(
        release_tuple(a.pytorch[1]) > release_tuple(b.pytorch[0]) for a, b in itertools.pairwise(found)
    ):
        raise ConfigurationError(f"{FILE}: default_arch_lists must be given oldest first, none overlapping.")
    return tuple(found)
