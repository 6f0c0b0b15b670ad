"""Print a plan: a readable table with reasons, JSON, or a script (.bat, .ps1, sh) a user can run by hand.

Scripts enter vcvars first, then apply the plan's changes; every value is written by quoting_bat/ps1/sh so the
interpreter reads it back exactly, or refused (exit 2). Secrets never appear: redacted in every format, and a script
in which one would show is refused. The table's paths pass through terminal_text. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import functools
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.platform import Platform
from pytorch_winbuild.planning.commands_plan import cd_line, git_step_line
from pytorch_winbuild.planning.host_compiler import reached_by
from pytorch_winbuild.planning.plan_model import GitStep, Plan, SourcePlan
from pytorch_winbuild.planning.plan_record import plan_to_dict, shown_value
from pytorch_winbuild.text import quoting_bat as bat
from pytorch_winbuild.text import quoting_ps1 as ps1
from pytorch_winbuild.text import quoting_sh as sh
from pytorch_winbuild.text.redact import is_secret_name, redact_text, secret_variables_in
from pytorch_winbuild.text.terminal_text import terminal_lines, terminal_safe

FORMATS = ("table", "json", "bat", "ps1", "sh")


def render_json(plan: Plan) -> str:
    """The plan as data; a command that cannot be written for its shell is null, with the reason."""
    return redact_text(json.dumps(plan_to_dict(plan), indent=2, ensure_ascii=False)) + "\n"


def _wrap(text: str, indent: str = "  ", width: int = 100) -> list[str]:
    """The lines of one wrapped paragraph; its controls are shown first, so wrapping cannot split an escape."""
    return textwrap.wrap(
        terminal_safe(text, keep="", show_sequences=True),
        width=width,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
    )


def render_table(plan: Plan) -> str:
    """One screen for people: the choices, every variable with its reason, the commands, the warnings."""
    plan.check_printable()
    lines = [f"Plan for PyTorch {plan.pytorch_version} (era {plan.era.name}) on {plan.os}", ""]
    rows = [("Source", plan.source)] if plan.source else []
    if plan.checkout:
        rows.append(("Checkout", _checkout_row(plan.checkout)))
    rows.append(("Build Python", f"{plan.build_python.label} ({plan.build_python.reason})"))
    if plan.venv:
        rows.append(("Build venv", f"{plan.venv.folder} (key {plan.venv.key}): {' '.join(plan.venv.specs)}"))
    for tool in (plan.cmake, plan.ninja):
        if tool is not None:
            rows.append((tool.name, f"{tool.label}, {tool.origin}"))
    if plan.compiler:
        rows.append(("Visual Studio", f"{plan.compiler.instance.label} ({plan.compiler.instance.path})"))
        rows.append(("Toolset", f"{plan.compiler.toolset} (_MSC_VER {plan.compiler.msc_ver})"))
        if plan.cuda_host_compiler and plan.cuda_host_compiler is not plan.compiler:
            rows.append(
                (
                    "CUDA host compiler",
                    f"{plan.cuda_host_compiler.instance.label} toolset {plan.cuda_host_compiler.toolset}",
                )
            )
    if plan.vcvars:
        rows.append(("vcvars", plan.vcvars.command))  # printable: checked above
    if plan.cuda:
        accepted = (
            f", accepts _MSC_VER {plan.cuda_msc_range[0]}–{plan.cuda_msc_range[1] - 1}" if plan.cuda_msc_range else ""
        )
        if plan.nvcc_host:
            accepted = f", accepts {plan.nvcc_host.limits}"
        rows.append(("CUDA", f"{plan.cuda.version} ({plan.cuda.path}{accepted})"))
        if plan.nvcc_host:
            host = plan.nvcc_host
            how = "set as CUDAHOSTCXX by this plan" if host.overridden else reached_by(host.compiler)
            rows.append(("CUDA host compiler", f"{host.compiler.label}, {how}"))
    else:
        rows.append(("CUDA", "none (CPU-only build)"))
    rows.append(("Generator", plan.generator))
    rows.append(("Compiler cache", plan.compiler_cache))
    for archive in plan.archives:
        rows.append(
            (
                archive.name.upper(),
                f"{archive.version} → {archive.folder} ({'cached' if archive.present else 'to fetch'})",
            )
        )
    width = max(len(name) for name, _ in rows)
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    lines += ["", "Why:"]
    for decision in plan.decisions:
        lines += _wrap("- " + decision)
    lines += ["", "Environment (in this order" + (", after vcvars):" if plan.vcvars else "):")]
    name_width = max((len(c.name) for c in plan.changes), default=0)
    for change in plan.changes:
        shown = {
            "set": f"= {shown_value(change)}",
            "prepend": f"+= {shown_value(change)} (prepended)",
            "unset": "(unset)",
        }[change.action]
        lines.append(f"  {change.name:<{name_width}} {shown}")
        lines += _wrap(change.reason, indent=" " * (name_width + 5))
    lines += ["", "Commands:"]
    for number, command in enumerate(plan.commands, 1):
        lines.append(f"  {number}. {command.command}")
        lines += _wrap(command.what, indent="       ")
    if plan.warnings:
        lines += ["", "Warnings:"]
        for warning in plan.warnings:
            lines += _wrap("! " + warning)
    return terminal_lines((redact_text(line) for line in lines), show_sequences=True) + "\n"


def _checkout_row(checkout: SourcePlan) -> str:
    """Where a --repo dry run's clone is, how the build gets it (the first Commands) and that the build runs there."""
    how = {"clone": "a new clone", "fetch": "the existing clone, fetched"}[checkout.action]
    if not checkout.looked:
        how = "cloned, or fetched when the clone is there already"
    ref = checkout.ref or "the default branch"
    steps = len(checkout.steps)
    return (
        f"{checkout.folder} ({how}; {ref} checked out with its submodules: Commands 1–{steps}); the build runs in "
        "this folder"
    )


@dataclass(frozen=True)
class _ScriptSyntax:
    """One script format's lines (the quoting_* modules): remark, and the three kinds of change."""

    comment: Callable[[str, str], str]
    set: Callable[[str, str], str]
    prepend: Callable[[str, str], str]
    unset: Callable[[str], str]

    def change_lines(self, plan: Plan) -> list[str]:
        lines = []
        for change in plan.changes:
            value = shown_value(change)
            line = {
                "set": functools.partial(self.set, change.name, value),
                "prepend": functools.partial(self.prepend, change.name, value),
                "unset": functools.partial(self.unset, change.name),
            }[change.action]()
            lines += ["", self.comment(change.reason, f"the reason given for {change.name}"), line]
        return lines


BAT = _ScriptSyntax(comment=bat.comment, set=bat.set_line, prepend=bat.prepend_line, unset=bat.unset_line)
PS1 = _ScriptSyntax(comment=ps1.comment, set=ps1.set_line, prepend=ps1.prepend_line, unset=ps1.unset_line)
SH = _ScriptSyntax(comment=sh.comment, set=sh.set_line, prepend=sh.prepend_line, unset=sh.unset_line)
_VERSION = "the PyTorch version"
_INSTANCE = "the Visual Studio instance's name"


def _run_line(output: str | None, fmt: str, run: Callable[[str], str], comment: Callable[[str, str], str]) -> str:
    """The script's comment saying how to run it, naming the file it was written to (`run` quotes it for the
    script's shell); printed to standard output, the file does not exist yet, so it says how to write one. A file
    name no line of the script can hold (a control character) is left out rather than refused."""
    if output is None:
        return comment(f"Save it with --output build_env.{fmt}, then run it:  {run(f'build_env.{fmt}')}", "")
    try:
        return comment(f"Run it:  {run(output)}", "the script's file name")
    except ConfigurationError:
        return comment("Run this file as the lines above say (its name holds characters no script line shows).", "")


_PS_HERE = ".\\"  # PowerShell's current folder prefix


def _here(name: str, prefix: str) -> str:
    """A bare file name as a path (`.` and PowerShell look a bare name up on PATH, not in the current folder)."""
    return name if "/" in name or "\\" in name else prefix + name


def render_bat(plan: Plan, output: str | None = None) -> str:
    header = [
        bat.comment(f"Build environment for PyTorch {plan.pytorch_version}, written by pytorch-winbuild.", _VERSION),
        _run_line(output, "bat", lambda name: f'call "{name}"  (in cmd.exe)', bat.comment),
    ]
    call: list[str] = []
    if plan.vcvars:
        call = [
            "",
            bat.comment(f"Enter {plan.vcvars.instance}", _INSTANCE),
            bat.call_line(plan.vcvars.script, plan.vcvars.args),
        ]
    first: list[tuple[str, str | None]] = []
    last: list[tuple[str, str | None]] = []
    if plan.checkout:
        for step in plan.checkout.steps:
            line = git_step_line(Platform.WINDOWS, step)  # the line the plan prints for cmd
            first += [("", None), (bat.comment(step.what, _STEP), None), (line, _GIT_FAILED)]
        last = [
            ("", None),
            (bat.comment(_BUILD_FOLDER, ""), None),
            (cd_line(Platform.WINDOWS, plan.checkout.folder), _CD_FAILED),
        ]
    return bat.script(header, call, BAT.change_lines(plan), first=first, last=last)


_STEP = "a step of getting the source"
_BUILD_FOLDER = "The folder the build runs in: the clone."
_GIT_FAILED = "pytorch-winbuild: git failed, see its message above. The steps after it did not run."
_CD_FAILED = "pytorch-winbuild: the clone is not there, see the message above."


def render_ps1(plan: Plan, output: str | None = None) -> str:
    lines = [
        ps1.comment(f"Build environment for PyTorch {plan.pytorch_version}, written by pytorch-winbuild.", _VERSION),
        _run_line(
            output,
            "ps1",
            lambda name: f". {ps1.quote(_here(name, _PS_HERE), 'the file name')}  (in PowerShell)",
            ps1.comment,
        ),
    ]
    for step in plan.checkout.steps if plan.checkout else ():
        lines += ["", ps1.comment(step.what, _STEP), *_ps1_git(step)]
    if plan.vcvars:
        # `cmd /c "call "<script>" args && set"`: without /s, cmd strips only the outer quotes, which is
        # what both Windows PowerShell 5.1 and PowerShell 7 send for a native argument with spaces.
        command = bat.command_call(plan.vcvars.script, plan.vcvars.args) + " && set"
        lines += [
            "",
            ps1.comment(
                f"Enter {plan.vcvars.instance}: run vcvars in cmd and copy the environment it leaves.", _INSTANCE
            ),
            f"$vcvars = cmd.exe /c {ps1.quote(command, 'the vcvars command')}",
            "if ($LASTEXITCODE -ne 0 -or ($vcvars -match '^\\[ERROR:')) { throw ('vcvars failed: ' + "
            "(($vcvars -match '^\\[ERROR:') -join ' ')) }",
            "foreach ($line in $vcvars) { if ($line -match '^([^=]+)=(.*)$') { Set-Item -Path ('Env:' + "
            "$Matches[1]) -Value $Matches[2] } }",
        ]
    lines += PS1.change_lines(plan)
    if plan.checkout:
        folder = ps1.quote(plan.checkout.folder, "the folder the build runs in")
        lines += ["", ps1.comment(_BUILD_FOLDER, ""), f"Set-Location -LiteralPath {folder}"]
    return ps1.script(lines)


def _ps1_git(step: GitStep) -> list[str]:
    """A git step in PowerShell (5.1 has no `||`): each try after the first runs when $LASTEXITCODE says the one
    before failed, each run of a try when the one before succeeded; every try but the last is silent."""

    def git(args: tuple[str, ...], quiet: str) -> str:
        return " ".join(["git", *(ps1.native_argument(word, "the git command's argument") for word in args)]) + quiet

    lines = []
    for index, runs in enumerate(step.tries):
        quiet = "" if index == len(step.tries) - 1 else " 2>$null"
        line = git(runs[-1], quiet)
        for args in reversed(runs[:-1]):
            line = f"{git(args, quiet)}; if ($LASTEXITCODE -eq 0) {{ {line} }}"
        lines.append(line if index == 0 else f"if ($LASTEXITCODE -ne 0) {{ {line} }}")
    lines.append(f"if ($LASTEXITCODE -ne 0) {{ throw {ps1.quote(_GIT_FAILED, '')} }}")
    return lines


def render_sh(plan: Plan, output: str | None = None) -> str:
    if plan.os == Platform.WINDOWS:
        raise ConfigurationError(
            "the sh format is for Linux plans; a Windows plan's paths and PATH separator are cmd's.",
            fix="use --format bat (cmd.exe) or --format ps1 (PowerShell).",
        )
    lines = [
        "# Build environment for PyTorch, written by pytorch-winbuild.",
        _run_line(output, "sh", lambda name: ". " + sh.quote(_here(name, "./"), "the file name"), sh.comment),
    ]
    for step in plan.checkout.steps if plan.checkout else ():
        lines += ["", sh.comment(step.what, _STEP), sh.checked(git_step_line(Platform.LINUX, step), _GIT_FAILED)]
    lines += SH.change_lines(plan)
    if plan.checkout:
        lines += [
            "",
            sh.comment(_BUILD_FOLDER, ""),
            sh.checked(cd_line(Platform.LINUX, plan.checkout.folder), _CD_FAILED),
        ]
    return sh.script(lines)


RENDERERS = {"table": render_table, "json": render_json}
SCRIPTS = {"bat": render_bat, "ps1": render_ps1, "sh": render_sh}
SCRIPT_FORMATS = tuple(SCRIPTS)


def render(plan: Plan, fmt: str, output: str | None = None) -> str:
    """The plan in `fmt` (any case, as --cuda CPU is read); a script names `output`, the file it is written to, in
    its "run it" line."""
    fmt = fmt.strip().lower()
    if fmt in SCRIPTS:
        return _without_secrets(plan, fmt, SCRIPTS[fmt](plan, output))
    if fmt not in RENDERERS:
        raise ConfigurationError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}.")
    return RENDERERS[fmt](plan)


def _without_secrets(plan: Plan, fmt: str, script: str) -> str:
    """The script, if no secret shows in it: masked, a value would name another path than the plan's, and
    unmasked, the secret would be in the file; so a script that holds one is refused.

    A secret-named variable the plan sets keeps its `***` (shown_value): writing that secret into a file
    is never right. Every other value, remark and line must be free of secrets as they are."""
    parts = [
        (f"the value of {change.name}", change.value) for change in plan.changes if not is_secret_name(change.name)
    ]
    parts += [(f"line {number} of the script", line) for number, line in enumerate(script.splitlines(), 1)]
    found = next(((where, text) for where, text in parts if redact_text(text) != text), None)
    if found is None:
        return script
    where, text = found
    holders = ", ".join(secret_variables_in(text))
    secret = f"the value of {holders}, a secret," if holders else "a credential (a URL's password or a token)"
    fix = (
        f"unset {holders} for this command (the script does not use it), or give it a longer, random value that "
        "no path or setting contains."
        if holders
        else "remove the credential from the setting or path that holds it."
    )
    raise ConfigurationError(
        f"--format {fmt}: {where} contains {secret} and a script is written exactly or not at all, never with *** "
        "in place of a secret; nothing was written.",
        fix=fix,
    )
