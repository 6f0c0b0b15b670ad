"""The edge where a plan's inputs are read: flags, invoke.yaml and INVOKE_WINBUILD_* become one typed
Options (planning/options.py parses each value once), the facts are probed or read once, and the
plan is made once.

Every task that plans (build, env, build-ext, doctor's check) comes through plan_from_flags; below
it nothing reads a flag or a setting again. Precedence, as scikit-build-core's source chain: a flag
given on the command line > the `winbuild` configuration (invoke.yaml, -f FILE, INVOKE_WINBUILD_*) >
the defaults; a matrix entry of the nightly is the other edge (nightly/matrix.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from invoke import Context

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces.flags import CacheChoice, example, flag_label, path_flag, setting, whole_number
from pytorch_winbuild.paths import peaks_file

# The flags every planning task has, by their Options name; tasks hand them here in a dict.
PLAN_FLAGS = (
    "cuda",
    "vs",
    "toolset",
    "generator",
    "compiler_cache",
    "arch_list",
    "jobs",
    "pytorch_version",
    "cache_dir",
    "mkl_version",
    "magma_version",
    "magma_debug",
    "no_magma",
    "python",
    "cmake",
)
# Those read as text by planning/options.py's parser (the others are paths, switches or numbers).
TEXT_FLAGS = ("cuda", "vs", "toolset", "generator", "compiler_cache", "arch_list", "pytorch_version", "cmake")


def facts_for(host: str | None, *, gpus: bool = True):
    """The --host file's facts, or this machine's (`gpus` False: a CPU-only plan does not ask the driver)."""
    from pytorch_winbuild.facts.model import load_facts
    from pytorch_winbuild.facts.probe import probe

    return load_facts(host) if host else probe(gpus=gpus)


def this_os() -> str:
    return "windows" if os.name == "nt" else "linux"


def plan_cache_dir(cache: CacheChoice, facts: Any) -> tuple[PurePath, str | None]:
    """The cache folder of the machine the plan is for, and a note when it was inferred.

    On this machine: --cache-dir, the configuration, or the default. For a --host plan of another
    OS the folder must be that machine's: a --cache-dir in its form, else the facts file's
    `cache_dir`, else the per-user default next to its TEMP (%LOCALAPPDATA%\\pytorch-winbuild)."""
    given = cache.given
    if facts.os == this_os():
        return cache.folder, None
    path_type: type[PurePath] = PureWindowsPath if facts.os == "windows" else PurePosixPath
    sample = (
        "C:\\Users\\you\\AppData\\Local\\pytorch-winbuild"
        if facts.os == "windows"
        else "/home/you/.cache/pytorch-winbuild"
    )
    if given:
        folder = path_type(given)
        if not folder.is_absolute() or (facts.os == "windows" and "/" in str(given)):
            label = cache.label
            raise ConfigurationError(
                f"{label} {given!r} is not an absolute {facts.os} path, and this plan is for a {facts.os} machine.",
                fix=f"pass that machine's folder, e.g. {example(label, sample)}, or leave it out for the "
                "facts file's own.",
            )
        return folder, None
    if facts.cache_dir:
        return path_type(facts.cache_dir), None
    temp = path_type(facts.temp_dir) if facts.temp_dir else None
    if (
        facts.os == "windows"
        and temp is not None
        and [p.lower() for p in temp.parts[-3:]] == ["appdata", "local", "temp"]
    ):
        folder = temp.parent / "pytorch-winbuild"
        return (
            folder,
            (
                f"Cache folder {folder}: the facts file names none, so the plan takes the per-user default beside its "
                "TEMP (pass --cache-dir to change it)."
            ),
        )
    raise ConfigurationError(
        f"the facts file does not say where pytorch-winbuild keeps its cache on that {facts.os} machine.",
        fix=f"pass --cache-dir with that machine's folder, e.g. --cache-dir {sample}.",
    )


def ref_release(ref: str | None) -> tuple[str, str] | None:
    """A --ref that names a release tag pins that release (before the clone shows its version.txt)."""
    from pytorch_winbuild.knowledge.versions import RELEASE_TAG

    found = RELEASE_TAG.fullmatch(ref or "")
    return (found.group(1), f"--ref {ref}, a release tag") if found else None


def describe_source(
    source_dir: Path | None,
    version: tuple[str, str] | None,
    is_pytorch: bool,
    not_cloned: tuple[str, str | None] | None,
) -> tuple[str, str | None]:
    """The plan's "Source" line, and a warning when the plan is not for a tree that exists."""
    if not_cloned is not None:
        repo, ref = not_cloned
        where = f"{repo} at {ref}" if ref else f"{repo} (its default branch)"
        if ref_release(ref):
            return f"{where}, not checked out yet: planned for the release its tag names", None
        return (
            f"{where}, not checked out yet",
            f"{where} is not checked out yet and {ref or 'its default branch'} is not a release tag (vX.Y.Z), so "
            "this plan is for the newest era that fits; the build decides the era from the checkout's version.",
        )
    if source_dir is None:
        return (
            "none: not in a PyTorch checkout, and no --source or --repo (see the warning below)",
            f"No PyTorch source: {Path.cwd()} is not a PyTorch checkout and neither --source nor --repo was given, "
            "so this plan is for the newest era that fits, and `invoke build` without --dry-run would stop. "
            "Pass --source DIR (a checkout) or --repo URL [--ref TAG].",
        )
    if not is_pytorch:
        return str(source_dir), None
    return str(source_dir) + (f" (PyTorch {version[0]}, from {version[1]})" if version else ""), None


def build_python_request(c: Context, flag: str | None, facts: Any, *, asked_here: bool) -> tuple[Any, Any]:
    """--python (or winbuild.python) parsed once; a path on this machine that the probe did not list is asked
    what it is and added to the facts (a --host plan only chooses among the facts file's Pythons)."""
    from pytorch_winbuild.planning.python_choice import PythonRequest

    label = flag_label("python", flag)
    request = PythonRequest.parse(setting(c, "python", flag), label)
    if request.kind != "path" or not asked_here:
        return facts, request
    path_flag(request.value, label)
    from pytorch_winbuild.facts.interpreter import with_python

    facts, executable = with_python(facts, request.value, label)
    return facts, PythonRequest("path", executable)


def cmake_request(request: Any, facts: Any, *, asked_here: bool) -> Any:
    """A --cmake PATH with the version that cmake answers (on this machine) or the facts file records for it (a
    --host plan can only name the CMake that file lists); a release or auto as it is."""
    if request.kind != "path":
        return request
    path_flag(request.value, request.label)
    if asked_here:
        from pytorch_winbuild.facts.probe_common import ask_cmake

        path, version = ask_cmake(request.value, request.label)
        return replace(request, value=path, version=version)
    listed = facts.tools.get("cmake")
    if listed is None or listed.path != request.value or not listed.version:
        shown = f"{listed.path} ({listed.version or 'version unknown'})" if listed is not None else "none"
        raise ConfigurationError(
            f"{request.label} {request.value} is not the facts file's CMake (it lists {shown}), and a --host plan "
            "cannot ask another machine's cmake for its version.",
            fix=f"pass {request.label} X.Y (a CMake from PyPI in the build venv), or leave {request.label} out.",
        )
    return replace(request, version=listed.version)


def source_folder(source: str | None) -> Path | None:
    """--source (which must be a folder), else the current folder when it is a PyTorch checkout."""
    from pytorch_winbuild.facts.source_tree import default_source

    given = path_flag(source, "--source")
    if given is None:
        return default_source(Path.cwd())
    folder = Path(given)
    if not folder.is_dir():
        raise ConfigurationError(f"--source {source} is not a folder.", fix="pass the folder of a PyTorch checkout.")
    return folder


def read_options(c: Context, flags: dict[str, Any], knowledge: Any, **typed: Any) -> Any:
    """The text flags in `flags` (by Options name; None: not given) with their settings, as one typed Options;
    `typed` adds values the task holds as their type (--mode, parsed where the task reads it). Facts, paths and
    the Python are added by the caller."""
    from pytorch_winbuild.planning.options import parse_options

    names = [name for name in TEXT_FLAGS if name in flags]
    raw = {name: setting(c, name, flags[name]) for name in names}
    labels = {name: flag_label(name, flags.get(name)) for name in (*names, "jobs")}
    if "jobs" in flags:
        typed["jobs"] = whole_number(
            setting(c, "jobs", flags["jobs"]), labels["jobs"], unit=" parallel compile jobs (MAX_JOBS)"
        )
    return parse_options(knowledge, raw, labels, **typed)


@dataclass(frozen=True)
class SourceTree:
    """What the plan reads from the source tree, once: its version (and where it was read), its build front end,
    and the plan's "Source" line with a warning when no tree exists yet."""

    version: tuple[str, str] | None
    requires: tuple[str, ...]  # its pyproject.toml [build-system] requires
    backend: str | None  # its PEP 517 backend when it has no setup.py
    text: str
    warnings: tuple[str, ...]


def read_tree(
    source_dir: Path | None, source_is_pytorch: bool, not_cloned: tuple[str, str | None] | None
) -> SourceTree:
    """The source tree's facts for the plan; for --repo before the clone, the release its --ref tags."""
    from pytorch_winbuild.facts.source_tree import (
        backend_without_setup_py,
        build_backend,
        is_pytorch_source,
        read_source_version,
    )

    pytorch = source_dir is not None and source_is_pytorch and is_pytorch_source(source_dir)
    version = read_source_version(source_dir) if pytorch and source_dir else None
    backend = build_backend(source_dir) if pytorch and source_dir else None
    text, warning = describe_source(source_dir, version, source_is_pytorch, not_cloned)
    if not_cloned is not None and version is None:
        version = ref_release(not_cloned[1])
    return SourceTree(
        version,
        backend.requires if backend else (),
        backend_without_setup_py(source_dir) if pytorch and source_dir else None,
        text,
        (warning,) if warning else (),
    )


def plan_from_flags(
    c: Context,
    *,
    host: str | None,
    source: str | None,
    cache: CacheChoice,
    mode: Any = None,
    libtorch: bool = False,
    source_is_pytorch: bool = True,
    arguments: dict[str, Any],
    measured_for: str | None = None,
    build_venv: bool = True,
    facts: Any = None,
    not_cloned: tuple[str, str | None] | None = None,
):
    """Facts (probed or from --host) × knowledge × options → the plan, made once. `arguments` holds the task's
    flags by name; flags the task does not have count as not given; `cache` is the cache folder as the task
    resolved it. `source_is_pytorch` is False for build-ext, whose folder is an extension, not PyTorch.
    `measured_for` ("build", "build-ext"): size MAX_JOBS with the compiler peaks that earlier runs of
    that task recorded in the cache for this machine and configuration (builder/memory_record.py).
    `not_cloned` (repo, ref): a dry run of --repo before the clone exists, planned from the ref's release tag."""
    from pytorch_winbuild.knowledge.choices import CudaWord
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.planning.plan import make_plan

    knowledge = load_knowledge()
    flags = {name: arguments.get(name) for name in PLAN_FLAGS}
    options = read_options(
        c,
        flags,
        knowledge,
        **({"mode": mode} if mode is not None else {}),
        libtorch=libtorch,
        mkl_version=flags["mkl_version"],
        magma_version=flags["magma_version"],
        magma_debug=bool(flags["magma_debug"]),
        no_magma=bool(flags["no_magma"]),
    )
    if facts is None:
        facts = facts_for(path_flag(host, "--host"), gpus=options.cuda is not CudaWord.CPU)
    facts, python = build_python_request(c, flags["python"], facts, asked_here=not host)
    cmake = cmake_request(options.cmake, facts, asked_here=not host)
    source_dir = source_folder(source)
    cache_dir, cache_note = plan_cache_dir(cache, facts)
    foreign = facts.os != this_os()
    options = replace(
        options,
        cache_dir=cache_dir,
        cache_dir_given=cache.given is not None or foreign,
        source_dir=source_dir,
        python=python,
        cmake=cmake,
        build_venv=build_venv,
        extension=not source_is_pytorch,  # build-ext: torch.utils.cpp_extension reads --arch-list's names
    )
    tree = read_tree(source_dir, source_is_pytorch, not_cloned)
    measured = None
    if measured_for is not None and not foreign and peaks_file(cache.folder).exists():
        from pytorch_winbuild.builder.memory_record import measured_jobs  # only with a record to read

        measured = measured_jobs(measured_for, facts, cache.folder, knowledge.resources.watch)
    plan = make_plan(
        options,
        facts,
        knowledge,
        source_version=tree.version,
        locate_archive=lambda archive: _locate(cache_dir, archive, look=not foreign),
        caller_notes=(cache_note,) if cache_note else (),
        measured_jobs=measured,
        tree_requires=tree.requires,
        tree_backend=tree.backend,
    )
    return replace(plan, source=tree.text, warnings=(*tree.warnings, *plan.warnings))


def _locate(cache_dir: PurePath, archive: Any, *, look: bool) -> tuple[str, bool]:
    """deps/cache.py archive_locator, imported when a plan has an archive to place (a Windows plan): the catalog
    it loads costs a CPU dry run on Linux milliseconds it does not need."""
    from pytorch_winbuild.deps.cache import archive_locator

    return archive_locator(cache_dir, look=look)(archive)
