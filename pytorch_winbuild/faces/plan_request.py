"""The tasks' edge: flags, invoke.yaml and INVOKE_WINBUILD_* become one typed Options, the facts are probed or
read once, and planning/request.py's build_request (which the nightly calls too) makes the one PlanRequest.

Precedence, as scikit-build-core's source chain: a flag on the command line > the `winbuild` configuration
(invoke.yaml, -f FILE, INVOKE_WINBUILD_*) > the defaults. Below this module nothing reads a flag again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING

from invoke import Context

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces.flags import (
    CacheChoice,
    example,
    flag_label,
    path_flag,
    setting,
    text_setting,
    whole_number,
)
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.paths import peaks_file
from pytorch_winbuild.planning.flag_table import BY_NAME, PLAN_FLAGS, TEXT_FLAGS

if TYPE_CHECKING:  # the planning modules load when a task plans, not when Invoke lists the tasks
    from pytorch_winbuild.facts.model import Facts
    from pytorch_winbuild.knowledge.catalog import Archive
    from pytorch_winbuild.knowledge.choices import Mode
    from pytorch_winbuild.knowledge.model import Knowledge
    from pytorch_winbuild.planning.jobs import MeasuredJobs
    from pytorch_winbuild.planning.options import Options
    from pytorch_winbuild.planning.plan_model import Plan, SourcePlan
    from pytorch_winbuild.planning.python_choice import PythonRequest


@dataclass(frozen=True)
class CloneChoice:
    """A dry run's --repo and --ref, and --source, the folder the clone goes to (None: the cache's src folder)."""

    repo: str
    ref: str | None
    folder: str | None


def facts_for(host: str | None, *, gpus: bool = True) -> Facts:
    """The --host file's facts, or this machine's (`gpus` False: a CPU-only plan does not ask the driver)."""
    from pytorch_winbuild.facts.model import load_facts
    from pytorch_winbuild.facts.probe import probe

    return load_facts(host) if host else probe(gpus=gpus)


def plan_cache_dir(cache: CacheChoice, facts: Facts) -> tuple[PurePath, str | None]:
    """The cache folder of the machine the plan is for, and a note when it was inferred.

    On this machine: --cache-dir, the configuration, or the default. For a --host plan of another
    OS the folder must be that machine's: a --cache-dir in its form, else the facts file's
    `cache_dir`, else the per-user default next to its TEMP (%LOCALAPPDATA%\\pytorch-winbuild)."""
    given = cache.given
    if facts.os == Platform.running():
        return cache.folder, None
    path_type: type[PurePath] = PureWindowsPath if facts.os == Platform.WINDOWS else PurePosixPath
    sample = (
        "C:\\Users\\you\\AppData\\Local\\pytorch-winbuild"
        if facts.os == Platform.WINDOWS
        else "/home/you/.cache/pytorch-winbuild"
    )
    if given:
        folder = path_type(given)
        if not folder.is_absolute() or (facts.os == Platform.WINDOWS and "/" in str(given)):
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
        facts.os == Platform.WINDOWS
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


def python_request(c: Context, flag: object, label: str) -> PythonRequest:
    """--python (or winbuild.python) parsed once; a path is checked as a path (build_request asks it what it is)."""
    from pytorch_winbuild.planning.python_choice import PythonRequest

    request = PythonRequest.parse(text_setting(c, "python", flag), label)
    if request.kind == "path":
        path_flag(request.value, label)
    return request


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


def read_options(c: Context, flags: Mapping[str, object], knowledge: Knowledge, **typed: object) -> Options:
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


def prepare_planning() -> None:
    """Import what plan_from_flags imports and read the knowledge files (kept: load_knowledge is cached), ahead of
    it: build-ext does this while a child tells it which torch it builds against, which the plan needs."""
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.planning import plan, request  # noqa: F401 (imported for plan_from_flags)

    load_knowledge()


def plan_from_flags(
    c: Context,
    *,
    host: str | None,
    source: str | None,
    cache: CacheChoice,
    task: str = "build",
    mode: Mode | None = None,
    libtorch: bool = False,
    source_is_pytorch: bool = True,
    arguments: Mapping[str, object],
    measured_for: str | None = None,
    build_venv: bool = True,
    facts: Facts | None = None,
    clone: CloneChoice | None = None,
    notes: tuple[str, ...] = (),
) -> Plan:
    """Facts (probed or from --host) × knowledge × options → one PlanRequest (planning/request.py) → the plan.
    `arguments` holds the task's flags by name; flags that `task` (a planning task of planning/flag_table.py) does
    not have count as not given, and so do their `winbuild.*` settings: an invoke.yaml's winbuild.cmake or
    winbuild.generator is for builds, and build-ext, which runs no CMake, never reads it. `cache` is the
    cache folder as the task resolved it. `source_is_pytorch` is False for build-ext, whose folder is an
    extension, not PyTorch. `measured_for` ("build", "build-ext"): size MAX_JOBS with the compiler peaks that
    earlier runs of that task recorded in the cache for this machine and configuration (builder/memory_record.py).
    `clone`: a dry run of --repo, whose plan lists the git commands that get the source (builder/source_plan.py) and
    reads the release from the ref's tag until the clone exists.
    `notes`: the task's own decisions, which the plan lists with the others (build-ext: why this Python)."""
    from pytorch_winbuild.knowledge.choices import CudaWord
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.planning.plan import make_plan
    from pytorch_winbuild.planning.request import Folders, build_request

    knowledge = load_knowledge()
    flags = {name: arguments.get(name) for name in PLAN_FLAGS if task in BY_NAME[name].tasks}
    options = read_options(
        c,
        flags,
        knowledge,
        **({"mode": mode} if mode is not None else {}),
        libtorch=libtorch,
        mkl_version=flags.get("mkl_version"),
        magma_version=flags.get("magma_version"),
        magma_debug=bool(flags.get("magma_debug")),
        no_magma=bool(flags.get("no_magma")),
    )
    if facts is None:
        facts = facts_for(path_flag(host, "--host"), gpus=options.cuda is not CudaWord.CPU)
    python_label = flag_label("python", flags.get("python"))
    labels = {**options.labels, "python": python_label} if flags.get("python") is None else options.labels
    options = replace(options, python=python_request(c, flags.get("python"), python_label), labels=labels)
    if options.cmake.kind == "path":
        path_flag(options.cmake.value, options.cmake.label)
    cache_dir, cache_note = plan_cache_dir(cache, facts)
    here = facts.os == Platform.running()
    checkout, not_cloned = None, None
    if clone is not None:
        checkout, source_dir, not_cloned = _planned_clone(clone, cache_dir, facts, look=host is None)
    else:
        source_dir = source_folder(source)
    request, facts = build_request(
        options,
        facts,
        Folders(cache_dir, cache.given is not None or not here, source_dir, cache_note),
        ask_here=not host,
        python_label=python_label,
        locate_archive=lambda archive: _locate(cache_dir, archive, look=here),
        measured_jobs=_measured(measured_for, facts, cache.folder, knowledge) if here else None,
        source_is_pytorch=source_is_pytorch,
        build_venv=build_venv,
        not_cloned=not_cloned,
        checkout=checkout,
    )
    return make_plan(replace(request, notes=(*request.notes, *notes)), facts, knowledge)


def _planned_clone(
    clone: CloneChoice, cache_dir: PurePath, facts: Facts, *, look: bool
) -> tuple[SourcePlan, Path | None, tuple[str, str | None] | None]:
    """A dry run of --repo: (the git steps the build would run, the tree to plan from: the existing clone when no
    --ref moves it, else none, and then (repo, ref) for the plan to read the release from the ref). `look`: the plan
    is for this machine, whose folders are looked at; a --host plan's are that machine's, in its path form."""
    from pytorch_winbuild.builder.source import clone_destination
    from pytorch_winbuild.builder.source_plan import planned_checkout

    folder: PurePath | None = None
    if clone.folder is not None:
        folder = Path(clone.folder) if look else facts.os.path_type(clone.folder)
        if not folder.is_absolute() and not look:
            raise ConfigurationError(
                f"--source {clone.folder} is not an absolute {facts.os} path, and this plan is for a {facts.os} "
                "machine, where the clone would go.",
                fix="pass that machine's folder for the clone, or leave --source out for the cache's src folder.",
            )
    destination = clone_destination(clone.repo, folder, cache_dir)
    if look:
        destination = Path(destination).absolute()
    checkout = planned_checkout(clone.repo, clone.ref, destination, look=look)
    if look and checkout.action == "fetch" and clone.ref is None:
        return checkout, Path(destination), None
    return checkout, None, (clone.repo, clone.ref)


def _measured(kind: str | None, facts: Facts, cache_dir: Path, knowledge: Knowledge) -> MeasuredJobs | None:
    """The peaks earlier runs of task `kind` recorded in this cache (builder/memory_record.py), imported only when
    there is a record to read."""
    if kind is None or not peaks_file(cache_dir).exists():
        return None
    from pytorch_winbuild.builder.memory_record import measured_jobs

    return measured_jobs(kind, facts, cache_dir, knowledge.resources.watch)


def _locate(cache_dir: PurePath, archive: Archive, *, look: bool) -> tuple[str, bool]:
    """deps/cache.py archive_locator, imported when a plan has an archive to place (a Windows plan): the catalog
    it loads costs a CPU dry run on Linux milliseconds it does not need."""
    from pytorch_winbuild.deps.cache import archive_locator

    return archive_locator(cache_dir, look=look)(archive)
