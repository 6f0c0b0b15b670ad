"""Which CMake a PyTorch build may run: every bound that applies to one plan, each with its source.

A release's own cmake_minimum_required sets a floor (eras.toml min_cmake, min_cmake_from). CMake 4.0
removed compatibility with policies older than 3.5, which the releases before 2.7 still declare in
their tree or submodules: a ceiling that CMAKE_POLICY_VERSION_MINIMUM lifts (build_config/cmake.toml
[policy]). The Visual Studio generator a plan uses, its toolset `version=` field, and, in the eras that
compile CUDA with CMake's own CUDA language, the CUDA release set further floors. The plan
(planning/cmake_plan.py) intersects the bounds that apply and picks a CMake inside them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.config_files import load_toml, optional, require, string_list
from pytorch_winbuild.knowledge.versions import ReleaseRange, version_tuple


class EraBounds(Protocol):
    """What the bounds read of an era (knowledge/model.py Era)."""

    @property
    def name(self) -> str: ...
    @property
    def newest(self) -> str: ...
    @property
    def cuda_language(self) -> bool: ...
    @property
    def cmake_source(self) -> str: ...

    def min_cmake_for(self, release: tuple[int, ...] | None) -> str: ...


@dataclass(frozen=True)
class CmakeBound:
    """CMake >= low and/or < end, what asks for it and where that was read. `policy` is the
    CMAKE_POLICY_VERSION_MINIMUM that lets a CMake at or past `end` configure anyway (CMake 4.0+)."""

    why: str
    source: str
    low: str | None = None
    end: str | None = None
    policy: str | None = None

    def refuses(self, version: str) -> bool:
        """Whether `version` lies outside this bound (a policy ceiling counts: see `lifted_by`)."""
        key = version_tuple(version)
        return (self.low is not None and key < version_tuple(self.low)) or (
            self.end is not None and key >= version_tuple(self.end)
        )

    @property
    def short(self) -> str:
        """'CMake >= 3.13: <why>' / 'CMake < 4.0 (or ...): <why>', as a plan's decision prints the bound."""
        parts = ([f">= {self.low}"] if self.low else []) + ([f"< {self.end}"] if self.end else [])
        lifted = f" (or CMAKE_POLICY_VERSION_MINIMUM={self.policy} with CMake {self.end}+)" if self.policy else ""
        return f"CMake {' and '.join(parts)}{lifted}: {self.why}"

    @property
    def text(self) -> str:
        """The bound with where it was read, as an error prints it."""
        return f"{self.short} ({self.source})"


@dataclass(frozen=True)
class CmakeRange:
    """The bounds of one plan: a CMake fits when no hard bound refuses it; a policy ceiling it passes
    only with the bound's CMAKE_POLICY_VERSION_MINIMUM."""

    bounds: tuple[CmakeBound, ...]

    def refusing(self, version: str) -> list[CmakeBound]:
        """The bounds that refuse `version` and no policy minimum lifts."""
        return [b for b in self.bounds if b.refuses(version) and not self._lifted(b, version)]

    def policy_for(self, version: str) -> CmakeBound | None:
        """The policy ceiling `version` passes only with CMAKE_POLICY_VERSION_MINIMUM, or None."""
        return next((b for b in self.bounds if b.refuses(version) and self._lifted(b, version)), None)

    @staticmethod
    def _lifted(bound: CmakeBound, version: str) -> bool:
        low_ok = bound.low is None or version_tuple(version) >= version_tuple(bound.low)
        return bound.policy is not None and low_ok

    @property
    def short(self) -> str:
        return "; ".join(bound.short for bound in self.bounds)

    @property
    def text(self) -> str:
        return "; ".join(bound.text for bound in self.bounds)


@dataclass(frozen=True)
class _Since:
    version: str
    source: str
    below: str | None = None  # the first CMake that no longer has it


@dataclass(frozen=True)
class _Policy(ReleaseRange):
    pytorch: tuple[str, str]  # the releases [first, end) whose tree or submodules declare old policies
    below: str  # the first CMake that refuses these releases' old policies
    minimum: str  # the CMAKE_POLICY_VERSION_MINIMUM that lets it configure them
    source: str


@dataclass(frozen=True)
class CmakeKnowledge:
    """build_config/cmake.toml: the policy ceiling, the generators, the toolset field, CUDA per CMake."""

    policy: _Policy
    generators: dict[str, _Since]  # "Visual Studio 15 2017" → the first CMake that knows it
    toolset_version: _Since  # CMAKE_GENERATOR_TOOLSET's version= field
    cuda: dict[str, _Since]  # CUDA release → the first CMake whose CUDA language knows it

    def range_for(
        self,
        era: EraBounds,
        release: tuple[int, ...] | None,
        *,
        generator: str | None = None,
        toolset_version: bool = False,
        cuda: str | None = None,
    ) -> CmakeRange:
        """The bounds of a build of `release` (None: the era's newest, "main" for the last era) with the
        Visual Studio `generator` (None: Ninja), the toolset `version=` field, and CUDA `cuda` (None: CPU)."""
        shown = ".".join(map(str, release)) if release is not None else era.newest
        key = release if release is not None else (None if era.newest == "main" else version_tuple(era.newest))
        floor = era.min_cmake_for(key)
        bounds = [
            CmakeBound(
                f"PyTorch {shown}'s CMakeLists.txt has cmake_minimum_required(VERSION {floor})",
                era.cmake_source,
                low=floor,
            )
        ]
        if key is not None and self.policy.holds(key):
            bounds.append(
                CmakeBound(
                    f"CMake {self.policy.below} refuses cmake_minimum_required below {self.policy.minimum}, which "
                    f"PyTorch {shown}'s tree or submodules declare",
                    self.policy.source,
                    end=self.policy.below,
                    policy=self.policy.minimum,
                )
            )
        if generator is not None:
            known = self.generators.get(generator)
            if known is None:
                raise ConfigurationError(f"cmake.toml: no [generator] entry for {generator!r}; add it with its source.")
            bounds.append(CmakeBound(f"the generator {generator}", known.source, low=known.version, end=known.below))
            if toolset_version:
                bounds.append(
                    CmakeBound(
                        "the toolset's version= field (-T version=14.xx)",
                        self.toolset_version.source,
                        low=self.toolset_version.version,
                    )
                )
        if cuda is not None and era.cuda_language:
            known = self.cuda.get(cuda)
            if known is not None:
                bounds.append(
                    CmakeBound(
                        f"CMake's CUDA language with CUDA {cuda} (PyTorch {era.name} compiles .cu files with it)",
                        known.source,
                        low=known.version,
                    )
                )
        return CmakeRange(tuple(bounds))


def _since(table: Mapping[str, object], where: str) -> _Since:
    version = require(table, "since", str, where)
    below = optional(table, "below", str, where, "") or None
    for bound in (version, below or "0"):
        version_tuple(bound)
    source = require(table, "source", str, where)
    if not source.strip():
        raise ConfigurationError(f"{where}.source: every bound names where it was read.")
    return _Since(version, source, below)


def load_cmake_knowledge(path: Path) -> CmakeKnowledge:
    data = load_toml(path)
    policy = require(data, "policy", dict, path.name)
    where = f"{path.name}: policy"
    pytorch = string_list(policy, "pytorch", where)
    if len(pytorch) != 2:
        raise ConfigurationError(f"{where}.pytorch: expected [first, end).")
    loaded_policy = _Policy(
        pytorch=(pytorch[0], pytorch[1]),
        below=require(policy, "below", str, where),
        minimum=require(policy, "minimum", str, where),
        source=" ".join(string_list(policy, "sources", where)),
    )
    generator = require(data, "generator", dict, path.name)
    generators = {
        name: _since(require(generator, name, dict, f"{path.name}: generator"), f"{path.name}: generator.{name}")
        for name in generator
    }
    cuda_table = require(data, "cuda", dict, path.name)
    cuda = {
        version: _since(require(cuda_table, version, dict, f"{path.name}: cuda"), f'{path.name}: cuda."{version}"')
        for version in cuda_table
    }
    return CmakeKnowledge(
        policy=loaded_policy,
        generators=generators,
        toolset_version=_since(require(data, "toolset_version", dict, path.name), f"{path.name}: toolset_version"),
        cuda=cuda,
    )
