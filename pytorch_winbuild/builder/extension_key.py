"""Whether `build-ext` can skip an unchanged extension (issue 39, point 1): a key over everything its output depends
on, compared with the key of the last successful build, whose built libraries must still be the ones it wrote.

Running setup.py only to find nothing to do costs the import of torch (seconds), so the key is made without
importing torch and without running the extension's Python beyond the one query that already finds its torch
(faces/extension_python.py). Its parts, each a digest, so that a rebuild can say what changed:

- sources: every file under the extension's folder (content), except what builds write there: build/, dist/,
  .eggs/, *.egg-info/, __pycache__/, hidden folders (.git), virtual environments, and the libraries the last build
  recorded (an --inplace build copies them beside the sources). Reading setup.py for the files it lists would miss
  a header it includes or a module it imports; every file of the folder misses nothing inside it.
- setup.py: its content. Read (not run) for what lies outside the folder: a `..`, os.pardir, an absolute path, a
  parent of a parent, or an environment variable named by no literal makes the build uncertain, and an uncertain
  build is never skipped; the variables it names by literal join the environment part.
- environment: the plan's variables, less those that change only how fast (MAX_JOBS, compiler-cache settings and
  launchers), and the variables setuptools, its compilers and torch.utils.cpp_extension read from the caller's
  environment (READ_VARIABLES).
- flags: --mode and the command it runs; only --mode inplace is skipped: develop and install also write outside the
  folder (site-packages), which this key cannot see.
- compiler: the plan's MSVC toolset (Windows) or the C++ compiler setuptools runs (CXX, else c++ on PATH), by its
  resolved path, size and modification time, and nvcc's host compiler; an upgrade replaces the file.
- CUDA: the plan's release and folder.
- torch: its version and folder, and the path, size and modification time of every file under its include/ (the
  headers every extension compiles against: about 9,400 for 2.13, 0.03 s to list on Linux) and in its lib/: a
  reinstall, a rebuilt develop install or an edited header changes one of them, even at the same version.
- Python: the interpreter and its version (the extension's ABI).

The record is <folder>/build/pytorch-winbuild-build-ext.json: it describes that build folder, so --clean, which
removes build/, also removes the record, and a copied or moved folder carries its own. It is written atomically,
only after a successful build, with the sha256 of each built library.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild import atomic_file
from pytorch_winbuild.builder.built_arches import built_libraries
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.json_file import read_json
from pytorch_winbuild.planning.plan_model import Plan

RECORD = Path("build") / "pytorch-winbuild-build-ext.json"
SKIPPED_MODES = ("inplace",)  # the modes whose whole output lies in the extension's folder
MAX_SOURCES = 5000  # a folder with more files is not an extension's alone (a checkout, a home folder): no skip
_SCHEMA = 1

# What builds write into the extension's folder: never sources.
_OUTPUT_FOLDERS = ("build", "dist", ".eggs", "__pycache__")
_OUTPUT_SUFFIXES = (".egg-info",)
# Plan variables that change how fast the build runs, not what it builds.
_SPEED_ONLY = re.compile(r"MAX_JOBS|CMAKE_\w*COMPILER_LAUNCHER|CMAKE_GENERATOR|(CCACHE|SCCACHE|CLCACHE)_\w*")
# The caller's variables that setuptools (distutils' sysconfig customize_compiler, msvc), and
# torch.utils.cpp_extension (CUDA_HOME, TORCH_CUDA_ARCH_LIST, the NVCC_* flags, ...) read while building.
READ_VARIABLES = (
    *("CC", "CXX", "CPP", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "LDSHARED", "AR", "ARFLAGS", "ARCHFLAGS"),
    *("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "INCLUDE", "LIB", "LIBPATH"),
    *("CUDA_HOME", "CUDA_PATH", "CUDNN_HOME", "CUDNN_PATH", "ROCM_HOME", "ROCM_PATH", "HIP_PATH"),
    *("TORCH_CUDA_ARCH_LIST", "TORCH_DONT_CHECK_COMPILER_ABI", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"),
    *("NVCC_CCBIN", "CUDAHOSTCXX", "PYTORCH_NVCC", "TORCH_EXTENSIONS_DIR", "DEBUG", "USE_NINJA"),
    *("DISTUTILS_USE_SDK", "MSSdk", "SETUPTOOLS_USE_DISTUTILS", "PYTHONPATH", "MACOSX_DEPLOYMENT_TARGET"),
)
# An absolute path, alone or in a flag (-I/usr/include, C:\\libs, \\\\server\\share); not MSVC's /O2 or /std:c++17.
_ABSOLUTE = re.compile(r"(?:^|-I|-L|-isystem|=)(?:/[^/\s]+/|[A-Za-z]:[\\/]|\\\\)")


@dataclass(frozen=True)
class ExtensionKey:
    """The key of one build-ext: its parts by name (digests), and what they cover, in words, for the output.
    `uncertain`: why this build cannot be skipped whatever the record says (None: it can)."""

    parts: dict[str, str]
    compared: str
    uncertain: str | None = None

    @property
    def digest(self) -> str:
        return _sha256("\n".join(f"{name}={value}" for name, value in sorted(self.parts.items())))


@dataclass(frozen=True)
class Verdict:
    """Whether the last successful build is still this one's output; `why`: the sentence build-ext prints."""

    up_to_date: bool
    why: str


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _file_digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _stat_line(path: Path) -> str:
    """A file by name, size and modification time: what a reinstall, an upgrade or an edit changes."""
    try:
        found = path.stat()
    except OSError:
        return f"{path} missing"
    return f"{path} {found.st_size} {found.st_mtime_ns}"


def _walk(folder: Path, skip: frozenset[str]) -> Iterator[Path]:
    """The files under `folder`, sorted, without the paths in `skip`, build outputs, hidden folders and virtual
    environments."""
    with os.scandir(folder) as entries:
        listed = sorted(entries, key=lambda entry: entry.name)
    for entry in listed:
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            name = entry.name
            outputs = name.startswith(".") or name in _OUTPUT_FOLDERS or name.endswith(_OUTPUT_SUFFIXES)
            if outputs or (path / "pyvenv.cfg").exists():
                continue
            yield from _walk(path, skip)
        elif entry.path not in skip:
            yield path


def _sources(folder: Path, libraries: frozenset[str]) -> tuple[str, int, str | None]:
    """The digest of the folder's sources (setup.py apart), their number, and why they are uncertain (a link
    leading out of the folder, a file that cannot be read, too many files), or None."""
    lines, count, root = [], 0, folder.resolve()
    for path in _walk(folder, libraries):
        relative = path.relative_to(folder).as_posix()
        if relative == "setup.py":
            continue
        count += 1
        if count > MAX_SOURCES:
            return "", count, f"{folder} holds more than {MAX_SOURCES} files, more than an extension's sources"
        if path.is_symlink() and root not in path.resolve().parents:
            return "", count, f"{relative} is a link to {path.resolve()}, outside the extension's folder"
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                return "", count, f"{relative} is not a regular file"
            lines.append(f"{relative} {_file_digest(path)}")
        except OSError as error:
            return "", count, f"{relative} cannot be read ({error.strerror or error})"
    return _sha256("\n".join(lines)), count, None


class _SetupReader(ast.NodeVisitor):
    """What setup.py says, read and not run: the environment variables it names, and the first thing that reaches
    outside the extension's folder or names a variable by no literal."""

    def __init__(self) -> None:
        self.variables: set[str] = set()
        self.outside: str | None = None

    def _flag(self, why: str) -> None:
        self.outside = self.outside or why

    def visit_Constant(self, node: ast.Constant) -> None:
        text = node.value
        if isinstance(text, str) and (text == ".." or "../" in text or "..\\" in text or text.startswith("../")):
            self._flag(f"setup.py names {text!r}, outside the extension's folder")
        elif isinstance(text, str) and "\n" not in text and _ABSOLUTE.search(text):
            self._flag(f"setup.py names the absolute path {text!r}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "pardir":
            self._flag("setup.py uses os.pardir, outside the extension's folder")
        if node.attr == "parent" and isinstance(node.value, ast.Attribute) and node.value.attr in ("parent", "parents"):
            self._flag("setup.py takes a parent of a parent folder")
        if node.attr == "parents":
            self._flag("setup.py takes a folder's parents")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if _is_environ(node.value):
            self._name(node.slice)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        reads = isinstance(function, ast.Attribute) and (
            (function.attr in ("get", "pop", "setdefault") and _is_environ(function.value)) or function.attr == "getenv"
        )
        if reads:
            self._name(node.args[0] if node.args else None)
        elif isinstance(function, ast.Attribute) and function.attr == "dirname" and node.args:
            inner = node.args[0]
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "dirname":
                self._flag("setup.py takes the dirname of a dirname, a parent folder")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "environ":  # `from os import environ`: any use of it
            self._flag("setup.py reads os.environ as a whole")

    def _name(self, node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.variables.add(node.value)
        else:
            self._flag("setup.py reads an environment variable whose name is no literal")


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def read_setup(text: str) -> tuple[frozenset[str], str | None]:
    """The environment variables setup.py names by literal, and why it is uncertain (or None)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as error:
        return frozenset(), f"setup.py cannot be read as Python ({error})"
    reader = _SetupReader()
    reader.visit(tree)
    for node in ast.walk(tree):  # os.environ passed along whole (os.environ.copy(), dict(os.environ), **os.environ)
        if _is_environ(node) and not _read_by_name(tree, node):
            reader._flag("setup.py reads os.environ as a whole")
    return frozenset(reader.variables), reader.outside


def _read_by_name(tree: ast.AST, environ: ast.AST) -> bool:
    """Whether this os.environ is read one variable at a time: os.environ[NAME] or os.environ.get(NAME)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and node.value is environ:
            return True
        if isinstance(node, ast.Attribute) and node.value is environ and node.attr in ("get", "pop", "setdefault"):
            return True
    return False


def _environment(plan: Plan, environ: Mapping[str, str], named: frozenset[str]) -> tuple[str, int]:
    """The digest of the variables the build reads, and their number: the plan's (less the speed-only ones), then
    the caller's that the build tools read and those setup.py names."""
    planned = {name: value for name, value in plan.final_env().items() if not _SPEED_ONLY.fullmatch(name)}
    read = {f"environ:{name}": environ[name] for name in sorted({*READ_VARIABLES, *named}) if name in environ}
    values = {**{f"plan:{name}": value for name, value in planned.items()}, **read}
    return _sha256("\n".join(f"{name}={value}" for name, value in sorted(values.items()))), len(values)


def _compiler(plan: Plan, environ: Mapping[str, str]) -> tuple[str, str]:
    """What compiles, as a key line and in words: MSVC's toolset from the plan on Windows; elsewhere the C++
    compiler setuptools runs (the plan's CXX, else the caller's, else c++ on PATH) by its file; and nvcc's host."""
    if plan.os == Platform.WINDOWS and plan.compiler is not None:
        line = shown = f"MSVC {plan.compiler.toolset} ({plan.compiler.instance.path})"
    else:
        name = plan.final_env().get("CXX") or environ.get("CXX") or ("cl" if plan.os == Platform.WINDOWS else "c++")
        found = shutil.which(name, path=environ.get("PATH"))
        real = Path(found).resolve() if found else None
        line, shown = (_stat_line(real), str(real)) if real else (f"{name} not found", f"{name} (not found)")
    if plan.nvcc_host is not None:
        line += f"; nvcc host {plan.nvcc_host.compiler}"
    return line, shown


# POSIX: each file stat'ed relative to its open folder (fstatat: no walk of the full path per file).
_AT_FOLDER = os.stat in os.supports_dir_fd and os.listdir in os.supports_fd
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)


def _tree_lines(folder: str, lines: list[str]) -> int:
    """Every file under `folder` by path, size and modification time, into `lines`, in order; their number. Plain
    strings: torch's 9,400 headers are listed in 0.03 s on Linux stat'ed from their open folder (0.05 s with
    scandir's stat, three times that in Path objects); on Windows scandir's entries carry their stat already."""
    if _AT_FOLDER:
        descriptor = os.open(folder, _FOLDER_FLAGS)
        try:
            return _lines_at(folder, descriptor, lines)
        finally:
            os.close(descriptor)
    count = 0
    with os.scandir(folder) as entries:
        listed = sorted(entries, key=lambda entry: entry.name)
    for entry in listed:
        if entry.is_dir(follow_symlinks=False):
            count += _tree_lines(entry.path, lines)
            continue
        try:
            found = entry.stat()
        except OSError:
            lines.append(f"{entry.path} missing")
        else:
            lines.append(f"{entry.path} {found.st_size} {found.st_mtime_ns}")
        count += 1
    return count


def _lines_at(folder: str, descriptor: int, lines: list[str]) -> int:
    """_tree_lines for the open folder `descriptor` (named `folder`), the same lines as scandir's: a link by what
    it leads to, a folder that cannot be read as missing."""
    count = 0
    for name in sorted(os.listdir(descriptor)):
        path = f"{folder}{os.sep}{name}"  # os.path.join costs more than the stat
        try:
            found = os.stat(name, dir_fd=descriptor, follow_symlinks=False)
            if stat.S_ISDIR(found.st_mode):
                inner = os.open(name, _FOLDER_FLAGS, dir_fd=descriptor)
                try:
                    count += _lines_at(path, inner, lines)
                finally:
                    os.close(inner)
                continue
            if stat.S_ISLNK(found.st_mode):
                found = os.stat(name, dir_fd=descriptor)
        except OSError:
            lines.append(f"{path} missing")
        else:
            lines.append(f"{path} {found.st_size} {found.st_mtime_ns}")
        count += 1
    return count


def _torch(plan: Plan, torch_folder: str) -> tuple[str, int]:
    """torch's version and folder, and every file of its include/ and lib/ by name, size and modification time;
    the number of headers."""
    lines = [f"torch {plan.pytorch_version} {torch_folder}"]
    include, lib = os.path.join(torch_folder, "include"), os.path.join(torch_folder, "lib")
    headers = _tree_lines(include, lines) if os.path.isdir(include) else 0
    if os.path.isdir(lib):
        _tree_lines(lib, lines)
    return _sha256("\n".join(lines)), headers


def extension_key(
    plan: Plan, folder: Path, mode: str, command: tuple[str, ...], torch_folder: str | None, environ: Mapping[str, str]
) -> ExtensionKey:
    """The key of building `folder` with this plan, --mode and command against the torch in `torch_folder`
    (None: not found, so no skip); `environ`: the caller's environment, which the build inherits."""
    setup = (folder / "setup.py").read_text(encoding="utf-8", errors="surrogateescape")
    named, outside = read_setup(setup)
    sources, count, unreadable = _sources(folder, _recorded_libraries(folder))
    environment, variables = _environment(plan, environ, named)
    compiler, compiler_shown = _compiler(plan, environ)
    cuda = f"CUDA {plan.cuda.version} at {plan.cuda.path}" if plan.cuda else "no CUDA"
    headers_digest, headers = _torch(plan, torch_folder) if torch_folder else ("", 0)
    parts = {
        "sources": sources,
        "setup.py": _sha256(setup),
        "environment": environment,
        "flags": _sha256(f"{mode} {' '.join(command)}"),
        "compiler": _sha256(compiler),
        "CUDA": _sha256(cuda),
        "torch": headers_digest,
        "Python": _sha256(f"{plan.build_python.executable} {plan.build_python.version}"),
    }
    torch_shown = f"torch {plan.pytorch_version} at {torch_folder} ({headers} headers)"
    compared = (
        f"{count} source{'s' * (count != 1)}, setup.py, the environment ({variables} variables), --mode {mode}, "
        f"compiler {compiler_shown}, {cuda}, {torch_shown}, Python {plan.build_python.version}"
    )
    uncertain = (
        (f"--mode {mode} also writes outside the folder" if mode not in SKIPPED_MODES else None)
        or outside
        or unreadable
        or (None if torch_folder else f"the folder of torch {plan.pytorch_version} is not known")
    )
    return ExtensionKey(parts, compared, uncertain)


def _read_record(folder: Path) -> dict[str, object] | None:
    try:
        data = read_json(folder / RECORD)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == _SCHEMA else None


def _recorded_libraries(folder: Path) -> frozenset[str]:
    """The libraries the last successful build wrote (as paths under `folder`): outputs, not sources."""
    record = _read_record(folder)
    libraries = record.get("libraries") if record else None
    return frozenset(str(folder / name) for name in libraries) if isinstance(libraries, dict) else frozenset()


def verdict(folder: Path, key: ExtensionKey, *, force: bool = False, clean: bool = False) -> Verdict:
    """Up to date when the key matches the last successful build's and its libraries are unchanged; else why not."""
    asked = "--force" if force else "--clean" if clean else None
    if asked:
        return Verdict(False, f"{asked}: building whatever the last build was")
    if key.uncertain:
        return Verdict(False, f"building: {key.uncertain}, so an unchanged build cannot be told")
    record = _read_record(folder)
    if record is None:
        return Verdict(False, f"building: no record of a successful build here ({folder / RECORD})")
    parts = record.get("parts")
    changed = [name for name, value in key.parts.items() if not isinstance(parts, dict) or parts.get(name) != value]
    if changed:
        return Verdict(False, f"building: {', '.join(changed)} changed since the last successful build")
    libraries = record.get("libraries")
    if not isinstance(libraries, dict) or not libraries:
        return Verdict(False, "building: the last build recorded no built library")
    for name, digest in sorted(libraries.items()):
        path = folder / name
        try:
            same = path.is_file() and _file_digest(path) == digest
        except OSError:
            same = False
        if not same:
            return Verdict(False, f"building: the built library {name} is missing or changed since that build")
    return Verdict(
        True,
        f"up to date: {key.compared} and {len(libraries)} built librar{'y' if len(libraries) == 1 else 'ies'} are "
        "those of the last successful build; setup.py not run (--force rebuilds)",
    )


def remember_build(folder: Path, key: ExtensionKey) -> None:
    """After a successful build: the key it was built with and the sha256 of each library it wrote, atomically."""
    libraries = {path.relative_to(folder).as_posix(): _file_digest(path) for path in built_libraries(folder)}
    record = {"schema": _SCHEMA, "key": key.digest, "parts": key.parts, "libraries": libraries}
    (folder / RECORD).parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_json(folder / RECORD, record)
