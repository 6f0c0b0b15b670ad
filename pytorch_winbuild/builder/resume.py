"""A re-run of `invoke build` continues in the build folder the last run left: said before the build, and after it.

PyTorch's build continues from its build folder, so after a failure or Ctrl-C the same command picks up where the
last one stopped, and only `--clean` starts over; nothing said so. The build now says, before it starts, what the
folder keeps (facts/kept_build.py reads it) with the plan's compiler cache, and a failed or interrupted build's fix
says the same command continues there.
"""

from __future__ import annotations

from pathlib import Path

from pytorch_winbuild.facts.kept_build import KeptFolder, read_build_folder
from pytorch_winbuild.planning.plan_model import Plan


def compiler_cache_kept(plan: Plan) -> str | None:
    """The plan's compiler cache as a re-run keeps it: 'ccache's objects in <folder>' (each engine's local folder is
    its <NAME>_DIR, which the plan sets), or None when the plan uses none."""
    if plan.compiler_cache == "none":
        return None
    folder = plan.final_env().get(f"{plan.compiler_cache.upper()}_DIR")
    return f"{plan.compiler_cache}'s objects" + (f" in {folder}" if folder else "")


def resume_note(kept: KeptFolder, plan: Plan) -> str:
    """The line a build that continues prints before it starts."""
    return (
        f"Continuing in the existing build folder {kept.folder}, as PyTorch's build does: kept are "
        f"{kept.kept(compiler_cache_kept(plan))}; Ninja builds only what is missing or out of date. "
        "`--clean` starts over."
    )


def again_fix(source_dir: Path, plan: Plan) -> str:
    """How to go on after a failure or Ctrl-C, from what the folder keeps now."""
    kept = read_build_folder(source_dir)
    if kept is None:
        return "run the same command again; add --clean to start over."
    return (
        f"run the same command again to continue in {kept.folder} (kept: {kept.kept(compiler_cache_kept(plan))}), "
        "or add --clean to start over."
    )
