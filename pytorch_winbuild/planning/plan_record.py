"""The plan as plain data: what `--format json` prints and what build and nightly reports store.

Values of secret-looking variables are redacted here, so no report or JSON output can hold them.
"""

from __future__ import annotations

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.json_file import JsonObject
from pytorch_winbuild.planning.plan_model import Command, EnvChange, Plan, PlannedTool, SourcePlan
from pytorch_winbuild.text.redact import redact_value


def shown_value(change: EnvChange) -> str:
    """A change's value as any output shows it: redacted when the variable looks secret."""
    return redact_value(change.name, change.value)


def _command(command: Command) -> JsonObject:
    """A printed command, or null and why it cannot be written to work when pasted (JSON, reports)."""
    entry: JsonObject = {"what": command.what, "command": command.command}
    if command.refused is not None:
        entry["refused"] = command.refused.message
    return entry


def _vcvars_command(plan: Plan) -> str | None:
    """The vcvars call as printed, or None when it cannot be (its entry in `commands` says why)."""
    try:
        return plan.vcvars.command if plan.vcvars else None
    except ConfigurationError:
        return None


def _tool(tool: PlannedTool | None) -> JsonObject | None:
    """A tool the build runs: its version, executable, where it comes from and why."""
    if tool is None:
        return None
    return {"version": tool.version, "executable": tool.executable, "origin": tool.origin, "reason": tool.reason}


def _checkout(checkout: SourcePlan | None) -> JsonObject | None:
    """A dry run of --repo: where the clone is (the folder the build runs in) and the git steps that get it, each
    step's tries in order (the first that succeeds counts), each try's git runs in order."""
    if checkout is None:
        return None
    return {
        "repo": checkout.repo,
        "ref": checkout.ref,
        "folder": checkout.folder,
        "action": checkout.action,
        "looked": checkout.looked,
        "build_folder": checkout.folder,
        "steps": [
            {"what": step.what, "tries": [[["git", *args] for args in runs] for runs in step.tries]}
            for step in checkout.steps
        ],
    }


def plan_to_dict(plan: Plan) -> JsonObject:
    """The JSON form: `env` (final values of the touched variables) and `changes` (ordered, with reasons)."""
    compiler = plan.compiler
    return {
        "os": plan.os,
        "pytorch_version": plan.pytorch_version,
        "pytorch_version_source": plan.pytorch_version_source,
        "era": plan.era.name,
        "source": plan.source or None,
        "checkout": _checkout(plan.checkout),
        "python": plan.python,
        "build_python": {
            "version": plan.build_python.version,
            "executable": plan.build_python.executable,
            "reason": plan.build_python.reason,
            "found_by": plan.build_python.info.found_by if plan.build_python.info else "fetched",
            "fetch": plan.build_python.fetch_minor,
            "present": plan.build_python.present,
        },
        "venv": None
        if plan.venv is None
        else {
            "folder": plan.venv.folder,
            "python": plan.venv.python,
            "key": plan.venv.key,
            "requirements": [{"spec": r.spec, "source": r.source} for r in plan.venv.requirements],
            "tree_requires": list(plan.venv.tree_requires),
            "specs": list(plan.venv.specs),
        },
        "cmake": _tool(plan.cmake),
        "ninja": _tool(plan.ninja),
        "visual_studio": None
        if compiler is None
        else {
            "product_line": compiler.instance.product_line,
            "product": compiler.instance.product,
            "version": compiler.instance.version,
            "path": compiler.instance.path,
            "toolset": compiler.toolset,
            "msc_ver": compiler.msc_ver,
        },
        "cuda_host_toolset": None if plan.cuda_host_compiler is None else plan.cuda_host_compiler.toolset,
        "vcvars": None
        if plan.vcvars is None
        else {"script": plan.vcvars.script, "args": list(plan.vcvars.args), "command": _vcvars_command(plan)},
        "cuda": None
        if plan.cuda is None
        else {
            "version": plan.cuda.version,
            "path": plan.cuda.path,
            "msc_range": list(plan.cuda_msc_range) if plan.cuda_msc_range else None,
            "msc_range_source": plan.cuda_msc_range_source,
            "gcc_max": plan.cuda.gcc_max,
            "clang_max": plan.cuda.clang_max,
        },
        "cuda_host_compiler": None
        if plan.nvcc_host is None
        else {
            "path": plan.nvcc_host.compiler.path,
            "family": plan.nvcc_host.compiler.family,
            "version": plan.nvcc_host.compiler.version,
            "found_as": plan.nvcc_host.compiler.found_as,
            "set_by_plan": plan.nvcc_host.overridden,
        },
        "generator": plan.generator,
        "compiler_cache": plan.compiler_cache,
        "archives": [
            {"name": a.name, "version": a.version, "file_name": a.file_name, "folder": a.folder, "present": a.present}
            for a in plan.archives
        ],
        "build_command": [plan.venv.python if plan.venv else plan.build_python.executable, *plan.build_arguments],
        "env": {name: redact_value(name, value) for name, value in plan.final_env().items()},
        "changes": [
            {"name": c.name, "value": shown_value(c), "action": c.action, "reason": c.reason} for c in plan.changes
        ],
        "commands": [_command(command) for command in plan.commands],
        "decisions": list(plan.decisions),
        "warnings": list(plan.warnings),
    }
