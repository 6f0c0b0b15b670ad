"""The help text of every task's flags (`invoke --help TASK`), in one place."""

from __future__ import annotations

from pytorch_winbuild.planning.flag_table import PLAN_HELP, task_help

ENV_HELP = {
    **task_help("env"),
    "format": "table (with reasons; default), json, bat (cmd.exe), ps1 (PowerShell) or sh (Linux plans).",
    "output": "Write to this file (UTF-8) instead of standard output.",
}


BUILD_HELP = {
    **task_help("build"),
    "dry_run": (
        "Show the plan (Visual Studio, toolset, vcvars call, CUDA, generator, cache, every variable with its reason, "
        "the commands) and stop."
    ),
    "format": "Output format of --dry-run: table (default), json, bat, ps1 or sh.",
    "mode": "install (python setup.py install, the seeds' default), develop, or wheel (bdist_wheel into dist/).",
    "clean": "Remove the source's build/ folder first (a full rebuild; the compiler cache still helps).",
    "repo": "Git URL to clone (recursive submodules) or, when the clone exists, fetch; then check out --ref.",
    "ref": "With --repo: branch, tag or commit to check out (default: the remote's default branch).",
    "libtorch": "Build LibTorch only (python tools/build_libtorch.py) instead of the --mode command.",
    "log_dir": "Folder for this run's log and JSON report (default: <cache>/logs).",
    "no_verify": "Skip the check that imports the result in a fresh Python outside the source tree.",
}


FETCH_DEPS_HELP = {
    "cuda": (
        "CUDA version of the build, e.g. 9.0 or 10.1: adds the MAGMA built for it. 'cpu' for a CPU-only build. "
        "Without it only MKL is fetched."
    ),
    "mkl_version": (
        "MKL archive version: 2018.2.185 (PyTorch 0.3–1.1), 2019.4.245 (1.2–1.6), 2020.0.166 (1.7–1.10), 2020.2.254 "
        "(1.11 and newer). Default: the era's (build_config/eras.toml)."
    ),
    "magma_version": (
        "MAGMA version, or a comma-separated preference list (the first one built for your CUDA wins). Default: the "
        "newest one for your CUDA."
    ),
    "magma_debug": "Fetch MAGMA's debug build (for DEBUG=1 builds of PyTorch).",
    "no_magma": "Build without MAGMA: fetch MKL only, even with --cuda.",
    "mirror": PLAN_HELP["mirror"],
    "from_dir": "Folder holding archives you downloaded by hand: take them from there, download nothing.",
    "update_lock": (
        "Accept archives whose SHA-256 differs from this cache's first-use record (<cache>/deps.lock) and record the "
        "new one; checksums shipped in build_config/deps.lock or deps.toml are never overridden."
    ),
    "cache_dir": PLAN_HELP["cache_dir"],
    "jobs": "Archives downloaded in parallel (default 0: one per archive, at most 4).",
    "lock_file": (
        "Lock file for first-seen checksums (default: deps.lock in the cache folder); build_config/deps.lock is only "
        "read unless named here."
    ),
    "pytorch_version": (
        "PyTorch version to fetch for: its era chooses the default MKL and MAGMA versions (default: the source "
        "tree's version, else the newest era that builds with --cuda)."
    ),
    "source": PLAN_HELP["source"],
    "dry_run": (
        "Show what would be fetched (each archive, from where, to which folder, whether it is already there) and stop."
    ),
}


BUILD_EXT_HELP = {
    **task_help("build_ext"),
    "path": "Folder of the extension (the one holding its setup.py).",
    "mode": "inplace (python setup.py build_ext --inplace; default), develop, or install.",
    "clean": "Remove the extension's build/ folder first (a full rebuild; the compiler cache still helps).",
    "force": (
        "Build even when nothing changed since the last successful build (its sources, setup.py, environment, "
        "flags, compiler, CUDA and torch), which build-ext otherwise reports up to date without running setup.py."
    ),
    "log_dir": "Folder for this run's log and JSON report (default: <cache>/logs).",
}


NIGHTLY_HELP = {
    "matrix": "Matrix file (default: build_config/nightly.toml): the entries to build and the nightly's settings.",
    "only": "Build only this entry (repeat the flag for several). Default: every entry of the matrix.",
    "force": "Build entries even when their source revision and configuration are unchanged since their last success.",
    "output_dir": (
        "Folder for wheels, logs, reports and summaries, as <dir>/<YYYY-MM-DD>/<entry>/ (default: the matrix's "
        "output_dir, dist/nightly)."
    ),
    "keep_days": (
        "Retention: remove date folders older than this many days (1 to 36500), except each entry's newest wheel "
        "(default: the matrix's keep_days)."
    ),
    "min_free_gb": (
        "Free disk space, in GB, every entry needs before it starts (default: each entry's min_free_gb, else the "
        "matrix's)."
    ),
    "cache_dir": PLAN_HELP["cache_dir"] + " Holds the entries' clones (nightly/src) and the nightly lock.",
    "mirror": FETCH_DEPS_HELP["mirror"],
    "matrix_json": (
        'Build nothing: print the night\'s jobs for GitHub Actions\' strategy.matrix, {"include": [{"entry": NAME, '
        '"runs-on": [labels]}]}, longest first, without the entries unchanged since --previous (with --only, '
        "--force)."
    ),
    "plan_file": (
        "With --matrix-json: also write the whole plan (every entry, built or left out, and why) to this file, for "
        "`invoke nightly-merge --plan`."
    ),
    "previous": (
        "With --matrix-json: the channel published last night (a folder); entries whose revision and matrix table "
        "match their last good build there are left out, and its durations order the jobs."
    ),
    "runner_labels": (
        "Build nothing: print the labels to register this machine's GitHub Actions runner with (config.cmd "
        "--labels), from what `invoke doctor` finds: each Visual Studio and CUDA (build_config/runner_labels.toml)."
    ),
}


NIGHTLY_MERGE_HELP = {
    "part": (
        "A runner's part: the output folder of `invoke nightly --only NAME --output-dir PART` (repeat the flag for "
        "each). Two parts of one entry are refused."
    ),
    "output_dir": "The merged channel's folder (created; may already hold the channel, which is then updated).",
    "previous": "The channel published last night: its nights are copied in first, for each entry's history.",
    "plan": (
        "The night's plan (`invoke nightly --matrix-json --plan-file`): entries it left out are shown skipped, "
        "entries whose part is missing are shown missing, each on its last good wheel."
    ),
    "keep_days": "Retention, as for nightly (default: the plan's keep_days, else build_config/nightly.toml's).",
}


NIGHTLY_SITE_HELP = {
    "output_dir": "The nightly's output folder (the matrix's output_dir, or a merged channel).",
    "nights": "Nights the dashboard shows per entry (default: 14).",
    "stage": (
        "Also make a publishable copy in this new or empty folder: the date folders (hard-linked where it can be; "
        "not state.json, hidden or temporary files), the wheels --wheels keeps, and an index and dashboard of exactly "
        "that."
    ),
    "wheels": "Wheels the copy holds: all (every kept one), newest (each entry's newest), or none (default: all).",
}


DOCTOR_HELP = {
    "host": PLAN_HELP["host"],
    "json": (
        "Write this machine's facts as JSON (the file --host reads; safe to share: no credentials, no environment "
        "dump)."
    ),
    "output": (
        "With --json: write the facts to this file (UTF-8, written whole) instead of standard output. Use it rather "
        "than PowerShell's `>`, which writes UTF-16 through the console's code page."
    ),
}

CLEAN_HELP = {
    "deps": (
        "Remove the extracted MKL/MAGMA folders (cache/deps); the downloaded archives stay, so the next fetch-deps "
        "re-extracts offline."
    ),
    "downloads": "Remove the downloaded archives and partial downloads (cache/downloads).",
    "venvs": (
        "Remove the build venvs (cache/venvs: one per era x Python x requirement set); the next build remakes its own."
    ),
    "sources": "Remove the clones made by build --repo and the nightly (cache/src, cache/nightly/src).",
    "compiler_cache": (
        "Remove the compiler caches' objects (cache/sccache, ccache, clcache) and build-ext's compiler wrappers "
        "(cache/launchers): the next build compiles everything again."
    ),
    "logs": "Remove the build logs and reports (cache/logs); with --older-than DAYS, only those older than that.",
    "pythons": "Remove the CPythons fetched from NuGet (cache/deps/python.*, cache/downloads/python.*).",
    "all": "Remove every kind: --deps, --downloads, --venvs, --sources, --compiler-cache, --logs and --pythons.",
    "older_than": "With --logs or --all: remove only logs and reports last changed more than DAYS days ago.",
    "dry_run": "Remove nothing: list each kind named, its size and every path that would go.",
    "cache_dir": PLAN_HELP["cache_dir"],
}

VERIFY_HELP = {
    "python": (
        "The Python whose torch to check: a path, X.Y or auto (default: the build venv of this cache's last "
        "`invoke build`, whatever its outcome, else the Python running this task)."
    ),
    "cache_dir": "The cache folder whose last build's venv auto checks (default: as for build).",
}

DIAGNOSE_HELP = {
    "logfile": (
        "The saved log to explain: a build log, pip or conda output, a failed import or verify run (UTF-8, UTF-16 or "
        "a console code page)."
    ),
    "json": (
        "Print the result as JSON (first error block and matching rules, as the build report stores them) instead of "
        "text."
    ),
    "rules": "Diagnosis rules file to use instead of build_config/diagnosis.toml.",
}
