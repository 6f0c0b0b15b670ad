"""A build from plan to verdict: prepare the folder, enter the environment, run, explain, verify, report.

Each phase is timed into the report, and the report is written whatever happens (success, a
compile error, a failed verification, Ctrl-C), because a failed build is exactly when a user
needs it. While the command runs, the memory watch samples its compilers (memory_watch.py): their
peaks go to the report and to the cache's record for the next plan (memory_record.py), and after
an out-of-memory failure they give the MAX_JOBS that would have fitted. After build-ext, the GPU code
its libraries hold is checked against this machine's GPUs (built_arches.py).
"""

from __future__ import annotations

import os
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pytorch_winbuild.builder.build_backend import check_checkout
from pytorch_winbuild.builder.build_folder import (
    FolderIdentity,
    clean_build_folder,
    reconcile_build_folder,
    remember_build_folder,
)
from pytorch_winbuild.builder.compiler_cache import CacheSession, extension_cache_env
from pytorch_winbuild.builder.deps import fetch_missing_archives
from pytorch_winbuild.builder.environment import build_environment
from pytorch_winbuild.builder.extension_key import ExtensionKey, remember_build
from pytorch_winbuild.builder.memory_record import (
    PeakBook,
    configuration_key,
    diagnosis_figure,
    memory_diagnosis,
    this_machine,
)
from pytorch_winbuild.builder.memory_watch import MemoryWatch
from pytorch_winbuild.builder.process import BuildInterrupted, run_streamed
from pytorch_winbuild.builder.progress import ProgressDisplay
from pytorch_winbuild.builder.report import BuildRecord, CacheRecord, VerificationSkipped, run_paths, summary
from pytorch_winbuild.builder.resume import KeptFolder, again_fix, read_build_folder, resume_note
from pytorch_winbuild.builder.settings import RunnerSettings, load_settings
from pytorch_winbuild.builder.source import SourceCheckout, old_era_prep
from pytorch_winbuild.child_processes import stop_cause
from pytorch_winbuild.errors import BuildError, ConfigurationError, InterruptedByUser, VerificationError, WinbuildError
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.knowledge.resources import WatchSettings
from pytorch_winbuild.paths import peaks_file
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.plan_record import plan_to_dict


@dataclass(frozen=True)
class BuildRequest:
    """What `invoke build` asks for beyond the plan."""

    checkout: SourceCheckout
    cache_dir: Path
    log_dir: Path
    mode: str = "install"
    libtorch: bool = False
    clean: bool = False
    verify: bool = True
    mirror: str | None = None  # where missing MKL/MAGMA archives (and a NuGet Python) come from (fetch-deps' --mirror)
    find_links: str | None = None  # pip --find-links for the build venv's requirements (offline machines)
    index_url: str | None = None  # pip --index-url for them
    # `invoke build`: the venv becomes this cache's last build's (verify's and build-ext's default) as soon as it is
    # made or reused, whatever the build's outcome. The nightly's wheels install nothing into it.
    remember_venv: bool = False
    verify_command: str = "invoke verify"  # what repeats the check, as a failed verification's fix names it


@dataclass(frozen=True)
class ExtensionRequest:
    """What `invoke build-ext` asks for beyond the plan."""

    path: Path
    cache_dir: Path
    log_dir: Path
    mode: str = "inplace"
    clean: bool = False
    key: ExtensionKey | None = None  # recorded after a successful build, for the next one's skip (extension_key.py)


def build_interpreter(plan: Plan) -> str:
    """The interpreter every command of the era runs under: the build venv's, else the build Python itself
    (build-ext, whose Python has the torch it builds against)."""
    return plan.venv.python if plan.venv is not None else plan.build_python.executable


def _python_command(arguments: tuple[str, ...] | list[str], python: str) -> list[str]:
    """The build runs with this interpreter: the one whose site-packages receives the result."""
    return [python, *arguments]


def _prepare_venv(record: BuildRecord, plan: Plan, request: BuildRequest) -> None:
    """The build venv, made (or reused while its key matches) from the build Python, which is fetched first
    when the plan fetches it; remembered at once when the request says so, so that `invoke verify` after a failed
    verification, a failed build or Ctrl-C checks the Python this build installs into."""
    from pytorch_winbuild.builder.build_venv import ensure_build_venv, remember_last_venv

    venv = plan.venv
    if venv is None:
        return
    ensure_build_venv(
        plan.build_python.executable,
        Path(venv.folder),
        venv.specs,
        venv.key,
        find_links=request.find_links,
        index_url=request.index_url,
        log=lambda line: print(line, flush=True),
    )
    if request.remember_venv:
        remember_last_venv(request.cache_dir, venv.python)
    record.note(f"Build venv: {venv.folder} (key {venv.key}) from {plan.build_python.label}.")


# `python -m pip install -v .` (the 2.5+ eras' commands) indents every line of the build backend's
# output by two spaces, so Ninja's "[n/m] " would reach the display as "  [n/m] ", which it rightly
# takes for someone else's output. The display gets the build's lines as the build printed them.
PIP_INDENT = "  "


def _without_pip_indent(on_line: Callable[[str], None]) -> Callable[[str], None]:
    def line(text: str) -> None:
        on_line(text.removeprefix(PIP_INDENT))

    return line


def stream_command(
    record: BuildRecord,
    command: list[str],
    cwd: Path,
    env: dict[str, str],
    settings: RunnerSettings,
    watch: WatchSettings,
    kept_objects: int | None = None,
) -> int:
    """Run `command` with its log, the progress display and the memory watch; its exit code. The
    watch's summary goes to `record.memory` whatever happens once the command has started.
    `kept_objects`: the command continues in a build folder that holds them (builder/resume.py)."""
    display = ProgressDisplay(settings.progress, kept_objects=kept_objects)
    on_line = _without_pip_indent(display.line) if command[1:3] == ["-m", "pip"] else display.line
    watcher = MemoryWatch(watch, display.memory)
    with record.log.open("w", encoding="utf-8", newline="\n") as log:
        log.write(f"pytorch-winbuild {record.kind}: `{' '.join(command)}` in {cwd}, started {record.started}\n")
        try:
            result = run_streamed(
                command,
                cwd=cwd,
                env=env,
                log=log,
                on_line=on_line,
                grace_seconds=settings.stop_grace_seconds,
                watch=watcher,
            )
        finally:
            display.close()
            if display.last_step is not None:
                record.progress = {"done": display.last_step.done, "total": display.last_step.total}
            seen = watcher.stop()
            record.memory = seen if seen.samples or seen.error else None  # None: the command never started
    return result.exit_code


def _remember_peaks(record: BuildRecord, book: PeakBook, exit_code: int | None, env: dict[str, str]) -> None:
    """Keep this run's compiler peaks for the next plan; a failure to write them is only a warning."""
    if record.memory is None:
        return
    result = "interrupted" if exit_code is None else "success" if exit_code == 0 else "failed"
    warning = book.remember(record.memory, result=result, max_jobs=env.get("MAX_JOBS"))
    if warning:
        record.note(f"warning: {warning}")


def _run_command(
    record: BuildRecord,
    session: CacheSession | None,
    cwd: Path,
    env: dict[str, str],
    settings: RunnerSettings,
    book: PeakBook,
    kept_objects: int | None = None,
) -> int:
    """Reset the cache, run the command, keep its compiler peaks and read the cache's numbers (also
    after a failure or Ctrl-C)."""
    if session is not None:
        with record.phase("cache reset"):
            session.start()
    exit_code = None
    try:
        with record.phase("build"):
            exit_code = stream_command(record, record.command, cwd, env, settings, book.settings, kept_objects)
        return exit_code
    finally:
        _remember_peaks(record, book, exit_code, env)
        if session is not None:
            with record.phase("cache stats"):
                record.cache = CacheRecord.of(session.finish())


def _build_failed(record: BuildRecord, exit_code: int, book: PeakBook) -> BuildError:
    """Triage the log: print the first real error and the diagnosis, and say it in one paragraph;
    when the build ran out of memory, the measured peaks say which MAX_JOBS would have fitted."""
    from pytorch_winbuild.diagnosis.triage import triage_log

    triage = triage_log(record.log, posix=os.name != "nt")  # the build ran here: this machine's fixes
    record.triage = triage
    print(triage.to_text(), flush=True)
    memory = None
    if record.memory is not None:
        matched = [match.rule.id for match in triage.matches]
        memory = memory_diagnosis(record.memory, matched, book.settings, diagnosis_figure(book, record.memory))
    record.memory_diagnosis = memory
    if memory:
        print(f"-- {memory}", flush=True)
    command = " ".join(Path(record.command[0]).name if i == 0 else part for i, part in enumerate(record.command))
    message = f"`{command}` exited with status {exit_code}."
    if triage.first_error is not None:
        first = triage.first_error.summary
        message += f" The first error is on line {first.number} of the log {record.log}: {first.text.strip()}"
    else:
        message += f" No error line was recognised; read the end of the log {record.log}."
    if triage.matches:
        message += " Diagnosis: " + "; ".join(f"[{m.rule.id}] {m.rule.title}" for m in triage.matches) + "."
        fix = triage.matches[0].rule.fix_on(triage.posix)
    else:
        fix = f"fix the first error shown above; `invoke diagnose {record.log}` shows it again."
    return BuildError(message, fix=f"{memory} {fix}" if memory else fix)


def _verify_build(record: BuildRecord, request: BuildRequest, python: str, started: float) -> None:
    """Check what the mode produced: the installed torch, or the wheel unpacked into a temporary folder."""
    from pytorch_winbuild.builder.verify import check_torch, failure_error

    if request.libtorch:
        record.verification = VerificationSkipped("a LibTorch build installs no Python package to import")
        return
    if request.mode == "wheel":
        wheels = sorted((request.checkout.path / "dist").glob("*.whl"), key=lambda p: p.stat().st_mtime)
        fresh = [wheel for wheel in wheels if wheel.stat().st_mtime >= started - 1]
        if not fresh:
            raise VerificationError(
                f"the build succeeded but wrote no new wheel to {request.checkout.path / 'dist'}.",
                fix="read the end of the log for where bdist_wheel put it.",
            )
        with tempfile.TemporaryDirectory(prefix="pytorch-winbuild-wheel-") as folder:
            with zipfile.ZipFile(fresh[-1]) as wheel:
                wheel.extractall(folder)
            result = replace(check_torch(python, extra_paths=[Path(folder)]), wheel=str(fresh[-1]))
    else:
        result = check_torch(python)
    record.verification = result
    if not result.ok:
        raise failure_error(result, request.verify_command)


# What a stopped build says to do next when it knows no more (build-ext; `invoke build` says what its folder keeps).
AGAIN = "run the same command again to continue: compiled objects are kept, so the build picks up where it stopped."


def _conclude(record: BuildRecord, body: Callable[[], None], again: Callable[[], str] | None = None) -> BuildRecord:
    """Run the phases; whatever happens, record the outcome, write the report, print the summary. `again`: how to go
    on after Ctrl-C, read when it happens."""
    try:
        body()
        record.result, record.exit_code = "success", 0
    except (BuildInterrupted, KeyboardInterrupt) as stop:  # Ctrl-C, SIGTERM, SIGHUP, SIGBREAK (child_processes.py)
        if isinstance(stop, BuildInterrupted):
            cause, exit_code = stop.cause, stop.exit_code
            stopped = f"the build's {stop.stopped} processes were stopped ({stop.killed} of them had to be killed)"
        else:
            (cause, exit_code), stopped = stop_cause(stop), "no build process was running yet"
        error = InterruptedByUser(
            f"stopped by {cause}: {stopped}. The log so far is {record.log}.",
            fix=again() if again is not None else AGAIN,
            exit_code=exit_code,
        )
        record.result, record.exit_code, record.error = "interrupted", error.exit_code, error.paragraph()
        raise error from None
    except WinbuildError as error:
        record.result = {BuildError: "failed", VerificationError: "verification failed"}.get(type(error), "error")
        record.exit_code, record.error = error.exit_code, error.paragraph()
        raise
    finally:
        record.write()
        print(summary(record), flush=True)
    return record


def _preflight(record: BuildRecord, plan: Plan, build_root: Path, cache_dir: Path, book: PeakBook) -> None:
    """The plan's own warnings (an --arch-list that misses this machine's GPU, …: a dry run shows them, and so
    must the build that acts on them), then disk and memory before anything is written (builder/preflight.py),
    memory against the measured figure when there is one; all go to the report."""
    from pytorch_winbuild.builder.preflight import preflight

    for warning in plan.warnings:
        record.note(f"warning: {warning}")
    measured = book.figure()
    if measured.warning:
        record.note(f"warning: {measured.warning}")
    for warning in preflight(plan, load_knowledge(), build_root, cache_dir, measured.gib):
        record.note(f"warning: {warning}")


def _peak_book(plan: Plan, kind: str, cache_dir: Path) -> PeakBook:
    """This machine's record of compiler peaks for this configuration, in the cache, with the watch's
    settings for this build: a cache server's compiles count only when the plan uses that cache
    (another build's sccache server is not this build's)."""
    watch = load_knowledge().resources.watch
    watch = replace(watch, cache_servers=watch.cache_servers & {plan.compiler_cache})
    return PeakBook(peaks_file(cache_dir), this_machine(plan.os), configuration_key(plan, kind), watch)


def _cache_session(plan: Plan, env: dict[str, str], settings: RunnerSettings) -> CacheSession | None:
    return None if plan.compiler_cache == "none" else CacheSession(settings.caches[plan.compiler_cache], env)


def build_record(plan: Plan, request: BuildRequest) -> BuildRecord:
    """A new build's record (its log and report named), for a caller that reads it whatever the outcome."""
    log, report = run_paths(request.log_dir, "build")
    record = BuildRecord("build", log, report, plan=plan_to_dict(plan), source=request.checkout.to_dict())
    if request.checkout.seconds:
        record.phases["source"] = round(request.checkout.seconds, 3)
    return record


def run_build(plan: Plan, request: BuildRequest, record: BuildRecord | None = None) -> BuildRecord:
    """Build PyTorch (or LibTorch) from `request.checkout` in the plan's environment, into `record` (a new one
    when none is given): a caller that gives its own (the nightly) reads the outcome from it when this raises."""
    settings = load_settings()
    record = build_record(plan, request) if record is None else record
    source = request.checkout.path
    python = build_interpreter(plan)
    record.command = _python_command(plan.build_arguments, python)
    record.cwd = str(source)
    started = time.time()
    book = _peak_book(plan, record.kind, request.cache_dir)

    def body() -> None:
        with record.phase("preflight"):
            _preflight(record, plan, source, request.cache_dir, book)
        with record.phase("prepare"):
            kept = _prepare_folder(record, plan, request)
        with record.phase("deps"):
            fetched = fetch_missing_archives(plan, request.cache_dir, request.mirror)
        if fetched:
            print(fetched, flush=True)
            record.note(f"Fetched the plan's missing archives into {request.cache_dir}.")
        with record.phase("venv"):
            _prepare_venv(record, plan, request)
            check_checkout(source, plan.build_arguments, python)
        with record.phase("environment"):
            environment = build_environment(plan, request.cache_dir, settings.run_env)
        record.set_environment(environment.env)
        record.vcvars = environment.vcvars
        record.runner_env = [{"name": e.name, "value": e.value, "reason": e.reason} for e in environment.added]
        session = _cache_session(plan, environment.env, settings)
        objects = kept.objects if kept is not None else None
        exit_code = _run_command(record, session, source, environment.env, settings, book, objects)
        if exit_code != 0:
            failed = _build_failed(record, exit_code, book)
            raise BuildError(failed.message, fix=f"{failed.fix} Then {again_fix(source, plan)}")
        if request.verify:
            with record.phase("verify"):
                _verify_build(record, request, python, started)
        else:
            record.verification = VerificationSkipped("--no-verify")

    return _conclude(record, body, again=lambda: again_fix(source, plan))


def _prepare_folder(record: BuildRecord, plan: Plan, request: BuildRequest) -> KeptFolder | None:
    """The source's old-era prep and its build folder: removed by --clean, its CMake configuration cleared for
    another generator or toolset, else continued in, which is said with what it keeps (builder/resume.py)."""
    source = request.checkout.path
    prep = old_era_prep(source, plan.era)
    if prep:
        record.note(prep)
    if request.clean:
        removed = clean_build_folder(source)
        record.note(f"--clean: removed {removed}." if removed else f"--clean: {source / 'build'} did not exist.")
    identity = FolderIdentity(plan.generator, plan.compiler.toolset if plan.compiler else None)
    cleared = reconcile_build_folder(source, identity)
    if cleared:
        record.note(cleared)
    kept = None if cleared else read_build_folder(source)
    if kept is not None:
        record.note(resume_note(kept, plan))
    remember_build_folder(source, identity)
    return kept


def run_build_ext(plan: Plan, request: ExtensionRequest) -> BuildRecord:
    """Build a PyTorch C++/CUDA extension's setup.py in the plan's environment."""
    settings = load_settings()
    path = request.path
    if not (path / "setup.py").is_file():
        raise ConfigurationError(
            f"{path} has no setup.py, so it is not an extension build-ext can build.",
            fix="pass the folder that holds the extension's setup.py.",
        )
    log, report = run_paths(request.log_dir, "build-ext", path.resolve().name)
    record = BuildRecord(
        "build-ext",
        log,
        report,
        plan=plan_to_dict(plan),
        source={"path": str(path), "origin": "extension", "commit": None},
    )
    record.command = _python_command(settings.extension_commands[request.mode], build_interpreter(plan))
    record.cwd = str(path)
    book = _peak_book(plan, record.kind, request.cache_dir)

    def body() -> None:
        with record.phase("preflight"):
            _preflight(record, plan, path, request.cache_dir, book)
        with record.phase("prepare"):
            if request.clean:
                removed = clean_build_folder(path)
                record.note(f"--clean: removed {removed}." if removed else f"--clean: {path / 'build'} did not exist.")
        with record.phase("environment"):
            environment = build_environment(plan, request.cache_dir, settings.run_env)
            env = dict(environment.env)
            variables, how = extension_cache_env(
                plan.compiler_cache, plan.os, env, request.cache_dir, settings.extension_cache
            )
            env.update(variables)
        record.note(f"Compiler cache for the extension: {how}.")
        record.set_environment(env)
        record.vcvars = environment.vcvars
        record.runner_env = [{"name": e.name, "value": e.value, "reason": e.reason} for e in environment.added]
        record.runner_env += [
            {"name": name, "value": value, "reason": "compiler cache for extension builds"}
            for name, value in variables.items()
        ]
        reaches = settings.extension_cache.methods.get(plan.compiler_cache, {}).get(plan.os) is not None
        session = _cache_session(plan, env, settings) if reaches else None
        exit_code = _run_command(record, session, path, env, settings, book)
        if exit_code != 0:
            raise _build_failed(record, exit_code, book)
        with record.phase("check"):
            _check_built_archs(record, plan, path)
        if request.key is not None:
            remember_build(path, request.key)

    return _conclude(record, body)


def _check_built_archs(record: BuildRecord, plan: Plan, folder: Path) -> None:
    """What the built libraries hold for the GPU against this machine's GPUs (builder/built_arches.py): a GPU
    none of it runs on is a warning with the --arch-list to rebuild with, before the user's first kernel
    launch finds out."""
    from pytorch_winbuild.builder.built_arches import check_built_archs

    for line in check_built_archs(folder, plan.gpus, plan.cuda.path if plan.cuda else None, plan.os):
        record.note(line)


def default_log_dir(cache_dir: Path) -> Path:
    """Logs and reports live in the cache folder unless --log-dir says otherwise."""
    return cache_dir / "logs"
