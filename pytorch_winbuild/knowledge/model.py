"""The knowledge tables in build_config/ (CUDA releases, Visual Studio, PyTorch eras), typed and validated.

Loaded once per process; every problem in a file is a ConfigurationError naming the file and key.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.arch_list import NameTable, split_entries
from pytorch_winbuild.knowledge.build_requirements import BuildRequirements, load_build_requirements
from pytorch_winbuild.knowledge.cmake_range import CmakeKnowledge, load_cmake_knowledge
from pytorch_winbuild.knowledge.config_files import (
    array,
    as_table,
    load_toml,
    optional,
    require,
    require_int_pair,
    string_list,
    string_values,
)
from pytorch_winbuild.knowledge.msvc import toolset_msc_ver
from pytorch_winbuild.knowledge.python_releases import PythonReleases, load_python_releases
from pytorch_winbuild.knowledge.resources import Resources, load_resources
from pytorch_winbuild.knowledge.versions import NEWEST_WORDS, ReleaseRange, release_tuple, version_tuple

_CAPABILITY = re.compile(r"\d{1,2}\.\d")
_DRIVER = re.compile(r"\d{3}\.\d{2,3}(?:\.\d{2})?")


@dataclass(frozen=True)
class CudaRelease:
    version: str
    msc_range: tuple[int, int]
    needs_nvtx: bool
    arch_list: str
    sm: tuple[str, ...]  # compute capabilities its nvcc compiles for (`nvcc --list-gpu-code`)
    arch_specific: tuple[str, ...]  # those it also compiles as X.Ya (sm_90a)
    family_specific: tuple[str, ...]  # those it also compiles as X.Yf (sm_100f, CUDA 12.9+)
    driver: dict[str, str]  # OS → the oldest display driver that runs this release (its GA)

    def __str__(self) -> str:
        return self.version  # a release prints as the user types it: `--cuda {release}`, "CUDA {release}"

    def accepts(self, entry: str) -> bool:
        """Whether nvcc of this release compiles an architecture written as '8.6', '9.0a' or '10.0f'."""
        capability, suffix = entry.rstrip("af"), entry[len(entry.rstrip("af")) :]
        table = {"": self.sm, "a": self.arch_specific, "f": self.family_specific}[suffix]
        return capability in table

    @property
    def magma_prefix(self) -> str:
        """'9.0' → 'cuda90', '12.4' → 'cuda124' (the MAGMA archive naming)."""
        return "cuda" + self.version.replace(".", "")


@dataclass(frozen=True)
class ProductLine:
    line: str
    major: int
    generator: str
    generator_platform: str
    vcvars_dir: str
    installer: str
    arch_alias: dict[str, str]

    def vcvars_arch(self, arch: str) -> str:
        """The name this product's vcvarsall.bat uses for an architecture (VS 2015: x64 → amd64)."""
        return self.arch_alias.get(arch, arch)


@dataclass(frozen=True)
class ToolsetInfo:
    version: str  # short, "14.11"
    product_line: str
    component: str

    @property
    def msc_ver(self) -> int:
        return toolset_msc_ver(self.version)


@dataclass(frozen=True)
class WindowsOff:
    name: str
    value: str
    reason: str


@dataclass(frozen=True)
class Era(ReleaseRange):
    name: str
    pytorch: tuple[str, str]
    python: tuple[str, str]
    min_cmake: str  # cmake_minimum_required of the era's first release
    cuda: tuple[str, ...]
    cuda_flag: tuple[str, ...]
    vcvars_arch: str
    toolset_variable: str
    prebuild_command: bool
    cwrap_prep: bool
    compiler_caches: tuple[str, ...]
    commands: dict[str, tuple[str, ...]]  # --mode → arguments after the Python interpreter
    mkl: str
    magma: tuple[str, ...]
    windows_off: tuple[WindowsOff, ...]
    visual_studio: tuple[str, ...]  # product lines the era's build knows
    newest: str  # the release an unpinned plan suggests checking out ("main" for the newest era)
    vs_generators: dict[str, str]  # product line → the CMAKE_GENERATOR the era accepts
    generator_from: str  # "CMAKE_GENERATOR", "hard-coded" or "checked"
    generator_platform: bool  # the plan sets CMAKE_GENERATOR_PLATFORM
    ninja_switch: str  # "none", "use_ninja" or "cmake_generator": what turns the era's Ninja auto-pick off
    launchers: tuple[str, ...]  # languages whose CMAKE_<LANG>_COMPILER_LAUNCHER reach the compiles
    cudahostcxx: bool
    nvtoolsext: str  # "cuda11", "always" or "nvtx3"
    distributed: str  # "off" or "libuv"
    sources: tuple[str, ...]
    # Later releases of the era that raised cmake_minimum_required: (release, CMake), oldest first.
    min_cmake_from: tuple[tuple[str, str], ...] = ()
    # cuDNN location variables the era's build reads from the environment → what reads each.
    cudnn_env: dict[str, str] = field(default_factory=dict)
    # The one folder the era links NvToolsExt from when its build reads no variable for it ("": it reads
    # NVTOOLSEXT_PATH): PyTorch 1.1 hard-codes it.
    nvtoolsext_fixed: str = ""

    @property
    def cuda_language(self) -> bool:
        """Whether the era compiles .cu files with CMake's own CUDA language (enable_language(CUDA), from 1.11),
        which eras.toml records as CUDA among the languages whose compiler launcher reaches the compiles."""
        return "CUDA" in self.launchers

    @property
    def cmake_source(self) -> str:
        """Where the era's cmake_minimum_required was read (its `sources` entry that names it)."""
        return next(source for source in self.sources if "cmake_minimum_required" in source)

    def min_cmake_for(self, release: tuple[int, ...] | None) -> str:
        """The CMake a release of this era requires; None: the era's newest release (what "main" needs)."""
        needed = self.min_cmake
        for first, cmake in self.min_cmake_from:
            if release is None or version_tuple(first) <= tuple(release):
                needed = cmake
        return needed


@dataclass(frozen=True)
class CacheEnvEntry:
    name: str
    value: str  # may contain {cache_dir} and {sep}
    reason: str
    cuda_only: bool
    launcher: str  # "C", "CXX", "CUDA" for CMAKE_<LANG>_COMPILER_LAUNCHER entries, else ""


@dataclass(frozen=True)
class CompilerCache:
    name: str
    os: tuple[str, ...]
    generators: tuple[str, ...]
    install: str
    env: tuple[CacheEnvEntry, ...]


@dataclass(frozen=True)
class PathLimits:
    max_path: int
    deepest_build_suffix: int
    deepest_cache_suffix: int


# Who reads TORCH_CUDA_ARCH_LIST, each with its own table of names: PyTorch's CMake (a build) and
# torch.utils.cpp_extension (build-ext); the words messages use for them.
ARCH_READERS = {"cmake": "CMake", "cpp_extension": "torch.utils.cpp_extension"}


@dataclass(frozen=True)
class ArchNames(ReleaseRange):
    """One reader's architecture names for a range of PyTorch releases (gpu.toml [[arch_names]])."""

    reader: str  # a key of ARCH_READERS
    pytorch: tuple[str, str]  # the releases [first, end) it holds for
    source: str  # the tag, file and lines it was read from
    names: dict[str, str]  # name → the entries it stands for; the "NAME+PTX" forms the reader accepts are keys too


@dataclass(frozen=True)
class GpuKnowledge:
    arch_names: tuple[ArchNames, ...]  # every reader's tables, oldest first, back to back
    minor_compatible: dict[str, dict[str, str]]  # CUDA major → OS → oldest driver that runs every minor release

    def names_for(self, release: str, reader: str) -> NameTable:
        """The names PyTorch `release` (a version, or main/latest) gives --arch-list when `reader` reads it;
        a release newer than every table read gets the newest table, with a note saying so."""
        tables = [table for table in self.arch_names if table.reader == reader]
        who = ARCH_READERS[reader]
        key = None if release in NEWEST_WORDS else release_tuple(release)
        if key is not None and key < tables[0].first:
            raise ConfigurationError(
                f"PyTorch {release} is older than every table of {who} architecture names (build_config/gpu.toml "
                f"[[arch_names]] starts at {tables[0].pytorch[0]})."
            )
        for table in tables:
            if key is not None and key < table.end:
                return NameTable(table.names, f"PyTorch {release}'s {who} names ({table.source})")
        newest = tables[-1]
        return NameTable(
            newest.names,
            f"the newest {who} names read, PyTorch {newest.pytorch[0]}'s ({newest.source})",
            f"PyTorch {release} is newer than every release whose {who} architecture names were read (the last "
            f"table holds for releases before {newest.pytorch[1]}), so its names are read with the newest table; "
            "compare that with the source tree and update build_config/gpu.toml.",
        )

    def any_release(self) -> NameTable:
        """Every name some release knows: --arch-list is checked before the plan knows its release."""
        names: dict[str, str] = {}
        for table in self.arch_names:
            names.update(table.names)
        return NameTable(names, "PyTorch's architecture names (of any release)")


@dataclass(frozen=True)
class Knowledge:
    cuda: dict[str, CudaRelease]
    gpu: GpuKnowledge
    products: dict[str, ProductLine]
    arch_scripts: dict[str, str]
    toolsets: tuple[ToolsetInfo, ...]
    eras: tuple[Era, ...]
    compiler_caches: dict[str, CompilerCache]
    path_limits: PathLimits
    resources: Resources
    build_requirements: BuildRequirements  # each era's build venv packages, pinned per Python
    cmake: CmakeKnowledge  # the bounds of the CMake a plan runs (build_config/cmake.toml)
    python_releases: PythonReleases  # the Python each release builds with (build_config/python_releases.toml)
    cuda_install: dict[str, str] = field(default_factory=dict)  # OS → where to get CUDA (cuda.toml [install])

    def cuda_release(self, version: str, label: str = "CUDA") -> CudaRelease:
        """The release build_config/cuda.toml lists as `version`; `label` names where the version came from."""
        if version not in self.cuda:
            known = ", ".join(sorted(self.cuda, key=version_tuple))
            raise ConfigurationError(
                f"{label} {version} is not a CUDA release pytorch-winbuild knows.",
                fix=f"pass one of {known}, or 'cpu' or 'auto'; to teach it a new release, add it to "
                "build_config/cuda.toml.",
            )
        return self.cuda[version]


def _cuda_install(path: Path) -> dict[str, str]:
    """cuda.toml's [install]: for each OS, where a missing CUDA release comes from."""
    table = require(load_toml(path), "install", dict, path.name)
    for os_name in ("windows", "linux"):
        require(table, os_name, str, f"{path.name}: install")
    return string_values(table, f"{path.name}: install")


def _cuda_table(path: Path) -> dict[str, CudaRelease]:
    data = load_toml(path)
    table = require(data, "cuda", dict, path.name)
    releases: dict[str, CudaRelease] = {}
    for version, value in table.items():
        where = f'{path.name}: cuda."{version}"'
        entry = as_table(value, where)
        version_tuple(version)
        releases[version] = CudaRelease(
            version=version,
            msc_range=require_int_pair(entry, "msc_range", where),
            needs_nvtx=require(entry, "needs_nvtx", bool, where),
            arch_list=require(entry, "arch_list", str, where),
            sm=_capabilities(entry, "sm", where),
            arch_specific=_capabilities(entry, "arch_specific", where, required=False),
            family_specific=_capabilities(entry, "family_specific", where, required=False),
            driver=_drivers(require(entry, "driver", dict, where), f"{where}.driver"),
        )
    return releases


def _capabilities(entry: Mapping[str, object], key: str, where: str, required: bool = True) -> tuple[str, ...]:
    values = string_list(entry, key, where, default=None if required else [])
    for value in values:
        if not _CAPABILITY.fullmatch(value):
            raise ConfigurationError(f"{where}.{key}: '{value}' is not a compute capability (X.Y).")
    return tuple(values)


def _drivers(table: Mapping[str, object], where: str) -> dict[str, str]:
    drivers = {}
    for os_name in ("linux", "windows"):
        value = require(table, os_name, str, where)
        if not _DRIVER.fullmatch(value):
            raise ConfigurationError(
                f"{where}.{os_name}: '{value}' is not a driver version (e.g. 527.41 or 525.60.13)."
            )
        drivers[os_name] = value
    return drivers


def driver_key(version: str) -> tuple[int, ...]:
    """'525.60.13' → (525, 60, 13): NVIDIA driver versions compare part by part."""
    return tuple(int(part) for part in version.split("."))


def _entries_table(table: Mapping[str, object], key: str, where: str) -> dict[str, str]:
    value = optional(table, key, dict, where, {})
    entries = {name: item for name, item in value.items() if isinstance(item, str)}
    if len(entries) != len(value):
        raise ConfigurationError(f"{where}.{key}: every value must be a string of entries.")
    return entries


def _with_ptx(entries: str, ptx: str | None) -> str:
    """CMake's NAME+PTX: the name's cubins, plus PTX for its arch_ptx (for all of them when it has none)."""
    marked = split_entries(ptx) if ptx else split_entries(entries)
    return ";".join(f"{entry}+PTX" if entry in marked else entry for entry in split_entries(entries))


def _arch_names(data: Mapping[str, object], name: str) -> tuple[ArchNames, ...]:
    """The [[arch_names]] tables; each reader's must follow one another with no gap."""
    tables: list[ArchNames] = []
    for number, item in enumerate(array(data, "arch_names", name)):
        where = f"{name}: arch_names[{number}]"
        table = as_table(item, where)
        reader = require(table, "reader", str, where)
        if reader not in ARCH_READERS:
            raise ConfigurationError(f"{where}.reader: '{reader}' is not one of {', '.join(ARCH_READERS)}.")
        pytorch = string_list(table, "pytorch", where)
        if len(pytorch) != 2 or release_tuple(pytorch[0]) >= release_tuple(pytorch[1]):
            raise ConfigurationError(f"{where}.pytorch: expected [first, end) releases, got {pytorch!r}.")
        names = _entries_table(table, "names", where)
        ptx = _entries_table(table, "ptx", where)
        if (ptx and reader != "cmake") or any(
            name not in names or not set(split_entries(entries)) <= set(split_entries(names[name]))
            for name, entries in ptx.items()
        ):
            raise ConfigurationError(
                f"{where}.ptx: only a CMake table has one, and a name's arch_ptx must be among its arch_bin."
            )
        if reader == "cmake":
            names |= {f"{name}+PTX": _with_ptx(entries, ptx.get(name)) for name, entries in names.items()}
        else:  # cpp_extension replaces the name in the text: "Kepler+Tesla+PTX" is "3.7+PTX", "Ampere+PTX" nothing
            names |= {f"{name}+PTX": f"{entries}+PTX" for name, entries in names.items() if "+PTX" not in entries}
        tables.append(ArchNames(reader, (pytorch[0], pytorch[1]), require(table, "source", str, where), names))
    for reader in ARCH_READERS:
        ranges = [table.pytorch for table in tables if table.reader == reader]
        gaps = [f"{a[1]} vs {b[0]}" for a, b in itertools.pairwise(ranges) if a[1] != b[0]]
        if not ranges or gaps:
            raise ConfigurationError(
                f"{name}: arch_names for reader '{reader}' must cover the releases in order, each table starting "
                f"where the one before ends ({'; '.join(gaps) or 'none given'})."
            )
    return tuple(tables)


def _gpu_table(path: Path) -> GpuKnowledge:
    data = load_toml(path)
    where = f"{path.name}: minor_version_compatibility"
    minor = {
        major: _drivers(as_table(table, f"{where}.{major}"), f"{where}.{major}")
        for major, table in require(data, "minor_version_compatibility", dict, path.name).items()
    }
    return GpuKnowledge(arch_names=_arch_names(data, path.name), minor_compatible=minor)


def _visual_studio_table(path: Path) -> tuple[dict[str, ProductLine], dict[str, str], tuple[ToolsetInfo, ...]]:
    data = load_toml(path)
    products: dict[str, ProductLine] = {}
    for line, value in require(data, "product", dict, path.name).items():
        where = f'{path.name}: product."{line}"'
        entry = as_table(value, where)
        products[line] = ProductLine(
            line=line,
            major=require(entry, "major", int, where),
            generator=require(entry, "generator", str, where),
            generator_platform=optional(entry, "generator_platform", str, where, ""),
            vcvars_dir=require(entry, "vcvars_dir", str, where),
            installer=require(entry, "installer", str, where),
            arch_alias=string_values(optional(entry, "arch_alias", dict, where, {}), f"{where}.arch_alias"),
        )
    arch_scripts = string_values(require(data, "arch_scripts", dict, path.name), f"{path.name}: arch_scripts")
    toolsets = []
    for index, item in enumerate(array(data, "toolset", path.name)):
        where = f"{path.name}: toolset[{index}]"
        entry = as_table(item, where)
        info = ToolsetInfo(
            version=require(entry, "version", str, where),
            product_line=require(entry, "product_line", str, where),
            component=require(entry, "component", str, where),
        )
        if info.product_line not in products:
            raise ConfigurationError(f"{where}.product_line: '{info.product_line}' is not a [product.*] table.")
        toolset_msc_ver(info.version)  # validates the version's shape
        toolsets.append(info)
    return products, arch_scripts, tuple(sorted(toolsets, key=lambda t: t.msc_ver))


def _commands(entry: Mapping[str, object], where: str) -> dict[str, tuple[str, ...]]:
    table = require(entry, "commands", dict, where)
    for mode in ("install", "develop", "wheel"):
        string_list(table, mode, f"{where}.commands")
    unknown = [name for name in table if name not in ("install", "develop", "wheel", "libtorch")]
    if unknown:
        raise ConfigurationError(f"{where}.commands: {unknown} are not --mode values or 'libtorch'.")
    return {mode: tuple(string_list(table, mode, f"{where}.commands")) for mode in table}


def _string_table(entry: Mapping[str, object], key: str, where: str) -> dict[str, str]:
    return string_values(require(entry, key, dict, where), f"{where}.{key}")


def _one_of(entry: Mapping[str, object], key: str, allowed: tuple[str, ...], where: str) -> str:
    value = require(entry, key, str, where)
    if value not in allowed:
        raise ConfigurationError(f"{where}.{key}: expected one of {', '.join(allowed)}, got {value!r}.")
    return value


def _min_cmake_from(entry: Mapping[str, object], where: str) -> tuple[tuple[str, str], ...]:
    table = _string_table(entry, "min_cmake_from", where) if "min_cmake_from" in entry else {}
    for first, cmake in table.items():
        version_tuple(first)
        version_tuple(cmake)
    return tuple(sorted(table.items(), key=lambda item: version_tuple(item[0])))


_CUDNN_VARIABLES = ("CUDNN_INCLUDE_DIR", "CUDNN_LIB_DIR", "CUDNN_ROOT_DIR")


def _cudnn_env(entry: Mapping[str, object], where: str) -> dict[str, str]:
    table = _string_table(entry, "cudnn_env", where)
    unknown = [name for name in table if name not in _CUDNN_VARIABLES]
    if unknown:
        raise ConfigurationError(f"{where}.cudnn_env: {unknown} are not one of {', '.join(_CUDNN_VARIABLES)}.")
    return table


def _windows_off(entry: Mapping[str, object], where: str) -> tuple[WindowsOff, ...]:
    switches = []
    for index, value in enumerate(array(entry, "windows_off", where)):
        at = f"{where}.windows_off[{index}]"
        item = as_table(value, at)
        switches.append(
            WindowsOff(
                name=require(item, "name", str, at),
                value=require(item, "value", str, at),
                reason=require(item, "reason", str, at),
            )
        )
    return tuple(switches)


def _eras(path: Path, cuda: dict[str, CudaRelease], products: dict[str, ProductLine]) -> tuple[Era, ...]:
    data = load_toml(path)
    eras = []
    for index, value in enumerate(array(data, "era", path.name)):
        where = f"{path.name}: era[{index}]"
        entry = as_table(value, where)
        pytorch = string_list(entry, "pytorch", where)
        python = string_list(entry, "python", where)
        if len(pytorch) != 2 or len(python) != 2:
            raise ConfigurationError(f"{where}: 'pytorch' and 'python' must be [first, end) pairs.")
        era_cuda = string_list(entry, "cuda", where)
        for version in era_cuda:
            if version not in cuda:
                raise ConfigurationError(f"{where}.cuda: '{version}' is not in cuda.toml.")
        windows_off = _windows_off(entry, where)
        eras.append(
            Era(
                name=require(entry, "name", str, where),
                pytorch=(pytorch[0], pytorch[1]),
                python=(python[0], python[1]),
                min_cmake=require(entry, "min_cmake", str, where),
                cuda=tuple(era_cuda),
                cuda_flag=tuple(string_list(entry, "cuda_flag", where)),
                vcvars_arch=require(entry, "vcvars_arch", str, where),
                toolset_variable=require(entry, "toolset_variable", str, where),
                prebuild_command=require(entry, "prebuild_command", bool, where),
                cwrap_prep=require(entry, "cwrap_prep", bool, where),
                compiler_caches=tuple(string_list(entry, "compiler_caches", where)),
                commands=_commands(entry, where),
                mkl=require(entry, "mkl", str, where),
                magma=tuple(string_list(entry, "magma", where)),
                windows_off=windows_off,
                visual_studio=tuple(string_list(entry, "visual_studio", where)),
                newest=require(entry, "newest", str, where),
                vs_generators=_string_table(entry, "vs_generators", where),
                generator_from=_one_of(entry, "generator_from", ("CMAKE_GENERATOR", "hard-coded", "checked"), where),
                generator_platform=require(entry, "generator_platform", bool, where),
                ninja_switch=_one_of(entry, "ninja_switch", ("none", "use_ninja", "cmake_generator"), where),
                launchers=tuple(string_list(entry, "launchers", where)),
                cudahostcxx=require(entry, "cudahostcxx", bool, where),
                nvtoolsext=_one_of(entry, "nvtoolsext", ("cuda11", "always", "nvtx3"), where),
                distributed=_one_of(entry, "distributed", ("off", "libuv"), where),
                sources=tuple(string_list(entry, "sources", where)),
                min_cmake_from=_min_cmake_from(entry, where),
                cudnn_env=_cudnn_env(entry, where),
                nvtoolsext_fixed=optional(entry, "nvtoolsext_fixed", str, where, ""),
            )
        )
        era = eras[-1]
        unknown = [line for line in (*era.visual_studio, *era.vs_generators) if line not in products]
        if unknown:
            raise ConfigurationError(
                f"{where}: Visual Studio {unknown} are not [product.*] tables of visual_studio.toml."
            )
        if not any("cmake_minimum_required" in source for source in era.sources):
            raise ConfigurationError(f"{where}.sources: name where the era's cmake_minimum_required was read.")
        for bound in (*era.pytorch, *era.python, era.min_cmake):
            version_tuple(bound)
        for first, _cmake in era.min_cmake_from:
            if not era.first < release_tuple(first) < era.end:
                raise ConfigurationError(
                    f"{where}.min_cmake_from: {first} is not a release after the era's first ({era.pytorch[0]}) "
                    f"and before its end ({era.pytorch[1]})."
                )
    ordered = tuple(sorted(eras, key=lambda e: e.first))
    for earlier, later in itertools.pairwise(ordered):
        if earlier.end != later.first:
            raise ConfigurationError(
                f"{path.name}: era {earlier.name} ends at {earlier.pytorch[1]} but the next one, "
                f"{later.name}, starts at {later.pytorch[0]}; eras must follow each other without gaps."
            )
    return ordered


def _compiler_caches(path: Path) -> dict[str, CompilerCache]:
    data = load_toml(path)
    caches = {}
    for name, value in require(data, "cache", dict, path.name).items():
        where = f"{path.name}: cache.{name}"
        entry = as_table(value, where)
        env = tuple(
            CacheEnvEntry(
                name=require(item, "name", str, at),
                value=require(item, "value", str, at),
                reason=require(item, "reason", str, at),
                cuda_only=optional(item, "cuda_only", bool, at, False),
                launcher=optional(item, "launcher", str, at, ""),
            )
            for i, env_entry in enumerate(array(entry, "env", where))
            for at in (f"{where}.env[{i}]",)
            for item in (as_table(env_entry, at),)
        )
        caches[name] = CompilerCache(
            name=name,
            os=tuple(string_list(entry, "os", where)),
            generators=tuple(string_list(entry, "generators", where)),
            install=require(entry, "install", str, where),
            env=env,
        )
    return caches


def _path_limits(path: Path) -> PathLimits:
    paths = require(load_toml(path), "paths", dict, path.name)
    where = f"{path.name}: paths"
    return PathLimits(
        max_path=require(paths, "max_path", int, where),
        deepest_build_suffix=require(paths, "deepest_build_suffix", int, where),
        deepest_cache_suffix=require(paths, "deepest_cache_suffix", int, where),
    )


@functools.cache
def load_knowledge(config_dir: Path | None = None) -> Knowledge:
    """Read the knowledge files (from build_config/ unless another folder is given)."""
    from pytorch_winbuild.knowledge.config_files import config_dir as default_dir

    base = config_dir or default_dir()
    cuda = _cuda_table(base / "cuda.toml")
    gpu = _gpu_table(base / "gpu.toml")
    products, arch_scripts, toolsets = _visual_studio_table(base / "visual_studio.toml")
    eras = _eras(base / "eras.toml", cuda, products)
    return Knowledge(
        cuda=cuda,
        gpu=gpu,
        products=products,
        arch_scripts=arch_scripts,
        toolsets=toolsets,
        eras=eras,
        compiler_caches=_compiler_caches(base / "compiler_caches.toml"),
        path_limits=_path_limits(base / "host_checks.toml"),
        resources=load_resources(base / "resources.toml", tuple(era.name for era in eras)),
        build_requirements=load_build_requirements(
            base / "build_requirements.toml", {era.name: era.python for era in eras}
        ),
        cmake=load_cmake_knowledge(base / "cmake.toml"),
        python_releases=load_python_releases(
            base / "python_releases.toml", [(era.name, era.pytorch, era.python) for era in eras]
        ),
        cuda_install=_cuda_install(base / "cuda.toml"),
    )
