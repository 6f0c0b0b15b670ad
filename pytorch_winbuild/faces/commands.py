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
from contextlib import AbstractContextManager, ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from invoke import Context

from pytorch_winbuild.errors import ConfigurationError, ToolchainError
from pytorch_winbuild.faces.flags import (
    FlagValue,
    cache_choice,
    flag_label,
    output_file,
    path_flag,
    python_flag,
    started_program,
    text_setting,
    writable_folder,
    write_output,
)
from pytorch_winbuild.faces.plan_request import CloneChoice, facts_for, plan_from_flags, prepare_planning
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.text.terminal_text import echoed, terminal_line

if TYPE_CHECKING:
    from pytorch_winbuild.builder.extension_key import ExtensionKey
    from pytorch_winbuild.builder.source import SourceCheckout
    from pytorch_winbuild.faces.extension_python import ExtensionPython
    from pytorch_winbuild.facts.model import Facts
    from pytorch_winbuild.planning.plan_model import Plan


def tag_cache(folder: Path) -> None:
    """Mark the cache a task is about to write as pytorch-winbuild's (CACHEDIR.TAG), so `clean` knows it."""
    from pytorch_winbuild.deps.cache import tag_cache as write_tag

    write_tag(folder)


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


def _plan_command(host: str | None) -> str:
    """The command that plans the machine doctor just looked at, as this shell runs it: the console
    script outside the repo (where `invoke` finds no tasks.py), the same facts file with --host."""
    from pytorch_winbuild.planning.commands_plan import quote_argument

    shell = Platform.running()
    return f"{started_program()} build --dry-run" + (f" --host {quote_argument(shell, host)}" if host else "")


def _plan_problem(c: Context, host: str | None, facts: Facts) -> tuple[str | None, tuple[str, ...]]:
    """Why the plan doctor suggests would fail (doctor makes it, with the same facts), or None; and, on this
    machine, whether the drives of the source's build folder and the cache hold what that plan needs (the build's
    own preflight: an error when the documented needs do not fit, warnings when the estimates do not)."""
    from pytorch_winbuild.errors import WinbuildError

    cache = cache_choice(c, None)
    try:
        plan = plan_from_flags(c, host=host, source=None, cache=cache, arguments={}, facts=facts)
        if host is not None:
            return None, ()
        from pytorch_winbuild.builder.preflight import check_disk, disk_needs
        from pytorch_winbuild.facts.source_tree import default_source
        from pytorch_winbuild.knowledge.model import load_knowledge

        source = default_source(Path.cwd()) or cache.folder / "src" / "pytorch"  # where --repo clones by default
        needs = disk_needs(plan, load_knowledge(), source, cache.folder)
        return None, tuple(check_disk(needs))
    except WinbuildError as error:
        return error.paragraph(), ()


def doctor(c: Context, *, host: str | None, json: bool, output: str | None) -> None:
    """The `doctor` task; `--output FILE` writes the facts (`--json`) as UTF-8, whatever the shell's `>` would."""
    from pytorch_winbuild.faces.doctor import doctor_checks, render_doctor
    from pytorch_winbuild.knowledge.model import load_knowledge

    if output is not None and not json:
        raise ConfigurationError(
            "doctor's --output writes the facts file, which needs --json (the report is for reading); nothing was "
            "written.",
            fix="add --json to write the facts file that --host reads (invoke doctor --json --output FILE), or leave "
            "--output out to read the report.",
        )
    target = output_file(output, example="facts.json")
    notes: tuple[str, ...] = ()
    if path_flag(host, "--host") is not None:
        facts = facts_for(host)
    else:
        from pytorch_winbuild.facts.probe import probe_report

        report = probe_report()
        # The cache folder is configuration, not something the probe finds: a --host plan made
        # from this file puts MKL/MAGMA where this machine's pytorch-winbuild keeps them.
        facts, notes = replace(report.facts, cache_dir=str(cache_choice(c, None).folder)), report.notes
    if json:
        write_output(facts.to_json(), target, example="facts.json")
        return
    checks = doctor_checks(facts, load_knowledge())
    missing = [check.topic for check in checks if check.status == "missing"]
    problem, disk = (None, ()) if missing else _plan_problem(c, host, facts)
    shown = render_doctor(facts, checks, notes, next_step=_plan_command(host), plan_problem=problem, disk=disk)
    sys.stdout.write(shown)
    if missing:
        raise ToolchainError(f"missing: {', '.join(missing)}.", fix="see the fix lines above.")
    if problem:
        raise ToolchainError("this machine's default plan fails.", fix="see the last line above.")


def env(
    c: Context,
    *,
    source: str | None,
    host: str | None,
    format: str,
    output: str | None,
    cache_dir: str | None,
    **plan_flags: FlagValue,
) -> None:
    """The `env` task; `cache_dir` and `plan_flags` are the PLAN_FLAGS, by name."""
    from pytorch_winbuild.faces.render import render

    target = output_file(output)
    cache = cache_choice(c, cache_dir)
    plan = plan_from_flags(
        c, host=host, source=source, cache=cache, task="env", arguments={**plan_flags, "cache_dir": cache_dir}
    )
    write_output(render(plan, format, output), target)


def _check_build_flags(
    *, source: str | None, host: str | None, dry_run: bool, repo: str | None, ref: str | None, log_dir: str | None
) -> None:
    """What `build` refuses before anything else: a dry run refuses what the real build would."""
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

        check_repo(repo)  # before any plan is shown
        if ref:
            check_ref(ref)


def _cloned_source(
    repo: str, ref: str | None, source: str | None, cache: Path, claims: ExitStack
) -> tuple[SourceCheckout, str]:
    """--repo of a real build: the checkout, cloned or fetched now into --source or the cache, and its folder, claimed
    for the build (`claims`) before git touches it, so `clean --sources` leaves it alone."""
    from pytorch_winbuild.builder.preflight import check_disk, checkout_needs
    from pytorch_winbuild.builder.source import acquire_source, clone_destination
    from pytorch_winbuild.deps.in_use import claimed
    from pytorch_winbuild.deps.progress import log_line
    from pytorch_winbuild.knowledge.model import load_knowledge

    destination = clone_destination(repo, Path(source).absolute() if source else None, cache.absolute())
    claims.enter_context(claimed(cache, [destination], log=log_line))
    for warning in check_disk(checkout_needs(destination, load_knowledge())):  # before the clone starts
        print(terminal_line(f"-- warning: {warning}"), flush=True)
    checkout = acquire_source(repo=repo, ref=ref, destination=destination)
    return checkout, str(checkout.path)


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
    cache_dir: str | None,
    **plan_flags: FlagValue,
) -> None:
    """The `build` task; `cache_dir` and `plan_flags` are the PLAN_FLAGS, by name."""
    from pytorch_winbuild.faces.render import render
    from pytorch_winbuild.knowledge.choices import parse_mode

    _check_build_flags(source=source, host=host, dry_run=dry_run, repo=repo, ref=ref, log_dir=log_dir)
    chosen_mode = parse_mode(mode)
    cache = cache_choice(c, cache_dir)
    folder = cache.folder
    mirror = None if dry_run else checked_mirror(c, None)  # before the clone: where missing MKL/MAGMA come from
    if not dry_run:
        cache.check_writable()
        tag_cache(folder)
        if log_dir:
            writable_folder(Path(log_dir), "--log-dir")
    checkout = None
    clone = None
    with ExitStack() as claims:  # the cache's folders this build uses, spared by `clean` until it ends
        if repo and dry_run:  # planned, not cloned: the plan lists the git commands, the clone's folder is the build's
            clone, source = CloneChoice(repo, ref, source), None
        elif repo:
            checkout, source = _cloned_source(repo, ref, source, folder, claims)
        plan = plan_from_flags(
            c,
            host=host,
            source=source,
            cache=cache,
            mode=chosen_mode,
            libtorch=libtorch,
            arguments={**plan_flags, "cache_dir": cache_dir},
            measured_for="build",
            clone=clone,
        )
        if dry_run:
            sys.stdout.write(render(plan, format))
            return
        from pytorch_winbuild.builder.pipeline import BuildRequest, default_log_dir, run_build  # not for --dry-run
        from pytorch_winbuild.builder.source import existing_checkout

        if checkout is None:
            source_dir = Path(source) if source else default_build_source()
            checkout = existing_checkout(source_dir)
        wheels = path_flag(text_setting(c, "find_links", find_links), flag_label("find_links", find_links))
        index = path_flag(text_setting(c, "index_url", index_url), flag_label("index_url", index_url))
        _refuse_urls_offline(plan, wheels, index, flag_label("find_links", find_links))
        request = BuildRequest(
            checkout=checkout,
            cache_dir=folder,
            log_dir=Path(log_dir) if log_dir else default_log_dir(folder),
            mode=chosen_mode,
            libtorch=libtorch,
            clean=clean,
            verify=not no_verify,
            mirror=mirror,
            find_links=wheels,
            index_url=index,
            remember_venv=True,  # for verify and build-ext, as soon as the venv is there
            verify_command=f"{started_program()} verify{cache.again()}",  # the cache that remembers it
        )
        claims.enter_context(_claim_used(plan, folder))
        run_build(plan, request)


def _claim_used(plan: Plan, cache: Path, python: str | None = None) -> AbstractContextManager[None]:
    """Claim the build venv (or, for build-ext, the venv `python` runs in), the compiler cache's folder and its
    wrapper scripts of `plan` (deps/in_use.py), so `clean` spares them while the build runs."""
    from pytorch_winbuild.builder.compiler_cache import LAUNCHERS_FOLDER
    from pytorch_winbuild.deps.in_use import build_folders, claimed
    from pytorch_winbuild.deps.progress import log_line

    venv = plan.venv.folder if plan.venv else _cache_venv(python, cache)
    folders = build_folders(cache, venv, plan.compiler_cache)
    wrappers = [cache / LAUNCHERS_FOLDER] if plan.compiler_cache != "none" else []
    return claimed(cache, [*folders, *wrappers], log=log_line)


def _cache_venv(python: str | None, cache: Path) -> str | None:
    """The cache's build venv that `python` runs in (<cache>/venvs/<name>/...), or None for any other Python."""
    if python is None:
        return None
    venvs = cache.absolute() / "venvs"
    executable = Path(python).absolute()
    return str(venvs / executable.relative_to(venvs).parts[0]) if executable.is_relative_to(venvs) else None


def _refuse_urls_offline(plan: Plan, find_links: str | None, index_url: str | None, label: str) -> None:
    """A wheel folder without an index means an offline machine: a tree requirement pip would fetch from its own
    URL (name @ https://...) would go online all the same, so it is refused before anything starts."""
    if find_links is None or index_url is not None or plan.venv is None:
        return
    from pytorch_winbuild.planning.venv_plan import url_requirements

    urls = url_requirements(plan.venv.tree_requires)
    if urls:
        raise ConfigurationError(
            f"{label} {find_links} asks for offline sources, and the source tree's pyproject.toml [build-system] "
            f"requires {echoed(urls[0])}, which pip fetches from that URL.",
            fix="put that package's wheel in the folder and name it without the URL in the checkout, or build "
            "where the URL can be reached (leave the wheel folder out, or add --index-url).",
        )


def checked_mirror(c: Context, flag: str | None) -> str | None:
    """--mirror, else winbuild.mirror, checked now, so an unusable one is named by where it came from."""
    from pytorch_winbuild.deps.records import resolve_source

    mirror = text_setting(c, "mirror", flag)
    resolve_source(mirror, None, flag_label("mirror", flag))
    return mirror


def build_ext(
    c: Context,
    *,
    path: str,
    mode: str,
    clean: bool,
    force: bool,
    log_dir: str | None,
    cache_dir: str | None,
    python: str | None,
    pytorch_version: str | None,
    **plan_flags: FlagValue,
) -> None:
    """The `build-ext` task; `cache_dir`, `python`, `pytorch_version` and `plan_flags` are those of PLAN_FLAGS that
    build-ext has, by name. An unchanged extension is not built again (builder/extension_key.py) unless --force
    or --clean asks."""
    folder = Path(path_flag(path, "PATH") or "")
    if not folder.is_dir():
        raise ConfigurationError(f"{path} is not a folder.", fix="pass the folder that holds the extension's setup.py.")
    from pytorch_winbuild.builder.settings import load_settings

    modes = load_settings().extension_commands  # build_config/build_runner.toml: what each --mode runs
    if mode not in modes:
        raise ConfigurationError(f"--mode {mode!r} is not one of {', '.join(modes)}.")
    choice = cache_choice(c, cache_dir)
    choice.check_writable()
    cache = choice.folder
    tag_cache(cache)
    logs = path_flag(log_dir, "--log-dir")
    if logs:
        writable_folder(Path(logs), "--log-dir")
    from pytorch_winbuild.faces.extension_python import TorchQuery, extension_python

    # The Python whose torch the extension extends: --python, else this one or the cache's last build venv. This
    # one's torch is asked in a child while the planning loads (faces/extension_python.py, TorchQuery).
    named = named_python(c, python)
    asked = TorchQuery(sys.executable) if named is None else None
    prepare_planning()
    chosen = extension_python(named, choice, text_setting(c, "pytorch_version", pytorch_version), asked)
    plan = plan_from_flags(
        c,
        host=None,
        source=str(folder),
        cache=choice,
        task="build_ext",
        source_is_pytorch=False,
        arguments={**plan_flags, "cache_dir": cache_dir, "pytorch_version": chosen.torch, "python": chosen.executable},
        measured_for="build-ext",
        build_venv=False,
        notes=(chosen.decision,) if chosen.decision else (),
    )
    if chosen.decision:
        print(terminal_line(f"-- {chosen.decision}"), flush=True)
    key = _extension_key(plan, folder, mode, tuple(modes[mode]), chosen)
    if key is not None:
        from pytorch_winbuild.builder.extension_key import verdict

        decided = verdict(folder, key, force=force, clean=clean)
        print(terminal_line(f"-- build-ext {folder}: {decided.why}."), flush=True)
        if decided.up_to_date:
            return
    from pytorch_winbuild.builder.pipeline import ExtensionRequest, default_log_dir, run_build_ext  # not when skipped

    request = ExtensionRequest(
        path=folder,
        cache_dir=cache,
        log_dir=Path(log_dir) if log_dir else default_log_dir(cache),
        mode=mode,
        clean=clean,
        key=key,
    )
    with _claim_used(plan, cache, chosen.executable):  # `clean` spares the venv and the compiler cache meanwhile
        run_build_ext(plan, request)


def _extension_key(
    plan: Plan, folder: Path, mode: str, command: tuple[str, ...], chosen: ExtensionPython
) -> ExtensionKey | None:
    """The key of this build-ext (builder/extension_key.py); None without a setup.py, which the build refuses. The
    torch folder is the one the choice of Python found, else asked of that Python (--python with
    --pytorch-version), never by importing torch here."""
    if not (folder / "setup.py").is_file():
        return None
    from pytorch_winbuild.builder.extension_key import extension_key
    from pytorch_winbuild.faces.extension_python import torch_install

    torch_folder = chosen.torch_folder
    if torch_folder is None:
        found = torch_install(chosen.executable)
        torch_folder = found.folder if found else None
    return extension_key(plan, folder, mode, command, torch_folder, os.environ)


def verify(c: Context, *, python: str | None, cache_dir: str | None) -> None:
    """The `verify` task: --python (a path or X.Y), else the venv of this cache's last build, else this Python."""
    import json

    from pytorch_winbuild.builder.verify import check_torch, failure_error

    result = check_torch(verified_python(c, python, cache_dir))
    print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    if not result.ok:
        raise failure_error(result)


def named_python(c: Context, flag: str | None) -> str | None:
    """The interpreter --python (or winbuild.python) names for a task that runs an installed torch (build-ext,
    verify): a path, or X.Y found among this machine's Pythons; None for auto."""
    from pytorch_winbuild.planning.python_choice import PythonRequest

    label = flag_label("python", flag)
    request = PythonRequest.parse(text_setting(c, "python", flag), label)
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

    return last_venv(cache_choice(c, cache_dir).folder)


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


class MachineGpus(TypedDict):
    """What `diagnose` says of this machine's GPUs (this_machines_gpus)."""

    gpus: list[dict[str, object]]  # index, name, compute_capability of each
    arch_list: NotRequired[str]  # the --arch-list that builds for them; absent when none was seen
    advice: str


def this_machines_gpus() -> MachineGpus:
    """For a diagnosis whose fix depends on the GPU (no kernel image): the GPUs the probe sees here, and the
    --arch-list that builds for them (their compute capabilities), or that none was seen."""
    from pytorch_winbuild.facts.probe import probe
    from pytorch_winbuild.planning.commands_plan import quote_argument

    gpus = [g for g in probe().gpus or () if g.compute_capability]
    if not gpus:
        return {"gpus": [], "advice": "On this machine: no NVIDIA GPU was found, so the fix above cannot be narrowed."}
    arch = ";".join(sorted({g.compute_capability for g in gpus if g.compute_capability}, key=lambda c: float(c)))
    names = ", ".join(f"GPU {g.index} {g.name} (compute capability {g.compute_capability})" for g in gpus)
    return {
        "gpus": [{"index": g.index, "name": g.name, "compute_capability": g.compute_capability} for g in gpus],
        "arch_list": arch,
        "advice": f"On this machine: {names}. Build for it with --arch-list "
        f"{quote_argument(Platform.running(), arch)}.",
    }
