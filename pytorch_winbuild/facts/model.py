"""What is installed on a machine, as plain data that round-trips through JSON.

Probing (probe.py) is the only code that looks at a machine; everything after it reads a `Facts`. A facts file
written by `invoke doctor --json` on one machine (UTF-8 with `--output FILE`; PowerShell's UTF-16 `>` is read too)
gives the same plan on any other, which is how users share a problem and how the tests cover Windows machines on
Linux. The format is documented in build_config/hosts/README.md; it holds only what the plan needs and never a value
that looks like a credential (see redact.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, TypeVar, overload

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.json_file import BadJson, JsonValue, read_json
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.knowledge.msvc import toolset_msc_ver
from pytorch_winbuild.text.redact import redact_text

SCHEMA_VERSION = 4
# Schema 1 files (before GPUs were probed) still load: their `gpus` is None, "not probed".
# Schema 1 and 2 files (before memory was probed) load with the memory fields None, "unknown".
# Schema 1-3 files (before every installed Python was listed) load with `pythons` = (their `python`,).
READABLE_SCHEMAS = (1, 2, 3, 4)
HOST_COMPILER_FAMILIES = ("gcc", "clang")
# Bounds of physical reality for the numbers a facts file gives (build_config/hosts/README.md): beyond
# them a value is a typo or a hostile file, and arithmetic on it (MAX_JOBS from memory) would overflow.
MAX_MIB = 2**40  # 1 EiB of memory, swap or GPU memory: a million times today's largest machines
MAX_CPU_COUNT = 65_536  # logical processors; Windows Server 2022 supports 2,048
MAX_GPU_INDEX = 65_535
_PYTHON_VERSION = re.compile(r"\d{1,2}\.\d{1,3}(\.\d{1,3})?([abc]|rc)?\d{0,3}\+?")


@dataclass(frozen=True)
class VisualStudio:
    """One Visual Studio instance (or Build Tools), as vswhere or VS140COMNTOOLS reports it."""

    product_line: str  # "2015", "2017", "2019", "2022", "2026"
    version: str  # installationVersion, e.g. "15.9.28307.222"; "14.0" for VS 2015
    product: str  # "BuildTools", "Community", "Professional", "Enterprise"
    path: str  # installationPath
    toolsets: tuple[
        str, ...
    ]  # full versions from VC\Tools\MSVC\*, e.g. ("14.11.25503", "14.16.27023"); ("14.0",) for VS 2015
    vcvars: dict[str, str]  # script name → full path, only scripts that exist
    default_toolset: str | None = None  # Microsoft.VCToolsVersion.default.txt
    cl_x64: str | None = None  # VS 2015 only: VC\bin\amd64\cl.exe (CUDAHOSTCXX for CUDA 8)
    display_name: str = ""

    @property
    def label(self) -> str:
        return f"Visual Studio {self.product_line} {self.product} {self.version}"


@dataclass(frozen=True)
class CudaInstall:
    """One CUDA toolkit."""

    version: str  # "9.0", "12.4"
    path: str
    full_version: str | None = None  # "9.0.176" from version.txt / version.json
    env_var: str | None = None  # "CUDA_PATH_V9_0" when the installer set one
    msc_range: tuple[int, int] | None = None  # accepted _MSC_VER as [low, high), read from include/crt/host_config.h
    nvtx: str | None = None  # NvToolsExt folder (CUDA ≤ 11) or the nvtx3 include folder (CUDA ≥ 12)
    cudnn: str | None = None  # cuDNN version (e.g. "7.6.5") when cudnn.h was found
    nvcc: str | None = None  # path of nvcc(.exe)
    cudnn_include: str | None = None  # the folder whose cudnn.h / cudnn_version.h gave `cudnn`
    # Newest GCC / clang major nvcc accepts as host compiler on Linux, read from include/crt/host_config.h
    # (`#if __GNUC__ > 15` → 15; `__clang_major__ >= 21` → 20); None: not read (Windows, or no guard).
    gcc_max: int | None = None
    clang_max: int | None = None


@dataclass(frozen=True)
class PythonInfo:
    """One Python interpreter: the tool's own (`Facts.python`) or one a build could run under (`Facts.pythons`)."""

    version: str  # "3.6.8"
    bits: int  # 64 or 32
    executable: str
    implementation: str = "CPython"
    # How the probe found it: "running" (the tool's own), "PATH", "pyenv", "conda", "py launcher",
    # "registry PythonCore\\3.6" (PEP 514), "fetched" (NuGet, into the cache).
    found_by: str = "running"
    venv: bool | None = None  # can make a venv (`import venv, ensurepip`); None: not asked
    pip: bool | None = None  # has pip (`import pip`); None: not asked

    @property
    def minor(self) -> str:
        """ "3.6" of "3.6.8"."""
        return ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class Tool:
    path: str
    version: str | None = None


@dataclass(frozen=True)
class HostCompiler:
    """A C/C++ compiler nvcc could use for host code on Linux, as the probe found it.

    `found_as` says how a build would reach it: "gcc" or "cc" on PATH (nvcc's and FindCUDA's
    defaults), "CC" or "CUDAHOSTCXX" from the environment, or a versioned name on PATH ("g++-13",
    "clang++-18") that the plan may choose instead."""

    found_as: str
    path: str
    family: str  # "gcc" or "clang"
    version: str  # "12.2.0", from `--version`

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def label(self) -> str:
        return f"{self.family} {self.version} ({self.path})"


@dataclass(frozen=True)
class Gpu:
    """One NVIDIA GPU, as NVML or nvidia-smi reports it."""

    index: int
    name: str  # "NVIDIA H100 80GB HBM3"
    compute_capability: str | None  # "9.0"; None when the driver is too old to say (nvidia-smi without compute_cap)
    memory_mib: int | None = None


@dataclass(frozen=True)
class Facts:
    """Everything the plan needs to know about one machine."""

    os: Platform
    python: PythonInfo  # the interpreter running pytorch-winbuild (>= 3.11); builds run under one of `pythons`
    pythons: tuple[PythonInfo, ...] = ()  # every installed Python the probe found, the running one included
    visual_studio: tuple[VisualStudio, ...] = ()
    cuda: tuple[CudaInstall, ...] = ()
    cuda_path: str | None = None  # the CUDA_PATH variable (the last CUDA installed)
    tools: dict[str, Tool] = field(default_factory=dict)  # cmake, ninja, git, clcache, sccache, ccache, 7z
    long_paths_enabled: bool | None = None  # HKLM\...\FileSystem\LongPathsEnabled; None = unknown
    temp_dir: str | None = None  # %TEMP%: non-ASCII here breaks tools
    cache_dir: str | None = None  # pytorch-winbuild's cache folder there: where a --host plan puts MKL/MAGMA
    # the NvToolsExt folder (lib\x64\nvToolsExt64_1.lib), whatever CUDA: PyTorch 2.0–2.4 link it even with CUDA 12
    nvtoolsext: str | None = None
    cpu_count: int | None = None
    # Physical memory in MiB when the probe ran (psutil.virtual_memory: total, available) and the
    # swap / page-file size (psutil.swap_memory().total); None = unknown (schema 1-2 files).
    memory_total_mib: int | None = None
    memory_available_mib: int | None = None
    swap_total_mib: int | None = None
    gpus: tuple[Gpu, ...] | None = None  # None: not probed (schema 1 or hand-written); (): probed, none found
    driver_version: str | None = None  # NVIDIA display driver, "580.159.04"
    driver_cuda: str | None = None  # newest CUDA the driver runs ("13.0": nvidia-smi's "CUDA Version")
    # Linux: the compilers nvcc could use for host code; None: not probed (Windows, hand-written files)
    host_compilers: tuple[HostCompiler, ...] | None = None
    description: str = ""  # free text: "VS 2017 + CUDA 9.0 workstation"
    schema: int = SCHEMA_VERSION

    def cuda_by_version(self, version: str) -> CudaInstall | None:
        return next((c for c in self.cuda if c.version == version), None)

    def host_compiler(self, found_as: str) -> HostCompiler | None:
        return next((c for c in self.host_compilers or () if c.found_as == found_as), None)

    def to_json(self) -> str:
        data = asdict(self)
        data = {"schema": data.pop("schema"), **data}
        return redact_text(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"


def _shown(value: object) -> str:
    """A value as a message shows it: a number of 400 digits is cut, not printed whole."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:20]}… ({len(text)} characters)"


def _fail(source: str, where: str, problem: str) -> ConfigurationError:
    end = "" if problem.endswith((".", "!", "?")) else "."
    return ConfigurationError(
        f"facts file {source}: {where}: {problem}{end}",
        fix="regenerate it with `invoke doctor --json --output facts.json` on the machine it describes, or correct "
        "it by hand following build_config/hosts/README.md.",
    )


T = TypeVar("T")


# A facts document is JSON: an object read is a dict[str, object], an array a list[object], what they hold narrowed
# in turn by these readers.
@overload
def _get(
    data: Mapping[str, object],
    key: str,
    kind: type[dict[str, object]],
    source: str,
    where: str,
    required: Literal[True] = True,
) -> dict[str, object]: ...
@overload
def _get(
    data: Mapping[str, object], key: str, kind: type[dict[str, object]], source: str, where: str, required: bool
) -> dict[str, object] | None: ...
@overload
def _get(
    data: Mapping[str, object], key: str, kind: type[list[object]], source: str, where: str, required: bool
) -> list[object] | None: ...
@overload
def _get(
    data: Mapping[str, object], key: str, kind: type[T], source: str, where: str, required: Literal[True] = True
) -> T: ...
@overload
def _get(data: Mapping[str, object], key: str, kind: type[T], source: str, where: str, required: bool) -> T | None: ...


def _get(
    data: Mapping[str, object], key: str, kind: type | tuple[type, ...], source: str, where: str, required: bool = True
) -> object:
    if key not in data or data[key] is None:
        if required:
            raise _fail(source, f"{where}.{key}" if where else key, "missing")
        return None
    value = data[key]
    if (isinstance(value, bool) and kind is int) or not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _fail(source, f"{where}.{key}" if where else key, f"expected {expected}, got {value!r}")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _fail(
                source,
                f"{where}.{key}" if where else key,
                f"{value!r} holds a lone surrogate (a broken \\ud8xx escape), which no file or console can show",
            ) from None
    return value


@overload
def _path(data: Mapping[str, object], key: str, source: str, where: str, required: Literal[True] = True) -> str: ...
@overload
def _path(data: Mapping[str, object], key: str, source: str, where: str, required: bool) -> str | None: ...


def _path(data: Mapping[str, object], key: str, source: str, where: str, required: bool = True) -> str | None:
    """A path: text that is not empty (an empty path would mean "the current folder" to every tool)."""
    value = _get(data, key, str, source, where, required)
    if value is not None and not value.strip():
        raise _fail(
            source,
            f"{where}.{key}" if where else key,
            "empty path; give the full path" + ("" if required else ", or null when there is none"),
        )
    return value


def _str_list(data: Mapping[str, object], key: str, source: str, where: str) -> tuple[str, ...]:
    values = _get(data, key, list, source, where, required=False) or []
    strings = tuple(v for v in values if isinstance(v, str))
    if len(strings) != len(values):
        raise _fail(source, f"{where}.{key}", f"expected a list of strings, got {values!r}")
    return strings


def _str_dict(data: Mapping[str, object], key: str, source: str, where: str) -> dict[str, str]:
    values = _get(data, key, dict, source, where, required=False) or {}
    strings = {k: v for k, v in values.items() if isinstance(k, str) and isinstance(v, str)}
    if len(strings) != len(values):
        raise _fail(source, f"{where}.{key}", f"expected an object of strings, got {values!r}")
    for name, value in strings.items():  # a lone surrogate in a name or a value is refused like any string's
        _get({"name": name}, "name", str, source, f"{where}.{key}")
        _get({name: value}, name, str, source, f"{where}.{key}")
    return strings


def _path_dict(data: Mapping[str, object], key: str, source: str, where: str) -> dict[str, str]:
    values = _str_dict(data, key, source, where)
    for name, value in values.items():
        if not value.strip():
            raise _fail(
                source, f"{where}.{key}.{name}", "empty path; give the script's full path, or leave the entry out"
            )
    return values


def _visual_studio(data: object, source: str, where: str, product_lines: tuple[str, ...] | None) -> VisualStudio:
    if not isinstance(data, dict):
        raise _fail(source, where, f"expected an object, got {data!r}")
    line = _get(data, "product_line", str, source, where)
    if product_lines is not None and line not in product_lines:
        raise ConfigurationError(
            f"facts file {source}: {where}.product_line: Visual Studio {line!r} is not a product line "
            f"pytorch-winbuild knows ({', '.join(product_lines)}; build_config/visual_studio.toml), so no "
            "plan can use that instance.",
            fix="remove that entry from the facts file (no PyTorch era builds with an older Visual Studio), or "
            "update pytorch-winbuild if it is a newer one.",
        )
    toolsets = _str_list(data, "toolsets", source, where)
    for toolset in toolsets:
        try:
            toolset_msc_ver(toolset)
        except ConfigurationError:
            raise _fail(source, f"{where}.toolsets", f"'{toolset}' is not an MSVC toolset version (14.x)") from None
    return VisualStudio(
        product_line=line,
        version=_get(data, "version", str, source, where),
        product=_get(data, "product", str, source, where),
        path=_path(data, "path", source, where),
        toolsets=toolsets,
        vcvars=_path_dict(data, "vcvars", source, where),
        default_toolset=_get(data, "default_toolset", str, source, where, required=False),
        cl_x64=_path(data, "cl_x64", source, where, required=False),
        display_name=_get(data, "display_name", str, source, where, required=False) or "",
    )


def _cuda(data: object, source: str, where: str) -> CudaInstall:
    if not isinstance(data, dict):
        raise _fail(source, where, f"expected an object, got {data!r}")
    version = _get(data, "version", str, source, where)
    parts = version.split(".")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):
        raise _fail(source, f"{where}.version", f"expected MAJOR.MINOR such as '9.0', got {version!r}")
    msc_list = _get(data, "msc_range", list, source, where, required=False)
    msc_range = None
    match msc_list:
        case None:
            pass
        case [int() as low, int() as high] if not isinstance(low, bool) and not isinstance(high, bool) and low < high:
            msc_range = (low, high)
        case _:
            raise _fail(source, f"{where}.msc_range", f"expected [low, high) as two integers, got {msc_list!r}")
    return CudaInstall(
        version=version,
        path=_path(data, "path", source, where),
        full_version=_get(data, "full_version", str, source, where, required=False),
        env_var=_get(data, "env_var", str, source, where, required=False),
        msc_range=msc_range,
        nvtx=_path(data, "nvtx", source, where, required=False),
        cudnn=_get(data, "cudnn", str, source, where, required=False),
        nvcc=_path(data, "nvcc", source, where, required=False),
        cudnn_include=_path(data, "cudnn_include", source, where, required=False),
        gcc_max=_major(data, "gcc_max", source, where),
        clang_max=_major(data, "clang_max", source, where),
    )


def _python(data: object, source: str, where: str) -> PythonInfo:
    if not isinstance(data, dict):
        raise _fail(source, where, "expected an object with 'version', 'bits' and 'executable'")
    bits = _get(data, "bits", int, source, where)
    if bits not in (32, 64):
        raise _fail(source, f"{where}.bits", f"expected 32 or 64, got {bits!r}")
    version = _get(data, "version", str, source, where)
    if not _PYTHON_VERSION.fullmatch(version):
        raise _fail(source, f"{where}.version", f"expected a Python version such as '3.6.8', got {version!r}")
    return PythonInfo(
        version=version,
        bits=bits,
        executable=_path(data, "executable", source, where),
        implementation=_get(data, "implementation", str, source, where, required=False) or "CPython",
        found_by=_get(data, "found_by", str, source, where, required=False) or "running",
        venv=_get(data, "venv", bool, source, where, required=False),
        pip=_get(data, "pip", bool, source, where, required=False),
    )


def _major(data: Mapping[str, object], key: str, source: str, where: str) -> int | None:
    value = _get(data, key, int, source, where, required=False)
    if value is not None and (isinstance(value, bool) or not 1 <= value <= 999):
        raise _fail(source, f"{where}.{key}", f"expected a compiler major version such as 13, got {value!r}")
    return value


def _host_compiler(data: object, source: str, where: str) -> HostCompiler:
    if not isinstance(data, dict):
        raise _fail(source, where, f"expected an object, got {data!r}")
    family = _get(data, "family", str, source, where)
    if family not in HOST_COMPILER_FAMILIES:
        raise _fail(source, f"{where}.family", f"expected one of {', '.join(HOST_COMPILER_FAMILIES)}, got {family!r}")
    version = _get(data, "version", str, source, where)
    if not re.fullmatch(r"\d{1,3}(?:\.\d+){0,3}", version):
        raise _fail(source, f"{where}.version", f"expected a version such as '12.2.0', got {version!r}")
    return HostCompiler(
        found_as=_get(data, "found_as", str, source, where),
        path=_path(data, "path", source, where),
        family=family,
        version=version,
    )


def _major_minor(data: Mapping[str, object], key: str, source: str, where: str) -> str | None:
    value = _get(data, key, str, source, where, required=False)
    if value is not None and not re.fullmatch(r"\d{1,2}\.\d{1,2}", value):
        raise _fail(source, f"{where}.{key}" if where else key, f"expected MAJOR.MINOR such as '9.0', got {value!r}")
    return value


def _driver_version(data: Mapping[str, object], source: str) -> str | None:
    value = _get(data, "driver_version", str, source, "", required=False)
    if value is not None and not re.fullmatch(r"\d{2,4}(?:\.\d{1,3}){1,2}", value):
        raise _fail(
            source,
            "driver_version",
            f"expected an NVIDIA driver version such as '580.159.04' or '531.14', got {value!r}",
        )
    return value


def _gpu(data: object, source: str, where: str) -> Gpu:
    if not isinstance(data, dict):
        raise _fail(source, where, f"expected an object, got {data!r}")
    index = _get(data, "index", int, source, where)
    memory = _get(data, "memory_mib", int, source, where, required=False)
    if not 0 <= index <= MAX_GPU_INDEX:
        raise _fail(source, f"{where}.index", f"expected a GPU number from 0 to {MAX_GPU_INDEX}, got {_shown(index)}")
    if memory is not None and not 0 <= memory <= MAX_MIB:
        raise _fail(
            source, f"{where}.memory_mib", f"expected a number of MiB from 0 to {MAX_MIB}, got {_shown(memory)}"
        )
    return Gpu(
        index=index,
        name=_get(data, "name", str, source, where),
        compute_capability=_major_minor(data, "compute_capability", source, where),
        memory_mib=memory,
    )


def _mib(data: Mapping[str, object], key: str, source: str) -> int | None:
    value = _get(data, key, int, source, "", required=False)
    if value is not None and (isinstance(value, bool) or not 0 <= value <= MAX_MIB):
        raise _fail(source, key, f"expected a number of MiB from 0 to {MAX_MIB}, got {_shown(value)}")
    return value


def _cpu_count(data: Mapping[str, object], source: str) -> int | None:
    """Logical processors: a machine has at least one (the job count is derived from it)."""
    value = _get(data, "cpu_count", int, source, "", required=False)
    if value is not None and not 1 <= value <= MAX_CPU_COUNT:
        raise _fail(
            source,
            "cpu_count",
            f"expected a number of logical processors from 1 to {MAX_CPU_COUNT}, got {_shown(value)}",
        )
    return value


def facts_from_dict(data: object, source: str = "<facts>", product_lines: Iterable[str] | None = None) -> Facts:
    """Validate a parsed facts document; every problem names the key path.

    `product_lines`: the Visual Studio product lines the knowledge files describe; an instance of
    another line is refused (None: not checked)."""
    known_lines = tuple(product_lines) if product_lines is not None else None
    if not isinstance(data, dict):
        raise _fail(source, "top level", "expected a JSON object")
    schema = _get(data, "schema", int, source, "")
    if schema not in READABLE_SCHEMAS:
        raise _fail(
            source,
            "schema",
            f"version {schema} is not supported (this pytorch-winbuild reads versions "
            f"{', '.join(map(str, READABLE_SCHEMAS))})",
        )
    os_name = _get(data, "os", str, source, "")
    if os_name not in set(Platform):
        raise _fail(source, "os", f"expected 'windows' or 'linux', got {os_name!r}")
    python = _get(data, "python", dict, source, "")
    tools_data = _get(data, "tools", dict, source, "", required=False) or {}
    tools: dict[str, Tool] = {}
    for name, tool in tools_data.items():
        if not isinstance(tool, dict):
            raise _fail(source, f"tools.{name}", "expected an object with 'path' and 'version'")
        tools[name] = Tool(
            path=_path(tool, "path", source, f"tools.{name}"),
            version=_get(tool, "version", str, source, f"tools.{name}", required=False),
        )
    gpu_list = _get(data, "gpus", list, source, "", required=False)
    vs_list = _get(data, "visual_studio", list, source, "", required=False) or []
    cuda_list = _get(data, "cuda", list, source, "", required=False) or []
    compiler_list = _get(data, "host_compilers", list, source, "", required=False)
    running = _python(python, source, "python")
    python_list = _get(data, "pythons", list, source, "", required=False)
    return Facts(
        schema=schema,
        os=Platform(os_name),
        python=running,
        pythons=(running,)
        if python_list is None
        else tuple(_python(item, source, f"pythons[{i}]") for i, item in enumerate(python_list)),
        visual_studio=tuple(
            _visual_studio(item, source, f"visual_studio[{i}]", known_lines) for i, item in enumerate(vs_list)
        ),
        cuda=tuple(_cuda(item, source, f"cuda[{i}]") for i, item in enumerate(cuda_list)),
        cuda_path=_path(data, "cuda_path", source, "", required=False),
        tools=tools,
        long_paths_enabled=_get(data, "long_paths_enabled", bool, source, "", required=False),
        temp_dir=_path(data, "temp_dir", source, "", required=False),
        cache_dir=_path(data, "cache_dir", source, "", required=False),
        nvtoolsext=_path(data, "nvtoolsext", source, "", required=False),
        cpu_count=_cpu_count(data, source),
        memory_total_mib=_mib(data, "memory_total_mib", source),
        memory_available_mib=_mib(data, "memory_available_mib", source),
        swap_total_mib=_mib(data, "swap_total_mib", source),
        gpus=None if gpu_list is None else tuple(_gpu(item, source, f"gpus[{i}]") for i, item in enumerate(gpu_list)),
        driver_version=_driver_version(data, source),
        driver_cuda=_major_minor(data, "driver_cuda", source, ""),
        host_compilers=None
        if compiler_list is None
        else tuple(_host_compiler(item, source, f"host_compilers[{i}]") for i, item in enumerate(compiler_list)),
        description=_get(data, "description", str, source, "", required=False) or "",
    )


def load_facts(path: str | Path, product_lines: Iterable[str] | None = None) -> Facts:
    """Read a facts file (`--host FILE`). Its Visual Studio product lines are checked against
    `product_lines`, by default the knowledge files' (build_config/visual_studio.toml)."""
    path = Path(path)
    try:
        data: JsonValue = read_json(path)
    except FileNotFoundError:
        raise ConfigurationError(
            f"facts file {path} does not exist.",
            fix="pass the path of a file written by `invoke doctor --json --output FILE`, or one of "
            "build_config/hosts/*.json.",
        ) from None
    except IsADirectoryError:
        raise ConfigurationError(
            f"facts file {path} is a folder.",
            fix="pass the path of a file written by `invoke doctor --json --output FILE`, or one of "
            "build_config/hosts/*.json.",
        ) from None
    except OSError as exc:
        raise ConfigurationError(
            f"facts file {path} cannot be read ({exc}).",
            fix="make it readable, or write it again with `invoke doctor --json --output FILE`.",
        ) from None
    except BadJson as exc:
        where = "top level" if exc.line is None else f"line {exc.line} column {exc.column}"
        raise _fail(str(path), where, exc.reason) from None
    if product_lines is None:
        product_lines = load_knowledge().products
    return facts_from_dict(data, str(path), product_lines)
