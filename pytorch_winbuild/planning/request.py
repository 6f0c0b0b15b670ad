"""A plan's inputs, complete, built by one function for both edges (the tasks and the nightly).

Each edge parses its raw values with planning/options.py (flags and settings; a matrix entry) and hands
the typed Options here with the facts and its folders; build_request resolves what only this machine can
answer (a --python or --cmake path), reads the source tree once and returns a frozen PlanRequest that
make_plan takes whole. A fix is re-planned by replacing one field of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.interpreter import with_python
from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.facts.source_tree import SourceTree, read_tree
from pytorch_winbuild.knowledge.choices import CmakeRequest
from pytorch_winbuild.planning.jobs import MeasuredJobs
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.plan_model import ArchiveLocator, EnvChange, SourcePlan
from pytorch_winbuild.planning.python_choice import PythonRequest


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """Everything a plan is made from besides the facts and the knowledge. `locate_archive` says where the cache
    holds each archive (None: plan none); `measured_jobs` looks up compile-job peaks earlier builds recorded
    (None: the cited figures); `notes` are decisions the caller made that the facts cannot show; `entry_env`
    are a nightly entry's own variables, set last; `checkout` is how a dry run of --repo gets the source (the edge
    asks builder/source.py), which the plan prints first."""

    options: Options
    tree: SourceTree = field(default_factory=SourceTree)
    locate_archive: ArchiveLocator | None = None
    measured_jobs: MeasuredJobs | None = None
    notes: tuple[str, ...] = ()
    entry_env: tuple[EnvChange, ...] = ()
    checkout: SourcePlan | None = None


@dataclass(frozen=True, slots=True)
class Folders:
    """Where the plan's machine keeps the cache (in its own path form) and the source tree, as the edge chose
    them. `cache_given`: not this machine's default, so commands the plan prints name it."""

    cache_dir: PurePath
    cache_given: bool
    source_dir: Path | None
    cache_note: str | None = None  # how the edge chose a --host plan's cache folder


def build_request(
    options: Options,
    facts: Facts,
    folders: Folders,
    *,
    ask_here: bool,
    python_label: str,
    locate_archive: ArchiveLocator | None,
    measured_jobs: MeasuredJobs | None,
    source_is_pytorch: bool = True,
    build_venv: bool = True,
    not_cloned: tuple[str, str | None] | None = None,
    entry_env: tuple[EnvChange, ...] = (),
    checkout: SourcePlan | None = None,
) -> tuple[PlanRequest, Facts]:
    """The request and the facts it plans with. `ask_here`: the facts are this machine's, so a --python or --cmake
    path is asked what it is (a --python the probe did not list joins the facts); a --host plan only names what
    its facts file lists. `source_is_pytorch` False: build-ext, whose folder is an extension (its arch names are
    torch.utils.cpp_extension's). `not_cloned` (repo, ref): a dry run of --repo before the clone exists; `checkout`:
    the git steps of a --repo dry run."""
    pinned = str(options.pytorch_version) if options.pytorch_version is not None else None
    python = options.python
    if python.kind == "path" and ask_here:
        facts, executable = with_python(facts, python.value, python_label)
        python = PythonRequest("path", executable)
    complete = replace(
        options,
        cache_dir=folders.cache_dir,
        cache_dir_given=folders.cache_given,
        source_dir=folders.source_dir,
        python=python,
        cmake=_cmake(options.cmake, facts, ask_here=ask_here),
        build_venv=build_venv,
        extension=not source_is_pytorch,
    )
    request = PlanRequest(
        complete,
        read_tree(folders.source_dir, source_is_pytorch, not_cloned, pinned),
        locate_archive,
        measured_jobs,
        (folders.cache_note,) if folders.cache_note else (),
        entry_env,
        checkout,
    )
    return request, facts


def _cmake(request: CmakeRequest, facts: Facts, *, ask_here: bool) -> CmakeRequest:
    """A --cmake PATH with the version that cmake answers (on this machine) or the facts file records for it (a
    --host plan can only name the CMake that file lists); a release or auto as it is."""
    if request.kind != "path":
        return request
    if ask_here:
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
