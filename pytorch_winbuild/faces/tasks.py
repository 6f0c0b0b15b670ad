"""The Invoke tasks: each one parses its flags, calls the package, prints. Nothing else.

Defaults for every flag come from Invoke's configuration under the `winbuild` key, so they can
be set in invoke.yaml (project or user) or as INVOKE_WINBUILD_<NAME> environment variables
(e.g. INVOKE_WINBUILD_CUDA=9.0). A flag on the command line wins over both.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from invoke import Collection, Context
from invoke import task as invoke_task

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.faces.cli_errors import WinbuildTask, install_command_line_checks, reports_errors

WINBUILD_DEFAULTS: dict[str, Any] = {
    "cuda": "auto",
    "vs": "auto",
    "toolset": None,
    "generator": "auto",
    "compiler_cache": "auto",
    "arch_list": None,
    "jobs": None,
    "pytorch_version": None,
    "cache_dir": None,
    "mirror": None,
}


def _check_config_files_or_exit() -> None:
    """Invoke reads its config files after importing this module: check them first (see config_check)."""
    from pytorch_winbuild.faces.config_check import check_config_files, invoke_config_files
    from pytorch_winbuild.paths import REPO_ROOT

    try:
        check_config_files(invoke_config_files(REPO_ROOT, Path.home()), WINBUILD_DEFAULTS)
    except ConfigurationError as error:
        print(error.paragraph(), file=sys.stderr)
        raise SystemExit(error.exit_code) from None


def task(*args: Any, **kwargs: Any) -> Any:
    """Invoke's @task, making WinbuildTask tasks (no automatic short flag takes -h)."""
    return invoke_task(*args, klass=WinbuildTask, **kwargs)


_check_config_files_or_exit()
install_command_line_checks(WINBUILD_DEFAULTS)
namespace = Collection()
namespace.configure({"winbuild": WINBUILD_DEFAULTS})

PLAN_HELP = {
    "cuda": "CUDA to build with: X.Y (e.g. 9.0), 'cpu', or 'auto' (newest installed that an installed toolset accepts). Default: auto.",
    "vs": "Visual Studio product line: 2015, 2017, 2019, 2022, 2026 or auto (default).",
    "toolset": "MSVC toolset, short form such as 14.11 (selected with -vcvars_ver). Default: newest the CUDA accepts.",
    "generator": "CMake generator: ninja (parallel CUDA compiles), vs, or auto (ninja when installed; default).",
    "compiler_cache": "clcache, sccache, ccache (Linux), none, or auto (the era's preferred one that is installed; default).",
    "arch_list": "TORCH_CUDA_ARCH_LIST, e.g. '6.1' or '6.1;7.5+PTX': build only for your GPUs (much shorter builds).",
    "jobs": "MAX_JOBS: parallel compile jobs (lower it when the machine runs out of memory).",
    "pytorch_version": "PyTorch version being built (chooses the era's variables); default: the source tree's version.txt, else the newest era.",
    "source": "PyTorch source folder (default: the current folder when it holds PyTorch's setup.py). Used for its version and path checks.",
    "cache_dir": "pytorch-winbuild cache folder (downloads, MKL/MAGMA, compiler caches). Default: cache/ of the repo, or the user cache folder.",
    "host": "Plan for the machine described by this facts file (written by `invoke doctor --json`) instead of probing this one.",
    "mkl_version": "MKL archive version (default: the era's, as its Windows CI used it; see build_config/eras.toml).",
    "magma_version": "MAGMA version (default: the newest the era uses that exists for the CUDA).",
    "magma_debug": "Use MAGMA's debug build (for DEBUG=1 builds of PyTorch).",
    "no_magma": "Build without MAGMA even for CUDA builds.",
}


def _setting(c: Context, name: str, flag: Any) -> Any:
    """A flag's value, else the `winbuild.<name>` configuration value (checked: a `-f` file or an
    INVOKE_WINBUILD_* variable reaches here without config_check); null means the default."""
    if flag is not None:
        return flag
    from pytorch_winbuild.faces.config_check import check_setting

    value = c.config.winbuild.get(name)
    check_setting(
        name, value, f"configuration value winbuild.{name} (invoke.yaml, -f FILE or INVOKE_WINBUILD_{name.upper()})"
    )
    if value is None or (
        isinstance(value, str) and not value.strip()
    ):  # `mirror: ''` / INVOKE_WINBUILD_MIRROR= unset it
        return WINBUILD_DEFAULTS.get(name)
    return value


def _label(name: str, flag: Any) -> str:
    """How an error names a value: the flag when it was given, else the configuration key."""
    return f"--{name.replace('_', '-')}" if flag is not None else f"winbuild.{name}"


def _example(label: str, value: str) -> str:
    """`--jobs 4` for a flag; `jobs: 4` in invoke.yaml (or INVOKE_WINBUILD_JOBS=4) for a setting."""
    if label.startswith("--"):
        return f"{label} {value}"
    name = label.removeprefix("winbuild.")
    return f"`{name}: {value}` in invoke.yaml (or INVOKE_WINBUILD_{name.upper()}={value})"


def _whole_number(value: Any, label: str, *, minimum: int = 1, unit: str = "") -> int | None:
    """A whole-number flag or configuration value (text from the command line); None when absent."""
    if value is None:
        return None
    fix = f"pass a whole number, {minimum} or more, e.g. {_example(label, '4')}, or leave it out for the default."
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigurationError(f"{label} {value!r} is not a number.", fix=fix)
    text = value.strip() if isinstance(value, str) else value
    try:
        number = int(text)
    except ValueError:
        try:
            float(text)
        except ValueError:
            raise ConfigurationError(f"{label} {value!r} is not a number.", fix=fix) from None
        raise ConfigurationError(f"{label} {value!r} is not a whole number.", fix=fix) from None
    if number < minimum:
        raise ConfigurationError(f"{label} {number}: expected {minimum} or more{unit}.", fix=fix)
    return number


def _finite_number(value: Any, label: str, *, minimum: float = 0.0) -> float | None:
    """A decimal flag (text from the command line): finite, `minimum` or more; None when absent."""
    if value is None:
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"{label} {value!r} is not a number.",
            fix=f"pass a number such as {label} 40, or leave {label} out for its default.",
        ) from None
    if not math.isfinite(number):
        raise ConfigurationError(
            f"{label} {value!r} is not a finite number.",
            fix=f"pass a number such as {label} 40, or leave {label} out for its default.",
        )
    if number < minimum:
        raise ConfigurationError(
            f"{label} {value}: expected {minimum:g} or more.",
            fix=f"pass a number such as {label} 40, or leave {label} out for its default.",
        )
    return number


def _path_flag(value: str | None, label: str) -> str | None:
    """A path flag: absent (None) or text; an empty path would silently mean the current folder."""
    if value is not None and not value.strip():
        raise ConfigurationError(f"{label} is empty.", fix=f"give {label} a path, or leave it out for its default.")
    return value


def _writable_folder(folder: Path, label: str) -> None:
    """Prove, before any work starts and without leaving anything behind, that the folder can be
    written: a file is made (and removed at once) in it, or in the nearest existing folder above it
    when it does not exist yet (the task creates it later)."""
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigurationError(
            f"{label} {folder}: {existing} is a file, not a folder.", fix=f"pass a folder as {label}."
        )
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".pytorch-winbuild-"):
            pass
    except OSError as exc:
        where = "" if existing == folder else f", since {existing} cannot be written and it would be created there"
        raise ConfigurationError(
            f"{label} {folder} cannot be written ({exc.strerror or exc}){where}.",
            fix=f"make the folder writable for this user, or pass another one as {label}.",
        ) from None


def _facts(host: str | None):
    from pytorch_winbuild.facts.model import load_facts
    from pytorch_winbuild.facts.probe import probe

    return load_facts(host) if host else probe()


def _cache_dir(c: Context, flag: str | None) -> Path:
    from pytorch_winbuild.paths import default_cache_dir

    value = _setting(c, "cache_dir", _path_flag(flag, "--cache-dir"))
    return Path(value) if value else default_cache_dir()


# The plan's flags, shared by env and build (build-ext passes a subset). Invoke needs each task to
# spell out its parameters; the tasks hand them over as `arguments=locals()` and the plan reads
# these names, so a new plan flag is added here and to the signatures, and nowhere else.
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
)


def _this_os() -> str:
    return "windows" if os.name == "nt" else "linux"


def _plan_cache_dir(c: Context, flag: str | None, facts: Any) -> tuple[PurePath, str | None]:
    """The cache folder of the machine the plan is for, and a note when it was inferred.

    On this machine: --cache-dir, the configuration, or the default. For a --host plan of another
    OS the folder must be that machine's: a --cache-dir in its form, else the facts file's
    `cache_dir`, else the per-user default next to its TEMP (%LOCALAPPDATA%\\pytorch-winbuild)."""
    given = _setting(c, "cache_dir", flag)
    if facts.os == _this_os():
        return (Path(given) if given else _default_cache_dir()), None
    path_type: type[PurePath] = PureWindowsPath if facts.os == "windows" else PurePosixPath
    example = (
        "C:\\Users\\you\\AppData\\Local\\pytorch-winbuild"
        if facts.os == "windows"
        else "/home/you/.cache/pytorch-winbuild"
    )
    if given:
        folder = path_type(given)
        if not folder.is_absolute() or (facts.os == "windows" and "/" in str(given)):
            raise ConfigurationError(
                f"--cache-dir {given!r} is not an absolute {facts.os} path, and this plan is for a {facts.os} machine.",
                fix=f"pass that machine's folder, e.g. --cache-dir {example}.",
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
            f"Cache folder {folder}: the facts file names none, so the plan takes the per-user default beside its TEMP (pass --cache-dir to change it).",
        )
    raise ConfigurationError(
        f"the facts file does not say where pytorch-winbuild keeps its cache on that {facts.os} machine.",
        fix=f"pass --cache-dir with that machine's folder, e.g. --cache-dir {example}.",
    )


def _default_cache_dir() -> Path:
    from pytorch_winbuild.paths import default_cache_dir

    return default_cache_dir()


def _make_plan(
    c: Context,
    *,
    host: str | None,
    source: str | None,
    mode: str = "install",
    libtorch: bool = False,
    source_is_pytorch: bool = True,
    arguments: dict[str, Any],
):
    """Facts (probed or from --host) × knowledge × options → plan. `arguments` holds the task's
    flags by name (a task's `locals()`); flags the task does not have count as not given.
    `source_is_pytorch` is False for build-ext, whose folder is an extension, not PyTorch."""
    from pytorch_winbuild.deps.cache import deps_dir, installed_path
    from pytorch_winbuild.facts.source_tree import default_source, is_pytorch_source, read_source_version
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.planning.plan import Options, make_plan

    knowledge = load_knowledge()
    facts = _facts(_path_flag(host, "--host"))
    source_dir = Path(source) if _path_flag(source, "--source") is not None else default_source(Path.cwd())
    if source and not source_dir.is_dir():
        raise ConfigurationError(f"--source {source} is not a folder.", fix="pass the folder of a PyTorch checkout.")
    flags = {name: arguments.get(name) for name in PLAN_FLAGS}
    cache_dir, cache_note = _plan_cache_dir(c, flags["cache_dir"], facts)
    options = Options(
        cuda=str(_setting(c, "cuda", flags["cuda"])),
        vs=str(_setting(c, "vs", flags["vs"])),
        toolset=_setting(c, "toolset", flags["toolset"]),
        generator=str(_setting(c, "generator", flags["generator"])),
        compiler_cache=str(_setting(c, "compiler_cache", flags["compiler_cache"])),
        arch_list=_setting(c, "arch_list", flags["arch_list"]),
        jobs=_whole_number(
            _setting(c, "jobs", flags["jobs"]), _label("jobs", flags["jobs"]), unit=" parallel compile jobs (MAX_JOBS)"
        ),
        pytorch_version=_setting(c, "pytorch_version", flags["pytorch_version"]),
        mode=mode,
        libtorch=libtorch,
        cache_dir=str(cache_dir),
        cache_dir_given=bool(_setting(c, "cache_dir", flags["cache_dir"])) or facts.os != _this_os(),
        source_dir=str(source_dir) if source_dir else None,
        mkl_version=flags["mkl_version"],
        magma_version=flags["magma_version"],
        magma_debug=bool(flags["magma_debug"]),
        no_magma=bool(flags["no_magma"]),
    )
    foreign = facts.os != _this_os()

    def locate(archive: Any) -> tuple[str, bool]:
        # Another machine's cache cannot be looked into from here: its archives count as missing.
        if foreign:
            return str(deps_dir(cache_dir, archive)), False  # type: ignore[arg-type]
        return str(deps_dir(Path(cache_dir), archive)), installed_path(Path(cache_dir), archive) is not None

    reads_version = source_dir is not None and source_is_pytorch and is_pytorch_source(source_dir)
    source_version = read_source_version(source_dir) if reads_version and source_dir else None
    notes = (cache_note,) if cache_note else ()
    return make_plan(
        options, facts, knowledge, source_version=source_version, locate_archive=locate, caller_notes=notes
    )


def _output_file(output: str | None) -> Path | None:
    """--output checked before any work: a file in an existing folder, not a folder itself."""
    if _path_flag(output, "--output") is None:
        return None
    target = Path(output)  # type: ignore[arg-type]
    if target.is_dir():
        raise ConfigurationError(
            f"--output {output} is a folder.", fix=f"name a file, e.g. --output {target / 'build_env.bat'}."
        )
    folder = target.parent
    if not folder.is_dir():
        raise ConfigurationError(
            f"--output {output}: the folder {folder} does not exist.",
            fix="create the folder first, or name a file in an existing one.",
        )
    return target


def _write(text: str, output: Path | None) -> None:
    """Print, or write the file as UTF-8 (PowerShell's `>` would write UTF-16, which cmd cannot run).

    The file is written whole or not at all: a temporary file next to it, renamed over it at the end,
    so an error or Ctrl-C never leaves half a script that looks complete."""
    if output is None:
        sys.stdout.write(text)
        return
    target = Path(os.path.realpath(output)) if output.is_symlink() else output
    temp: str | None = None
    try:
        handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        if target.exists():
            shutil.copymode(target, temp)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temp, 0o666 & ~umask)
        os.replace(temp, target)
        temp = None
    except OSError as exc:
        raise ConfigurationError(
            f"--output {output} cannot be written ({exc.strerror or exc}); nothing was written.",
            fix="pass a file in a folder you can write to.",
        ) from None
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
    print(f"wrote {output}", file=sys.stderr)


@task(
    help={
        "host": PLAN_HELP["host"],
        "json": "Write this machine's facts as JSON (the file --host reads; safe to share: no credentials, no environment dump).",
    }
)
@reports_errors
def doctor(c: Context, host: str | None = None, json: bool = False) -> None:
    """Show what is installed and what is missing for building PyTorch, with the fix for each."""
    from pytorch_winbuild.faces.doctor import doctor_checks, render_doctor
    from pytorch_winbuild.knowledge.model import load_knowledge

    if _path_flag(host, "--host") is not None:
        facts, notes = _facts(host), ()
    else:
        from pytorch_winbuild.facts.probe import probe_report

        report = probe_report()
        # The cache folder is configuration, not something the probe finds: a --host plan made
        # from this file puts MKL/MAGMA where this machine's pytorch-winbuild keeps them.
        facts, notes = replace(report.facts, cache_dir=str(_cache_dir(c, None))), report.notes
    if json:
        sys.stdout.write(facts.to_json())
        return
    checks = doctor_checks(facts, load_knowledge())
    sys.stdout.write(render_doctor(facts, checks, notes))
    missing = [check.topic for check in checks if check.status == "missing"]
    if missing:
        raise ToolchainError(f"missing: {', '.join(missing)}.", fix="see the fix lines above.")


ENV_HELP = {
    **PLAN_HELP,
    "format": "table (with reasons; default), json, bat (cmd.exe), ps1 (PowerShell) or sh (Linux plans).",
    "output": "Write to this file (UTF-8) instead of standard output.",
}


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
    from pytorch_winbuild.faces.render import render

    target = _output_file(output)
    plan = _make_plan(c, host=host, source=source, arguments=locals())
    _write(render(plan, format), target)


BUILD_HELP = {
    **PLAN_HELP,
    "dry_run": "Show the plan (Visual Studio, toolset, vcvars call, CUDA, generator, cache, every variable with its reason, the commands) and stop.",
    "format": "Output format of --dry-run: table (default), json, bat, ps1 or sh.",
    "mode": "install (python setup.py install, the seeds' default), develop, or wheel (bdist_wheel into dist/).",
    "source": "PyTorch checkout to build (default: the current folder when it holds PyTorch's setup.py). With --repo: the folder to clone into (default: <cache>/src/<name>).",
    "clean": "Remove the source's build/ folder first (a full rebuild; the compiler cache still helps).",
    "repo": "Git URL to clone (recursive submodules) or, when the clone exists, fetch; then check out --ref.",
    "ref": "With --repo: branch, tag or commit to check out (default: the remote's default branch).",
    "libtorch": "Build LibTorch only (python tools/build_libtorch.py) instead of the --mode command.",
    "log_dir": "Folder for this run's log and JSON report (default: <cache>/logs).",
    "no_verify": "Skip the check that imports the result in a fresh Python outside the source tree.",
}


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
    mkl_version: str | None = None,
    magma_version: str | None = None,
    magma_debug: bool = False,
    no_magma: bool = False,
) -> None:
    """Build PyTorch from source in the planned environment (--dry-run: show the plan only)."""
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
        _path_flag(value, label)
    if repo:
        from pytorch_winbuild.builder.source import check_ref, check_repo

        check_repo(repo)  # a dry run refuses what the real build would, before any plan is shown
        if ref:
            check_ref(ref)
    folder = _cache_dir(c, cache_dir)
    if not dry_run:
        _writable_folder(folder, "--cache-dir")
        if log_dir:
            _writable_folder(Path(log_dir), "--log-dir")
    checkout = None
    if repo:
        from pytorch_winbuild.builder import acquire_source, clone_destination

        destination = clone_destination(repo, Path(source) if source else None, folder)
        if not dry_run:
            checkout = acquire_source(repo=repo, ref=ref, destination=destination)
        source = (
            str(destination) if destination.is_dir() else None
        )  # --dry-run before the first clone plans without a source
    plan = _make_plan(c, host=host, source=source, mode=mode, libtorch=libtorch, arguments=locals())
    if dry_run:
        sys.stdout.write(render(plan, format))
        return
    from pytorch_winbuild.builder import (
        BuildRequest,
        default_log_dir,
        existing_checkout,
        run_build,
    )  # not needed for --dry-run

    if checkout is None:
        source_dir = Path(source) if source else _default_source()
        checkout = existing_checkout(source_dir)
    request = BuildRequest(
        checkout=checkout,
        cache_dir=folder,
        log_dir=Path(log_dir) if log_dir else default_log_dir(folder),
        mode=mode,
        libtorch=libtorch,
        clean=clean,
        verify=not no_verify,
        mirror=_setting(c, "mirror", None),
    )
    run_build(plan, request)


def _default_source() -> Path:
    """The current folder when it is a PyTorch checkout; a real build needs one."""
    from pytorch_winbuild.facts.source_tree import default_source

    found = default_source(Path.cwd())
    if found is None:
        raise ConfigurationError(
            f"there is nothing to build: {Path.cwd()} is not a PyTorch checkout.",
            fix="pass --source DIR (a PyTorch checkout) or --repo URL [--ref TAG] to clone one.",
        )
    return found


namespace.add_task(doctor)
namespace.add_task(env)
namespace.add_task(build)


# fetch-deps and clean: MKL/MAGMA archives in the cache (pytorch_winbuild/deps, build_config/deps.toml).

FETCH_DEPS_HELP = {
    "cuda": "CUDA version of the build, e.g. 9.0 or 10.1: adds the MAGMA built for it. 'cpu' for a CPU-only build. Without it only MKL is fetched.",
    "mkl_version": "MKL archive version: 2018.2.185 (PyTorch 0.4–1.1), 2019.4.245 (1.2–1.6), 2020.0.166 (1.7–1.13), 2020.2.254 (2.x). Default: the era's.",
    "magma_version": "MAGMA version, or a comma-separated preference list (the first one built for your CUDA wins). Default: the newest one for your CUDA.",
    "magma_debug": "Fetch MAGMA's debug build (for DEBUG=1 builds of PyTorch).",
    "no_magma": "Build without MAGMA: fetch MKL only, even with --cuda.",
    "mirror": "Base URL of a flat folder holding the same file names as the public bucket: http(s)://... or file:///... (also winbuild.mirror / INVOKE_WINBUILD_MIRROR).",
    "from_dir": "Folder holding archives you downloaded by hand: take them from there, download nothing.",
    "update_lock": "Accept archives whose SHA-256 differs from this cache's first-use record (<cache>/deps.lock) and record the new one; checksums shipped in build_config/deps.lock or deps.toml are never overridden.",
    "cache_dir": PLAN_HELP["cache_dir"],
    "jobs": "Archives downloaded in parallel (default 0: one per archive, at most 4).",
    "lock_file": "Lock file for first-seen checksums (default: deps.lock in the cache folder); build_config/deps.lock is only read unless named here.",
    "pytorch_version": "PyTorch version to fetch for: its era chooses the default MKL and MAGMA versions (default: the source tree's version, else the newest era that builds with --cuda).",
    "source": PLAN_HELP["source"],
    "dry_run": "Show what would be fetched (each archive, from where, to which folder, whether it is already there) and stop.",
}


def _fetch_era(c: Context, pytorch_version: str | None, source: str | None, cuda: str):
    """The era whose MKL/MAGMA defaults a fetch takes: the source tree's version, else
    --pytorch-version, else the newest era that builds with --cuda (no compiler is needed to fetch,
    so the machine's Python and Visual Studio do not narrow it)."""
    from pytorch_winbuild.facts.source_tree import default_source, is_pytorch_source, read_source_version
    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.planning.era_choice import resolve_era

    folder = Path(source) if _path_flag(source, "--source") is not None else default_source(Path.cwd())
    if source is not None and not folder.is_dir():
        raise ConfigurationError(f"--source {source} is not a folder.", fix="pass the folder of a PyTorch checkout.")
    found = read_source_version(folder) if folder and is_pytorch_source(folder) else None
    return resolve_era(
        load_knowledge(),
        None,
        cuda=cuda,
        pytorch_version=_setting(c, "pytorch_version", pytorch_version),
        source_version=found,
    )


@task(help=FETCH_DEPS_HELP)
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
    dry_run: bool = False,
) -> None:
    """Download, verify and extract MKL (and the MAGMA for --cuda) into the cache; print where they are and the variables a build needs."""
    from pytorch_winbuild.deps.catalog import magma_preference, select_archives
    from pytorch_winbuild.deps.fetch import describe_fetch, fetch_archives, format_summary

    downloads = _whole_number(jobs, "--jobs", minimum=0, unit=" (0: one per archive, at most 4)") or 0
    for value, label in ((from_dir, "--from-dir"), (lock_file, "--lock-file"), (mirror, "--mirror")):
        _path_flag(value, label)
    cuda_value = str(_setting(c, "cuda", cuda) or "auto").lower()
    cuda_given = cuda_value != "auto"
    if cuda_given and cuda_value != "cpu":
        from pytorch_winbuild.deps.catalog import cuda_prefix

        cuda_prefix(cuda_value)  # a malformed --cuda is named before any era is looked for
    choice = _fetch_era(c, pytorch_version, source, cuda_value)
    archives = select_archives(
        cuda=cuda_value if cuda_given and cuda_value != "cpu" else None,
        mkl_version=mkl_version or choice.era.mkl,
        magma_versions=magma_preference(magma_version) or list(choice.era.magma),
        magma_debug=magma_debug,
        no_magma=no_magma,
    )
    source_mirror = mirror or (
        None if from_dir else _setting(c, "mirror", None)
    )  # a configured mirror gives way to --from-dir
    folder = _cache_dir(c, cache_dir)
    other_machine = os.name != "nt" and PureWindowsPath(str(folder)).drive  # a Windows plan's command, read on Linux
    if dry_run:
        defaults = (
            ""
            if (mkl_version and (magma_version or no_magma or not cuda_given))
            else f"Versions not given take PyTorch {choice.era.name}'s defaults (era from {choice.source}).\n"
        )
        shown = PureWindowsPath(str(folder)) if other_machine else folder
        print(defaults + describe_fetch(archives, cache_dir=shown, mirror=source_mirror, from_dir=from_dir), end="")
        return
    if other_machine:
        raise ConfigurationError(
            f"--cache-dir {folder} is a Windows folder, and this machine is not Windows.",
            fix="run the command on that Windows machine, add --dry-run to see what it would fetch, or pass a folder of this machine.",
        )
    _writable_folder(folder, "--cache-dir")
    result = fetch_archives(
        archives,
        cache_dir=folder,
        mirror=source_mirror,
        from_dir=from_dir,
        update_lock=update_lock,
        lock_path=Path(lock_file) if lock_file else None,
        jobs=downloads,
    )
    print(format_summary(result))
    if not cuda_given and not no_magma:
        print(
            "\nMAGMA was not fetched: which one depends on the CUDA version. Pass --cuda X.Y (e.g. --cuda 10.1) for a CUDA build, or --cuda cpu to say the build has no CUDA."
        )


@task(
    help={
        "deps": "Remove the extracted MKL/MAGMA folders (cache/deps); the downloaded archives stay, so the next fetch-deps re-extracts offline.",
        "downloads": "Remove the downloaded archives and partial downloads (cache/downloads).",
        "cache_dir": PLAN_HELP["cache_dir"],
    }
)
@reports_errors
def clean(c: Context, deps: bool = False, downloads: bool = False, cache_dir: str | None = None) -> None:
    """Remove what the flags say from the cache (waits briefly for a run that is using it)."""
    from pytorch_winbuild.deps.cache import clean as clean_cache
    from pytorch_winbuild.deps.progress import human_size, log_line

    if not (deps or downloads):
        raise ConfigurationError(
            "nothing to clean was named.",
            fix="pass --deps (extracted MKL/MAGMA), --downloads (downloaded archives), or both.",
        )
    folder = _cache_dir(c, cache_dir)
    if folder.exists():
        _writable_folder(folder, "--cache-dir")
    removed = clean_cache(folder, deps=deps, downloads=downloads, timeout=10.0, log=log_line)
    for item in removed:
        print(f"removed {item.path} ({human_size(item.bytes)})")
    if not removed:
        print(f"nothing to remove in {folder}")


namespace.add_task(fetch_deps)
namespace.add_task(clean)


# build-ext and verify: a PyTorch extension in the planned environment, and the post-build check.

BUILD_EXT_HELP = {
    **{name: PLAN_HELP[name] for name in ("cuda", "vs", "toolset", "compiler_cache", "arch_list", "jobs", "cache_dir")},
    "path": "Folder of the extension (the one holding its setup.py).",
    "pytorch_version": "PyTorch version the extension builds against (chooses the era's variables). Default: the installed torch's version.",
    "mode": "inplace (python setup.py build_ext --inplace; default), develop, or install.",
    "clean": "Remove the extension's build/ folder first (a full rebuild; the compiler cache still helps).",
    "log_dir": "Folder for this run's log and JSON report (default: <cache>/logs).",
}


def _installed_torch_version() -> str:
    """The torch an extension builds against, read from its metadata (importing torch takes seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        raise ToolchainError(
            f"torch is not installed in {sys.executable}, and an extension builds against the installed torch.",
            fix="install PyTorch into this Python first (pip install torch==<version>, or `invoke build`).",
        ) from None


@task(help=BUILD_EXT_HELP)
@reports_errors
def build_ext(
    c: Context,
    path: str,
    mode: str = "inplace",
    clean: bool = False,
    cuda: str | None = None,
    vs: str | None = None,
    toolset: str | None = None,
    compiler_cache: str | None = None,
    arch_list: str | None = None,
    jobs: str | None = None,
    pytorch_version: str | None = None,
    cache_dir: str | None = None,
    log_dir: str | None = None,
) -> None:
    """Build a PyTorch C++/CUDA extension's setup.py in the planned environment (vcvars, CUDA, compiler cache)."""
    from pytorch_winbuild.builder import ExtensionRequest, default_log_dir, run_build_ext

    folder = Path(_path_flag(path, "PATH") or "")
    if not folder.is_dir():
        raise ConfigurationError(f"{path} is not a folder.", fix="pass the folder that holds the extension's setup.py.")
    cache = _cache_dir(c, cache_dir)
    _writable_folder(cache, "--cache-dir")
    if _path_flag(log_dir, "--log-dir"):
        _writable_folder(Path(log_dir), "--log-dir")  # type: ignore[arg-type]
    version = _setting(c, "pytorch_version", pytorch_version) or _installed_torch_version()
    plan = _make_plan(
        c,
        host=None,
        source=str(folder),
        source_is_pytorch=False,
        arguments={**locals(), "pytorch_version": version, "cache_dir": str(cache)},
    )
    request = ExtensionRequest(
        path=folder,
        cache_dir=cache,
        log_dir=Path(log_dir) if log_dir else default_log_dir(cache),
        mode=mode,
        clean=clean,
    )
    run_build_ext(plan, request)


@task(help={"python": "The Python whose torch to check (default: the one running this task)."})
@reports_errors
def verify(c: Context, python: str | None = None) -> None:
    """Import torch in a fresh Python outside the source tree and print what it has, as JSON (exit 6 on failure)."""
    import json

    from pytorch_winbuild.builder.verify import check_torch, failure_error

    result = check_torch(_interpreter(python))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if not result["ok"]:
        raise failure_error(result)


def _interpreter(python: str | None) -> str | None:
    """--python checked before it is started: a bad path is bad input (2), not a failed check (6)."""
    if _path_flag(python, "--python") is None:
        return None
    assert python is not None
    if shutil.which(python):
        return python
    fix = "pass the path of a Python executable (e.g. C:\\Python311\\python.exe or /usr/bin/python3) or a name on PATH, or leave --python out for the Python running this task."
    candidate = Path(python)
    if candidate.is_dir():
        raise ConfigurationError(f"--python {python} is a folder, not a Python executable.", fix=fix)
    if candidate.is_file():
        raise ConfigurationError(f"--python {python} is not executable.", fix=fix)
    raise ConfigurationError(
        f"--python {python}: no such file{' or command on PATH' if os.sep not in python and '/' not in python else ''}.",
        fix=fix,
    )


namespace.add_task(build_ext)
namespace.add_task(verify)


# diagnose: first-error triage and the diagnosis rules of build_config/diagnosis.toml, on any saved log.


@task(
    help={
        "logfile": "The saved log to explain: a build log, pip or conda output, a failed import or verify run (UTF-8, UTF-16 or a console code page).",
        "json": "Print the result as JSON (first error block and matching rules, as the build report stores them) instead of text.",
        "rules": "Diagnosis rules file to use instead of build_config/diagnosis.toml.",
    }
)
@reports_errors
def diagnose(c: Context, logfile: str, json: bool = False, rules: str | None = None) -> None:
    """Show the first real error in LOGFILE and what each matching diagnosis rule says to do (exit 0 when the log could be read)."""
    from pytorch_winbuild.diagnosis.rules import load_rules
    from pytorch_winbuild.diagnosis.triage import triage_log

    result = triage_log(logfile, rules=load_rules(rules) if rules else None)
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure:  # a log's stray characters must not crash the report on a code-page console
        reconfigure(errors="replace")
    print(result.to_json() if json else result.to_text())


namespace.add_task(diagnose)


# nightly: wheels over the matrix of build_config/nightly.toml (pytorch_winbuild/nightly).

NIGHTLY_HELP = {
    "matrix": "Matrix file (default: build_config/nightly.toml): the entries to build and the nightly's settings.",
    "only": "Build only this entry (repeat the flag for several). Default: every entry of the matrix.",
    "force": "Build entries even when their source revision and configuration are unchanged since their last success.",
    "output_dir": "Folder for wheels, logs, reports and summaries, as <dir>/<YYYY-MM-DD>/<entry>/ (default: the matrix's output_dir, dist/nightly).",
    "keep_days": "Retention: remove date folders older than this many days, except each entry's newest wheel (default: the matrix's keep_days).",
    "min_free_gb": "Free disk space, in GB, every entry needs before it starts (default: each entry's min_free_gb, else the matrix's).",
    "cache_dir": PLAN_HELP["cache_dir"] + " Holds the entries' clones (nightly/src) and the nightly lock.",
    "mirror": FETCH_DEPS_HELP["mirror"],
}


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
) -> None:
    """Build every matrix entry into a wheel (unchanged ones are skipped), one run at a time; write the summary; exit 5 when an entry failed."""
    from pytorch_winbuild.nightly import NightlyOptions, run_nightly

    for value, label in ((matrix, "--matrix"), (output_dir, "--output-dir"), (mirror, "--mirror")):
        _path_flag(value, label)
    if any(not name.strip() for name in only or ()):
        raise ConfigurationError(
            "--only is empty.", fix="name a matrix entry, e.g. --only cu124-py311, or leave --only out for every entry."
        )
    keep = _whole_number(keep_days, "--keep-days", unit=" days")
    min_free = _finite_number(min_free_gb, "--min-free-gb")
    folder = _cache_dir(c, cache_dir)
    _writable_folder(folder, "--cache-dir")
    if output_dir:
        _writable_folder(Path(output_dir), "--output-dir")
    options = NightlyOptions(
        matrix=Path(matrix) if matrix else None,
        cache_dir=folder,
        only=tuple(only or ()),
        force=force,
        output_dir=Path(output_dir) if output_dir else None,
        keep_days=keep,
        min_free_gb=min_free,
        mirror=mirror or _setting(c, "mirror", None),
    )
    run_nightly(options)


namespace.add_task(nightly)
