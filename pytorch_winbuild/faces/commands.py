"""What each task does once its flags are read: check them, make the plan, call the layer that acts.

tasks.py declares the tasks (flags, help, defaults) and hands every flag here by name. The heavy
imports stay inside the functions, so `invoke --list` and `--dry-run` start fast.
What a task prints for a person quotes paths from flags, facts files and the configuration, so it
goes through terminal_text (the renderers' terminal_lines, terminal_line for single lines here);
JSON and scripts are exact data and are printed as they are.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from invoke import Context

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.faces.flags import (
    cache_folder,
    cache_origin,
    default_cache_dir,
    example,
    finite_number,
    flag_label,
    output_file,
    path_flag,
    python_flag,
    setting,
    whole_number,
    writable_cache,
    writable_folder,
    write_output,
)
from pytorch_winbuild.paths import peaks_file
from pytorch_winbuild.text.terminal_text import terminal_line

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
)


def facts_for(host: str | None, *, gpus: bool = True):
    """The --host file's facts, or this machine's (`gpus` False: a CPU-only plan does not ask the driver)."""
    from pytorch_winbuild.facts.model import load_facts
    from pytorch_winbuild.facts.probe import probe

    return load_facts(host) if host else probe(gpus=gpus)


def this_os() -> str:
    return "windows" if os.name == "nt" else "linux"


def plan_cache_dir(c: Context, flag: str | None, facts: Any) -> tuple[PurePath, str | None]:
    """The cache folder of the machine the plan is for, and a note when it was inferred.

    On this machine: --cache-dir, the configuration, or the default. For a --host plan of another
    OS the folder must be that machine's: a --cache-dir in its form, else the facts file's
    `cache_dir`, else the per-user default next to its TEMP (%LOCALAPPDATA%\\pytorch-winbuild)."""
    given = setting(c, "cache_dir", flag)
    if facts.os == this_os():
        return (Path(given) if given else default_cache_dir()), None
    path_type: type[PurePath] = PureWindowsPath if facts.os == "windows" else PurePosixPath
    sample = (
        "C:\\Users\\you\\AppData\\Local\\pytorch-winbuild"
        if facts.os == "windows"
        else "/home/you/.cache/pytorch-winbuild"
    )
    if given:
        folder = path_type(given)
        if not folder.is_absolute() or (facts.os == "windows" and "/" in str(given)):
            label = flag_label("cache_dir", flag)
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


def tag_cache(folder: Path) -> None:
    """Mark the cache a task is about to write as pytorch-winbuild's (CACHEDIR.TAG), so `clean` knows it."""
    from pytorch_winbuild.deps.cache import tag_cache as write_tag

    write_tag(folder)


def cuda_word(value: str) -> str:
    """--cuda as every task reads it: the words cpu and auto in any case (CPU, Auto), a version as given."""
    word = value.strip().lower()
    return word if word in ("cpu", "auto") else value


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
    from pytorch_winbuild.facts.interpreter import with_python

    facts, executable = with_python(facts, request.value, label)
    return facts, PythonRequest("path", executable)


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


def plan_from_flags(
    c: Context,
    *,
    host: str | None,
    source: str | None,
    mode: str = "install",
    libtorch: bool = False,
    source_is_pytorch: bool = True,
    arguments: dict[str, Any],
    measured_for: str | None = None,
    build_venv: bool = True,
    facts: Any = None,
    not_cloned: tuple[str, str | None] | None = None,
):
    """Facts (probed or from --host) × knowledge × options → plan. `arguments` holds the task's
    flags by name; flags the task does not have count as not given.
    `source_is_pytorch` is False for build-ext, whose folder is an extension, not PyTorch.
    `measured_for` ("build", "build-ext"): size MAX_JOBS with the compiler peaks that earlier runs of
    that task recorded in the cache for this machine and configuration (builder/memory_record.py).
    `not_cloned` (repo, ref): a dry run of --repo before the clone exists, planned from the ref's release tag."""
    from pytorch_winbuild.facts.source_tree import (
        backend_without_setup_py,
        build_backend,
        is_pytorch_source,
        read_source_version,
    )
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.planning.plan import Options, make_plan

    knowledge = load_knowledge()
    flags = {name: arguments.get(name) for name in PLAN_FLAGS}
    cuda = cuda_word(str(setting(c, "cuda", flags["cuda"])))
    if facts is None:
        facts = facts_for(path_flag(host, "--host"), gpus=cuda != "cpu")
    facts, python = build_python_request(c, flags["python"], facts, asked_here=not host)
    source_dir = source_folder(source)
    cache_dir, cache_note = plan_cache_dir(c, flags["cache_dir"], facts)
    options = Options(
        cuda=cuda,
        vs=str(setting(c, "vs", flags["vs"])),
        toolset=setting(c, "toolset", flags["toolset"]),
        generator=str(setting(c, "generator", flags["generator"])),
        compiler_cache=str(setting(c, "compiler_cache", flags["compiler_cache"])),
        arch_list=setting(c, "arch_list", flags["arch_list"]),
        jobs=whole_number(
            setting(c, "jobs", flags["jobs"]),
            flag_label("jobs", flags["jobs"]),
            unit=" parallel compile jobs (MAX_JOBS)",
        ),
        pytorch_version=setting(c, "pytorch_version", flags["pytorch_version"]),
        mode=mode,
        libtorch=libtorch,
        cache_dir=str(cache_dir),
        cache_dir_given=bool(setting(c, "cache_dir", flags["cache_dir"])) or facts.os != this_os(),
        source_dir=str(source_dir) if source_dir else None,
        mkl_version=flags["mkl_version"],
        magma_version=flags["magma_version"],
        magma_debug=bool(flags["magma_debug"]),
        no_magma=bool(flags["no_magma"]),
        python=python,
        build_venv=build_venv,
        extension=not source_is_pytorch,  # build-ext: torch.utils.cpp_extension reads --arch-list's names
    )
    foreign = facts.os != this_os()

    def locate(archive: Any) -> tuple[str, bool]:
        from pytorch_winbuild.deps.cache import deps_dir, installed_path  # only plans with MKL/MAGMA

        # Another machine's cache cannot be looked into from here: its archives count as missing.
        if foreign:
            return str(deps_dir(cache_dir, archive)), False
        return str(deps_dir(Path(cache_dir), archive)), installed_path(Path(cache_dir), archive) is not None

    reads_version = source_dir is not None and source_is_pytorch and is_pytorch_source(source_dir)
    source_version = read_source_version(source_dir) if reads_version and source_dir else None
    backend = build_backend(source_dir) if reads_version and source_dir else None
    tree_requires = backend.requires if backend else ()
    tree_backend = backend_without_setup_py(source_dir) if reads_version and source_dir else None
    notes = (cache_note,) if cache_note else ()
    source_text, source_warning = describe_source(source_dir, source_version, source_is_pytorch, not_cloned)
    if not_cloned is not None and source_version is None:
        source_version = ref_release(not_cloned[1])
    plan = make_plan(
        options,
        facts,
        knowledge,
        source_version=source_version,
        locate_archive=locate,
        caller_notes=notes,
        tree_requires=tree_requires,
        tree_backend=tree_backend,
    )
    plan = replace(
        plan, source=source_text, warnings=(source_warning, *plan.warnings) if source_warning else plan.warnings
    )
    if measured_for is None or foreign or not peaks_file(Path(cache_dir)).exists():
        return plan  # no record yet: nothing measured to plan with (and the record's code is not loaded)
    from pytorch_winbuild.builder.memory_record import measured_job

    # The record is keyed by the configuration, which the first plan decides (era, CUDA, architectures).
    measured = measured_job(plan, measured_for, facts, Path(cache_dir), knowledge.resources.watch)
    if measured.gib is not None and measured.note is not None:
        plan = make_plan(
            options,
            facts,
            knowledge,
            source_version=source_version,
            locate_archive=locate,
            caller_notes=(*notes, measured.note),
            measured_job_gib=measured.gib,
            tree_requires=tree_requires,
            tree_backend=tree_backend,
        )
        plan = replace(plan, source=source_text)
    return replace(plan, warnings=(*plan.warnings, measured.warning)) if measured.warning else plan


def default_build_source() -> Path:
    """The current folder when it is a PyTorch checkout; a real build needs one."""
    from pytorch_winbuild.facts.source_tree import default_source

    found = default_source(Path.cwd())
    if found is None:
        raise ConfigurationError(
            f"there is nothing to build: {Path.cwd()} is not a PyTorch checkout.",
            fix="pass --source DIR (a PyTorch checkout) or --repo URL [--ref TAG] to clone one.",
        )
    return found


def fetch_era(c: Context, pytorch_version: str | None, source: str | None, cuda: str):
    """The era whose MKL/MAGMA defaults a fetch takes: the source tree's version, else
    --pytorch-version, else the newest era that builds with --cuda (no compiler is needed to fetch,
    so the machine's Python and Visual Studio do not narrow it)."""
    from pytorch_winbuild.facts.source_tree import is_pytorch_source, read_source_version
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.planning.era_choice import resolve_era

    folder = source_folder(source)
    found = read_source_version(folder) if folder and is_pytorch_source(folder) else None
    return resolve_era(
        load_knowledge(),
        None,
        cuda=cuda,
        pytorch_version=setting(c, "pytorch_version", pytorch_version),
        source_version=found,
    )


def installed_torch_version(python: str | None = None) -> str:
    """The torch an extension builds against, read from its metadata (importing torch takes seconds), in this
    Python or in `python` (asked in one short run)."""
    from importlib.metadata import PackageNotFoundError, version

    fix = "install PyTorch into that Python first (pip install torch==<version>, or `invoke build`)."
    if python is None:
        try:
            return version("torch")
        except PackageNotFoundError:
            raise ToolchainError(
                f"torch is not installed in {sys.executable}, and an extension builds against the installed torch.",
                fix=fix,
            ) from None
    import subprocess

    from pytorch_winbuild.facts.interpreter import ask_python

    executable = ask_python(python).executable
    query = (
        "import importlib.metadata as m; print(m.version('torch'))"  # Python 3.8+, as every torch with C++ extensions
    )
    answer = subprocess.run([executable, "-c", query], capture_output=True, text=True, check=False, timeout=60)
    if answer.returncode != 0 or not answer.stdout.strip():
        raise ToolchainError(
            f"torch is not installed in {executable}, and an extension builds against the installed torch.", fix=fix
        )
    return answer.stdout.strip().splitlines()[-1]


def _plan_command(host: str | None) -> str:
    """The command that plans the machine doctor just looked at, as this shell runs it: the console
    script outside the repo (where `invoke` finds no tasks.py), the same facts file with --host."""
    import shutil

    from pytorch_winbuild.planning.plan import quote_argument

    started = Path(sys.argv[0])
    program = "pytorch-winbuild" if started.stem == "pytorch-winbuild" else "invoke"
    shell = "windows" if sys.platform == "win32" else "linux"
    found = shutil.which(program)
    if started.stem == program and (found is None or Path(found).resolve() != started.resolve()):
        program = quote_argument(shell, str(started))  # a venv's script, not on PATH: name it as it was started
    return f"{program} build --dry-run" + (f" --host {quote_argument(shell, host)}" if host else "")


def _plan_problem(c: Context, host: str | None, facts: Any) -> str | None:
    """Why the plan doctor suggests would fail (doctor makes it, with the same facts), or None."""
    from pytorch_winbuild.errors import WinbuildError

    try:
        plan_from_flags(c, host=host, source=None, arguments={}, facts=facts)
    except WinbuildError as error:
        return error.paragraph()
    return None


def doctor(c: Context, *, host: str | None, json: bool) -> None:
    """The `doctor` task."""
    from pytorch_winbuild.faces.doctor import doctor_checks, render_doctor
    from pytorch_winbuild.knowledge.model import load_knowledge

    notes: tuple[str, ...] = ()
    if path_flag(host, "--host") is not None:
        facts = facts_for(host)
    else:
        from pytorch_winbuild.facts.probe import probe_report

        report = probe_report()
        # The cache folder is configuration, not something the probe finds: a --host plan made
        # from this file puts MKL/MAGMA where this machine's pytorch-winbuild keeps them.
        facts, notes = replace(report.facts, cache_dir=str(cache_folder(c, None))), report.notes
    if json:
        sys.stdout.write(facts.to_json())
        return
    checks = doctor_checks(facts, load_knowledge())
    missing = [check.topic for check in checks if check.status == "missing"]
    problem = None if missing else _plan_problem(c, host, facts)
    sys.stdout.write(render_doctor(facts, checks, notes, next_step=_plan_command(host), plan_problem=problem))
    if missing:
        raise ToolchainError(f"missing: {', '.join(missing)}.", fix="see the fix lines above.")
    if problem:
        raise ToolchainError("this machine's default plan fails.", fix="see the last line above.")


def env(
    c: Context, *, source: str | None, host: str | None, format: str, output: str | None, **plan_flags: Any
) -> None:
    """The `env` task; `plan_flags` are the PLAN_FLAGS, by name."""
    from pytorch_winbuild.faces.render import render

    target = output_file(output)
    plan = plan_from_flags(c, host=host, source=source, arguments=plan_flags)
    write_output(render(plan, format, output), target)


def build(
    c: Context,
    *,
    source: str | None,
    host: str | None,
    mode: str,
    dry_run: bool,
    format: str,
    clean: bool,
    repo: str | None,
    ref: str | None,
    libtorch: bool,
    log_dir: str | None,
    no_verify: bool,
    find_links: str | None,
    index_url: str | None,
    **plan_flags: Any,
) -> None:
    """The `build` task; `plan_flags` are the PLAN_FLAGS, by name."""
    from pytorch_winbuild.faces.render import render

    if host and not dry_run:
        raise ConfigurationError(
            "--host plans for another machine; a real build runs on this one.",
            fix="add --dry-run to see that machine's plan, or leave --host out.",
        )
    if ref and not repo:
        raise ConfigurationError(
            "--ref needs --repo: it names what to check out of that repository.",
            fix="add --repo URL, or check out the ref yourself and pass --source.",
        )
    for value, label in (
        (source, "--source"),
        (host, "--host"),
        (log_dir, "--log-dir"),
        (repo, "--repo"),
        (ref, "--ref"),
    ):
        path_flag(value, label)
    if repo:
        from pytorch_winbuild.builder.source import check_ref, check_repo

        check_repo(repo)  # a dry run refuses what the real build would, before any plan is shown
        if ref:
            check_ref(ref)
    folder = cache_folder(c, plan_flags["cache_dir"])
    mirror = None if dry_run else checked_mirror(c, None)  # before the clone: where missing MKL/MAGMA come from
    if not dry_run:
        writable_cache(c, folder, plan_flags["cache_dir"])
        tag_cache(folder)
        if log_dir:
            writable_folder(Path(log_dir), "--log-dir")
    checkout = None
    not_cloned: tuple[str, str | None] | None = None
    if repo:
        from pytorch_winbuild.builder.source import acquire_source, clone_destination

        destination = clone_destination(repo, Path(source) if source else None, folder)
        if not dry_run:
            from pytorch_winbuild.builder.preflight import check_disk, checkout_needs
            from pytorch_winbuild.knowledge.model import load_knowledge

            for warning in check_disk(checkout_needs(destination, load_knowledge())):  # before the clone starts
                print(terminal_line(f"-- warning: {warning}"), flush=True)
            checkout = acquire_source(repo=repo, ref=ref, destination=destination)
        # A dry run plans what the build would check out: an existing clone only when no --ref asks for another.
        from_clone = destination.is_dir() and (checkout is not None or not ref)
        source = str(destination) if from_clone else None
        if not from_clone:
            not_cloned = (repo, ref)
    plan = plan_from_flags(
        c,
        host=host,
        source=source,
        mode=mode,
        libtorch=libtorch,
        arguments=plan_flags,
        measured_for="build",
        not_cloned=not_cloned,
    )
    if dry_run:
        sys.stdout.write(render(plan, format))
        return
    from pytorch_winbuild.builder.pipeline import BuildRequest, default_log_dir, run_build  # not for --dry-run
    from pytorch_winbuild.builder.source import existing_checkout

    if checkout is None:
        source_dir = Path(source) if source else default_build_source()
        checkout = existing_checkout(source_dir)
    request = BuildRequest(
        checkout=checkout,
        cache_dir=folder,
        log_dir=Path(log_dir) if log_dir else default_log_dir(folder),
        mode=mode,
        libtorch=libtorch,
        clean=clean,
        verify=not no_verify,
        mirror=mirror,
        find_links=path_flag(setting(c, "find_links", find_links), flag_label("find_links", find_links)),
        index_url=path_flag(setting(c, "index_url", index_url), flag_label("index_url", index_url)),
    )
    run_build(plan, request)
    if plan.venv is not None:
        from pytorch_winbuild.builder.build_venv import remember_last_venv

        remember_last_venv(folder, plan.venv.python)


def checked_mirror(c: Context, flag: str | None) -> str | None:
    """--mirror, else winbuild.mirror, checked now, so an unusable one is named by where it came from."""
    from pytorch_winbuild.deps.records import resolve_source

    mirror = setting(c, "mirror", flag)
    resolve_source(mirror, None, flag_label("mirror", flag))
    return mirror


def fetch_deps(
    c: Context,
    *,
    cuda: str | None,
    mkl_version: str | None,
    magma_version: str | None,
    magma_debug: bool,
    no_magma: bool,
    mirror: str | None,
    from_dir: str | None,
    update_lock: bool,
    cache_dir: str | None,
    jobs: str | None,
    lock_file: str | None,
    pytorch_version: str | None,
    source: str | None,
    python: str | None,
    dry_run: bool,
) -> None:
    """The `fetch-deps` task. `--python X.Y` alone fetches only that Python: MKL/MAGMA come too when a flag
    that picks them is given."""
    from pytorch_winbuild.deps.catalog import magma_preference, python_interpreter, select_archives, select_python
    from pytorch_winbuild.deps.fetch import describe_fetch, fetch_archives, format_summary

    downloads = whole_number(jobs, "--jobs", minimum=0, unit=" (0: one per archive, at most 4)") or 0
    for value, label in ((from_dir, "--from-dir"), (lock_file, "--lock-file"), (mirror, "--mirror")):
        path_flag(value, label)
    python_package = select_python(python) if python is not None else None
    picks_libraries = (
        magma_debug
        or no_magma
        or any(flag is not None for flag in (cuda, mkl_version, magma_version, pytorch_version, source))
    )
    cuda_value = cuda_word(str(setting(c, "cuda", cuda) or "auto"))
    cuda_given = cuda_value != "auto"
    if cuda_given and cuda_value != "cpu":
        from pytorch_winbuild.deps.catalog import cuda_prefix

        cuda_prefix(cuda_value)  # a malformed --cuda is named before any era is looked for
    choice = fetch_era(c, pytorch_version, source, cuda_value) if python is None or picks_libraries else None
    archives = (
        select_archives(
            cuda=cuda_value if cuda_given and cuda_value != "cpu" else None,
            mkl_version=mkl_version or choice.era.mkl,
            magma_versions=magma_preference(magma_version) or list(choice.era.magma),
            magma_debug=magma_debug,
            no_magma=no_magma,
        )
        if choice is not None
        else []
    ) + ([python_package] if python_package is not None else [])
    source_mirror = mirror if from_dir else checked_mirror(c, mirror)  # a configured mirror gives way to --from-dir
    folder = cache_folder(c, cache_dir)
    other_machine = os.name != "nt" and PureWindowsPath(str(folder)).drive  # a Windows plan's command, read on Linux
    needs_magma = cuda_given and cuda_value != "cpu" and not no_magma
    magma_note = (
        "\nMAGMA was not fetched: which one depends on the CUDA version. Pass --cuda X.Y (e.g. --cuda 10.1) "
        "for a CUDA build, or --cuda cpu to say the build has no CUDA."
        if choice is not None and not cuda_given and not no_magma
        else ""
    )
    if dry_run:
        defaults = (
            ""
            if choice is None or (mkl_version and (magma_version or not needs_magma))
            else terminal_line(
                f"Versions not given take PyTorch {choice.era.name}'s defaults (era from {choice.source})."
            )
            + "\n"
        )
        shown = PureWindowsPath(str(folder)) if other_machine else folder
        print(defaults + describe_fetch(archives, cache_dir=shown, mirror=source_mirror, from_dir=from_dir), end="")
        if python_package is not None:
            from pytorch_winbuild.deps.cache import deps_dir

            interpreter = python_interpreter(deps_dir(shown, python_package))
            print(terminal_line(f"{python_package.description} interpreter (once fetched): {interpreter}"))
        if magma_note:
            print(magma_note.replace("was not fetched", "would not be fetched"))
        return
    if other_machine:
        raise ConfigurationError(
            f"{cache_origin(c, cache_dir)[0]} {folder} is a Windows folder, and this machine is not Windows.",
            fix=(
                "run the command on that Windows machine, add --dry-run to see what it would fetch, or pass a folder "
                "of this machine."
            ),
        )
    result = fetch_archives(
        archives,
        cache_dir=folder,
        mirror=source_mirror,
        mirror_label=flag_label("mirror", mirror),
        from_dir=from_dir,
        update_lock=update_lock,
        lock_path=Path(lock_file) if lock_file else None,
        jobs=downloads,
        before_writing=lambda: writable_cache(c, folder, cache_dir),  # a cache holding everything may be read-only
    )
    print(format_summary(result))
    python_folder = result.folder("python")
    if python_package is not None and python_folder is not None:
        print(f"\n{terminal_line(f'{python_package.description} interpreter: {python_interpreter(python_folder)}')}")
    if magma_note:
        print(magma_note)


def clean(c: Context, *, deps: bool, downloads: bool, cache_dir: str | None) -> None:
    """The `clean` task."""
    from pytorch_winbuild.deps.cache import clean as clean_cache
    from pytorch_winbuild.deps.cache import deps_root, downloads_root, is_cache
    from pytorch_winbuild.deps.progress import human_size, log_line

    if not (deps or downloads):
        raise ConfigurationError(
            "nothing to clean was named.",
            fix="pass --deps (extracted MKL/MAGMA), --downloads (downloaded archives), or both.",
        )
    folder = cache_folder(c, cache_dir)
    label, instead = cache_origin(c, cache_dir)
    named = [deps_root(folder)] * deps + [downloads_root(folder)] * downloads
    if (folder.exists() and not folder.is_dir()) or any(os.path.lexists(path) for path in named):
        writable_cache(c, folder, cache_dir)  # a file named as the cache, or a cache with something to remove
    elif is_cache(folder):  # nothing to remove: no lock to take, nothing written (the cache may be read-only)
        print(terminal_line(f"nothing to remove in {folder}"))
        return
    removed = clean_cache(
        folder, deps=deps, downloads=downloads, timeout=10.0, log=log_line, label=label, instead=instead
    )
    for item in removed:
        print(terminal_line(f"removed {item.path} ({human_size(item.bytes)})"))
    if not removed:
        print(terminal_line(f"nothing to remove in {folder}"))


def build_ext(c: Context, *, path: str, mode: str, clean: bool, log_dir: str | None, **plan_flags: Any) -> None:
    """The `build-ext` task; `plan_flags` are those of PLAN_FLAGS that build-ext has, by name."""
    from pytorch_winbuild.builder.pipeline import ExtensionRequest, default_log_dir, run_build_ext

    folder = Path(path_flag(path, "PATH") or "")
    if not folder.is_dir():
        raise ConfigurationError(f"{path} is not a folder.", fix="pass the folder that holds the extension's setup.py.")
    cache = cache_folder(c, plan_flags["cache_dir"])
    writable_cache(c, cache, plan_flags["cache_dir"])
    tag_cache(cache)
    logs = path_flag(log_dir, "--log-dir")
    if logs:
        writable_folder(Path(logs), "--log-dir")
    interpreter = named_python(c, plan_flags["python"])  # None (auto): the Python running this task, with its torch
    version = setting(c, "pytorch_version", plan_flags["pytorch_version"]) or installed_torch_version(interpreter)
    plan = plan_from_flags(
        c,
        host=None,
        source=str(folder),
        source_is_pytorch=False,
        arguments={
            **plan_flags,
            "pytorch_version": version,
            "cache_dir": str(cache),
            "python": interpreter or sys.executable,
        },
        measured_for="build-ext",
        build_venv=False,
    )
    request = ExtensionRequest(
        path=folder,
        cache_dir=cache,
        log_dir=Path(log_dir) if log_dir else default_log_dir(cache),
        mode=mode,
        clean=clean,
    )
    run_build_ext(plan, request)


def verify(c: Context, *, python: str | None, cache_dir: str | None) -> None:
    """The `verify` task: --python (a path or X.Y), else the venv of this cache's last build, else this Python."""
    import json

    from pytorch_winbuild.builder.verify import check_torch, failure_error

    result = check_torch(verified_python(c, python, cache_dir))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if not result["ok"]:
        raise failure_error(result)


def named_python(c: Context, flag: str | None) -> str | None:
    """The interpreter --python (or winbuild.python) names for a task that runs an installed torch (build-ext,
    verify): a path, or X.Y found among this machine's Pythons; None for auto."""
    from pytorch_winbuild.planning.python_choice import PythonRequest

    label = flag_label("python", flag)
    request = PythonRequest.parse(setting(c, "python", flag), label)
    if request.kind == "path":
        return python_flag(request.value)
    if request.kind == "auto":
        return None
    from pytorch_winbuild.facts.probe import probe

    found = [p for p in probe(gpus=False).pythons if request.matches(p)]
    if not found:
        raise ConfigurationError(
            f"{label} {request.value}: no Python {request.value} is installed here (`invoke doctor` lists them).",
            fix="pass the path of the Python that has the torch to use, or leave --python out.",
        )
    return found[0].executable


def verified_python(c: Context, flag: str | None, cache_dir: str | None) -> str | None:
    """The interpreter `verify` checks: --python, else the venv of this cache's last build; None: this one."""
    named = named_python(c, flag)
    if named is not None:
        return named
    from pytorch_winbuild.builder.build_venv import last_venv

    return last_venv(cache_folder(c, cache_dir))


def diagnose(c: Context, *, logfile: str, json: bool, rules: str | None) -> None:
    """The `diagnose` task."""
    from pytorch_winbuild.diagnosis.rules import load_rules
    from pytorch_winbuild.diagnosis.triage import triage_log

    result = triage_log(logfile, rules=load_rules(rules) if rules else None)
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure:  # a log's stray characters must not crash the report on a code-page console
        reconfigure(errors="replace")
    gpus = this_machines_gpus() if any(match.rule.names_gpus for match in result.matches) else None
    if json:
        from pytorch_winbuild.text.terminal_text import terminal_json

        data = result.to_dict()
        if gpus is not None:
            data["this_machine"] = gpus
        print(terminal_json(data, indent=2))  # DEL and C1 controls \u-escaped, as the report stores them
        return
    text = result.to_text()
    if gpus is not None:
        text += "\n" + terminal_line(gpus["advice"])
    print(text)


def this_machines_gpus() -> dict[str, Any]:
    """For a diagnosis whose fix depends on the GPU (no kernel image): the GPUs the probe sees here, and the
    --arch-list that builds for them (their compute capabilities), or that none was seen."""
    from pytorch_winbuild.facts.probe import probe
    from pytorch_winbuild.planning.plan import quote_argument

    gpus = [g for g in probe().gpus or () if g.compute_capability]
    if not gpus:
        return {"gpus": [], "advice": "On this machine: no NVIDIA GPU was found, so the fix above cannot be narrowed."}
    arch = ";".join(sorted({g.compute_capability for g in gpus if g.compute_capability}, key=lambda c: float(c)))
    names = ", ".join(f"GPU {g.index} {g.name} (compute capability {g.compute_capability})" for g in gpus)
    return {
        "gpus": [{"index": g.index, "name": g.name, "compute_capability": g.compute_capability} for g in gpus],
        "arch_list": arch,
        "advice": f"On this machine: {names}. Build for it with --arch-list {quote_argument(this_os(), arch)}.",
    }


def nightly(
    c: Context,
    *,
    matrix: str | None,
    only: list[str] | None,
    force: bool,
    output_dir: str | None,
    keep_days: str | None,
    min_free_gb: str | None,
    cache_dir: str | None,
    mirror: str | None,
    matrix_json: bool = False,
    plan_file: str | None = None,
    previous: str | None = None,
    runner_labels: bool = False,
) -> None:
    """The `nightly` task."""
    from pytorch_winbuild.nightly.matrix import MAX_KEEP_DAYS
    from pytorch_winbuild.nightly.run import NightlyOptions, run_nightly

    for value, label in ((matrix, "--matrix"), (output_dir, "--output-dir"), (mirror, "--mirror")):
        path_flag(value, label)
    if any(not name.strip() for name in only or ()):
        raise ConfigurationError(
            "--only is empty.", fix="name a matrix entry, e.g. --only cu124-py311, or leave --only out for every entry."
        )
    keep = whole_number(keep_days, "--keep-days", maximum=MAX_KEEP_DAYS, unit=" days")
    if runner_labels:
        if matrix_json:
            raise ConfigurationError(
                "--runner-labels and --matrix-json print different things.", fix="pass one of them at a time."
            )
        nightly_runner_labels()
        return
    if matrix_json:
        nightly_matrix_json(
            matrix=matrix, only=tuple(only or ()), force=force, keep_days=keep, previous=previous, plan_file=plan_file
        )
        return
    for value, label in ((plan_file, "--plan-file"), (previous, "--previous")):
        if value is not None:
            raise ConfigurationError(
                f"{label} plans a fleet's night, and this command builds.",
                fix=f"add --matrix-json to plan (it builds nothing), or leave {label} out to build.",
            )
    min_free = finite_number(min_free_gb, "--min-free-gb")
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.nightly.matrix import load_matrix

    # The matrix and --only are checked before the cache is touched (tagged, locked): a broken file needs none.
    load_matrix(Path(matrix) if matrix else None, load_knowledge()).select(tuple(only or ()))
    folder = cache_folder(c, cache_dir)
    writable_cache(c, folder, cache_dir)
    tag_cache(folder)
    if output_dir:
        writable_folder(Path(output_dir), "--output-dir")
    options = NightlyOptions(
        matrix=Path(matrix) if matrix else None,
        cache_dir=folder,
        only=tuple(only or ()),
        force=force,
        output_dir=Path(output_dir) if output_dir else None,
        keep_days=keep,
        min_free_gb=min_free,
        mirror=checked_mirror(c, mirror),
        mirror_label=flag_label("mirror", mirror),
    )
    run_nightly(options)


def nightly_runner_labels() -> None:
    """`invoke nightly --runner-labels`: the labels this machine's runner registers with, from what `invoke doctor`
    finds (config.cmd --labels takes them comma-separated; GitHub adds self-hosted, the OS and the architecture)."""
    from pytorch_winbuild.facts.probe import probe
    from pytorch_winbuild.nightly.runner_labels import load_label_rules, registration_labels

    print(",".join(registration_labels(probe(gpus=False), load_label_rules())))


def nightly_matrix_json(
    *,
    matrix: str | None,
    only: tuple[str, ...],
    force: bool,
    keep_days: int | None,
    previous: str | None,
    plan_file: str | None,
) -> None:
    """`invoke nightly --matrix-json`: the night's jobs as JSON on stdout (the plan, for a person, on stderr)."""
    import json
    import tempfile

    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.nightly.fleet_plan import plan_fleet
    from pytorch_winbuild.nightly.matrix import load_matrix
    from pytorch_winbuild.nightly.runner_labels import load_label_rules

    for value, label in ((plan_file, "--plan-file"), (previous, "--previous")):
        path_flag(value, label)
    site = Path(previous) if previous else None
    if site is not None and not site.is_dir():
        raise ConfigurationError(
            f"--previous {previous} is not a folder.",
            fix="pass the channel published last night (the artifact nightly-channel), or leave --previous out to "
            "build every entry.",
        )
    target = Path(plan_file) if plan_file else None
    if target is not None and target.exists() and not target.is_file():
        raise ConfigurationError(
            f"--plan-file {plan_file} is not a regular file (a folder, pipe or device).",
            fix="name a new file, e.g. --plan-file plan.json.",
        )
    knowledge = load_knowledge()
    loaded = load_matrix(Path(matrix) if matrix else None, knowledge).with_overrides(
        output_dir=None, keep_days=keep_days, min_free_gb=None
    )
    with tempfile.TemporaryDirectory(prefix="pytorch-winbuild-plan-") as work:
        plan = plan_fleet(
            loaded, loaded.select(only), previous=site, force=force, rules=load_label_rules(), work_dir=Path(work)
        )
    if target is not None:
        plan.write(target)
    print(plan.describe(), file=sys.stderr, flush=True)
    print(json.dumps(plan.matrix_json()), flush=True)


def nightly_merge(
    c: Context,
    *,
    part: list[str] | None,
    output_dir: str | None,
    previous: str | None,
    plan: str | None,
    keep_days: str | None,
) -> None:
    """The `nightly-merge` task."""
    from pytorch_winbuild.nightly.matrix import MAX_KEEP_DAYS
    from pytorch_winbuild.nightly.merge import run_merge

    for value, label in [(output_dir, "--output-dir"), (previous, "--previous"), (plan, "--plan")] + [
        (name, "--part") for name in part or ()
    ]:
        path_flag(value, label)
    if output_dir is None:
        raise ConfigurationError(
            "--output-dir is missing: the merge needs a folder for the channel.",
            fix="pass --output-dir OUT (a new folder, or the channel to update).",
        )
    keep = whole_number(keep_days, "--keep-days", maximum=MAX_KEEP_DAYS, unit=" days")
    writable_folder(Path(output_dir), "--output-dir")
    run_merge(
        [Path(name) for name in part or ()],
        Path(output_dir),
        previous=Path(previous) if previous else None,
        plan_path=Path(plan) if plan else None,
        keep_days=keep,
    )
