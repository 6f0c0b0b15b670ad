"""The Invoke tasks: each declares its flags and help and hands them to faces/commands.py (fetch-deps, clean:
deps_commands.py; the nightly's: nightly_commands.py). Planning tasks read flags once, in faces/plan_request.py.
Task → modules: doctor: facts/probe → faces/doctor; env: faces/plan_request → planning/plan → faces/render;
build: builder/source → faces/plan_request → planning/plan → builder/pipeline (+ builder/verify); build-ext: the same
without source and verify; fetch-deps: faces/deps_commands → knowledge/catalog → deps/fetch; clean: deps/cache;
verify: builder/verify; diagnose: diagnosis/triage, rules; nightly: nightly/run (fleet_plan, runner_labels);
nightly-merge: nightly/merge; nightly-site: nightly/site. Flag defaults (`winbuild.*`): docs/architecture.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from invoke import Collection, Context
from invoke import task as invoke_task

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces import commands, deps_commands, nightly_commands
from pytorch_winbuild.faces.cli_errors import WinbuildTask, adopt_invoke_program, reports_errors
from pytorch_winbuild.faces.flags import WINBUILD_DEFAULTS
from pytorch_winbuild.faces.help import (
    BUILD_EXT_HELP,
    BUILD_HELP,
    CLEAN_HELP,
    DIAGNOSE_HELP,
    DOCTOR_HELP,
    ENV_HELP,
    FETCH_DEPS_HELP,
    NIGHTLY_HELP,
    NIGHTLY_MERGE_HELP,
    NIGHTLY_SITE_HELP,
    VERIFY_HELP,
)


def _check_config_files_or_exit() -> None:
    """Invoke reads its config files and INVOKE_WINBUILD_* after importing this module: check them first
    (see config_check)."""
    from pytorch_winbuild.faces.config_check import check_config_files, check_environment, invoke_config_files
    from pytorch_winbuild.paths import REPO_ROOT

    try:
        check_config_files(invoke_config_files(REPO_ROOT, Path.home()), WINBUILD_DEFAULTS)
        check_environment(os.environ, WINBUILD_DEFAULTS)
    except ConfigurationError as error:
        print(error.paragraph(), file=sys.stderr)
        raise SystemExit(error.exit_code) from None


def task(
    *, help: dict[str, str], auto_shortflags: bool = True, iterable: list[str] | None = None
) -> Callable[[Callable[..., None]], WinbuildTask]:
    """Invoke's @task, making WinbuildTask tasks (no automatic short flag takes -h)."""
    return invoke_task(help=help, auto_shortflags=auto_shortflags, iterable=iterable, klass=WinbuildTask)


_check_config_files_or_exit()
adopt_invoke_program()  # Invoke's own `invoke` binary: the same checks as the console script (cli_errors)
namespace = Collection()
namespace.configure({"winbuild": WINBUILD_DEFAULTS})


@task(help=DOCTOR_HELP, auto_shortflags=False)
@reports_errors
def doctor(c: Context, host: str | None = None, json: bool = False, output: str | None = None) -> None:
    """Show what is installed and what is missing for building PyTorch, with the fix for each."""
    commands.doctor(c, host=host, json=json, output=output)


@task(help=ENV_HELP, auto_shortflags=False)
@reports_errors
def env(
    c: Context,
    cuda: str | None = None,
    vs: str | None = None,
    toolset: str | None = None,
    generator: str | None = None,
    compiler_cache: str | None = None,
    arch_list: str | None = None,
    jobs: str | None = None,
    pytorch_version: str | None = None,
    python: str | None = None,
    cmake: str | None = None,
    source: str | None = None,
    cache_dir: str | None = None,
    host: str | None = None,
    format: str = "table",
    output: str | None = None,
    mkl_version: str | None = None,
    magma_version: str | None = None,
    magma_debug: bool = False,
    no_magma: bool = False,
) -> None:
    """Print the build environment the plan composes: every variable with its reason, or as a script."""
    commands.env(
        c,
        cuda=cuda,
        vs=vs,
        toolset=toolset,
        generator=generator,
        compiler_cache=compiler_cache,
        arch_list=arch_list,
        jobs=jobs,
        pytorch_version=pytorch_version,
        python=python,
        cmake=cmake,
        source=source,
        cache_dir=cache_dir,
        host=host,
        format=format,
        output=output,
        mkl_version=mkl_version,
        magma_version=magma_version,
        magma_debug=magma_debug,
        no_magma=no_magma,
    )


@task(help=BUILD_HELP, auto_shortflags=False)
@reports_errors
def build(
    c: Context,
    cuda: str | None = None,
    vs: str | None = None,
    toolset: str | None = None,
    generator: str | None = None,
    compiler_cache: str | None = None,
    arch_list: str | None = None,
    jobs: str | None = None,
    pytorch_version: str | None = None,
    python: str | None = None,
    cmake: str | None = None,
    source: str | None = None,
    cache_dir: str | None = None,
    host: str | None = None,
    mode: str = "install",
    dry_run: bool = False,
    format: str = "table",
    clean: bool = False,
    repo: str | None = None,
    ref: str | None = None,
    libtorch: bool = False,
    log_dir: str | None = None,
    no_verify: bool = False,
    find_links: str | None = None,
    index_url: str | None = None,
    mkl_version: str | None = None,
    magma_version: str | None = None,
    magma_debug: bool = False,
    no_magma: bool = False,
) -> None:
    """Build PyTorch from source in the planned environment (--dry-run: show the plan only)."""
    commands.build(
        c,
        cuda=cuda,
        vs=vs,
        toolset=toolset,
        generator=generator,
        compiler_cache=compiler_cache,
        arch_list=arch_list,
        jobs=jobs,
        pytorch_version=pytorch_version,
        python=python,
        cmake=cmake,
        source=source,
        cache_dir=cache_dir,
        host=host,
        mode=mode,
        dry_run=dry_run,
        format=format,
        clean=clean,
        repo=repo,
        ref=ref,
        libtorch=libtorch,
        log_dir=log_dir,
        no_verify=no_verify,
        find_links=find_links,
        index_url=index_url,
        mkl_version=mkl_version,
        magma_version=magma_version,
        magma_debug=magma_debug,
        no_magma=no_magma,
    )


@task(
    help={
        **FETCH_DEPS_HELP,
        "python": (
            "CPython X.Y for 64-bit Windows to fetch from NuGet, e.g. 3.6 (the minors build_config/deps.toml [python] "
            "lists). Alone it fetches only that Python; with --cuda, --mkl-version, --magma-version, --magma-debug, "
            "--no-magma, --pytorch-version or --source, MKL/MAGMA too."
        ),
    }
)
@reports_errors
def fetch_deps(
    c: Context,
    cuda: str | None = None,
    mkl_version: str | None = None,
    magma_version: str | None = None,
    magma_debug: bool = False,
    no_magma: bool = False,
    mirror: str | None = None,
    from_dir: str | None = None,
    update_lock: bool = False,
    cache_dir: str | None = None,
    jobs: str | None = None,
    lock_file: str | None = None,
    pytorch_version: str | None = None,
    source: str | None = None,
    python: str | None = None,
    dry_run: bool = False,
) -> None:
    """Download, verify and extract MKL (and the MAGMA for --cuda, the Python for --python) into the cache.

    Prints where they are and the variables a build needs."""
    deps_commands.fetch_deps(
        c,
        cuda=cuda,
        mkl_version=mkl_version,
        magma_version=magma_version,
        magma_debug=magma_debug,
        no_magma=no_magma,
        mirror=mirror,
        from_dir=from_dir,
        update_lock=update_lock,
        cache_dir=cache_dir,
        jobs=jobs,
        lock_file=lock_file,
        pytorch_version=pytorch_version,
        source=source,
        python=python,
        dry_run=dry_run,
    )


@task(help=CLEAN_HELP, auto_shortflags=False)
@reports_errors
def clean(
    c: Context,
    deps: bool = False,
    downloads: bool = False,
    venvs: bool = False,
    sources: bool = False,
    compiler_cache: bool = False,
    logs: bool = False,
    pythons: bool = False,
    all: bool = False,
    older_than: str | None = None,
    dry_run: bool = False,
    cache_dir: str | None = None,
) -> None:
    """Remove what the flags say from the cache, sparing what a running build uses (waits briefly for a run that
    holds the cache); --dry-run lists each kind's size and paths."""
    deps_commands.clean(
        c,
        kinds={
            "deps": deps,
            "downloads": downloads,
            "venvs": venvs,
            "sources": sources,
            "compiler_cache": compiler_cache,
            "logs": logs,
            "pythons": pythons,
        },
        all_kinds=all,
        older_than=older_than,
        dry_run=dry_run,
        cache_dir=cache_dir,
    )


@task(help=BUILD_EXT_HELP)
@reports_errors
def build_ext(
    c: Context,
    path: str,
    mode: str = "inplace",
    clean: bool = False,
    force: bool = False,
    cuda: str | None = None,
    vs: str | None = None,
    toolset: str | None = None,
    compiler_cache: str | None = None,
    arch_list: str | None = None,
    jobs: str | None = None,
    pytorch_version: str | None = None,
    python: str | None = None,
    cache_dir: str | None = None,
    log_dir: str | None = None,
) -> None:
    """Build a PyTorch C++/CUDA extension's setup.py in the planned environment (vcvars, CUDA, compiler cache)."""
    commands.build_ext(
        c,
        path=path,
        mode=mode,
        clean=clean,
        force=force,
        cuda=cuda,
        vs=vs,
        toolset=toolset,
        compiler_cache=compiler_cache,
        arch_list=arch_list,
        jobs=jobs,
        pytorch_version=pytorch_version,
        python=python,
        cache_dir=cache_dir,
        log_dir=log_dir,
    )


@task(help=VERIFY_HELP)
@reports_errors
def verify(c: Context, python: str | None = None, cache_dir: str | None = None) -> None:
    """Import torch in a fresh Python outside the source tree and print what it has, as JSON (exit 6 on failure)."""
    commands.verify(c, python=python, cache_dir=cache_dir)


@task(help=DIAGNOSE_HELP)
@reports_errors
def diagnose(c: Context, logfile: str, json: bool = False, rules: str | None = None) -> None:
    """Show the first real error in LOGFILE and what each matching diagnosis rule says to do.

    Exits 0 when the log could be read, whatever it holds."""
    commands.diagnose(c, logfile=logfile, json=json, rules=rules)


@task(help=NIGHTLY_HELP, iterable=["only"], auto_shortflags=False)
@reports_errors
def nightly(
    c: Context,
    matrix: str | None = None,
    only: list[str] | None = None,
    force: bool = False,
    output_dir: str | None = None,
    keep_days: str | None = None,
    min_free_gb: str | None = None,
    cache_dir: str | None = None,
    mirror: str | None = None,
    matrix_json: bool = False,
    plan_file: str | None = None,
    previous: str | None = None,
    runner_labels: bool = False,
) -> None:
    """Build every matrix entry into a wheel (unchanged ones are skipped) and write the summary.

    One run at a time (a lock in the cache); exits 5 when an entry failed. --matrix-json plans a fleet's night
    instead (GitHub Actions' matrix), --runner-labels names this machine's runner labels."""
    nightly_commands.nightly(
        c,
        matrix=matrix,
        only=only,
        force=force,
        output_dir=output_dir,
        keep_days=keep_days,
        min_free_gb=min_free_gb,
        cache_dir=cache_dir,
        mirror=mirror,
        matrix_json=matrix_json,
        plan_file=plan_file,
        previous=previous,
        runner_labels=runner_labels,
    )


@task(help=NIGHTLY_MERGE_HELP, iterable=["part"], auto_shortflags=False)
@reports_errors
def nightly_merge(
    c: Context,
    part: list[str] | None = None,
    output_dir: str | None = None,
    previous: str | None = None,
    plan: str | None = None,
    keep_days: str | None = None,
) -> None:
    """Join a fleet's nightly parts and the last published channel into one channel (index, dashboard, summary).

    Exits 2, changing nothing, when two parts claim one entry."""
    nightly_commands.nightly_merge(
        c, part=part, output_dir=output_dir, previous=previous, plan=plan, keep_days=keep_days
    )


@task(help=NIGHTLY_SITE_HELP, auto_shortflags=False)
@reports_errors
def nightly_site(
    c: Context, output_dir: str, nights: str | None = None, stage: str | None = None, wheels: str = "all"
) -> None:
    """Make the nightly's pip index (simple/) and dashboard (index.html) again from OUTPUT_DIR.

    --stage also makes a copy to publish, in a new or empty folder."""
    nightly_commands.nightly_site(c, output_dir=output_dir, nights=nights, stage=stage, wheels=wheels)


for _task in (doctor, env, build, fetch_deps, clean, build_ext, verify, diagnose, nightly, nightly_merge, nightly_site):
    namespace.add_task(_task)
