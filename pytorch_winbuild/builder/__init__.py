"""Act on a plan: get the source, enter the environment, build, explain failures, verify, report.

One job per module: `source` (checkout, clone, old-era prep), `environment` (vcvars + the plan's
changes), `build_folder` (clean, generator/toolset memory), `compiler_cache`, `process` (run a
command with its log and Ctrl-C handling), `progress` (what the console shows), `pipeline`
(the phases in order, with the report), `settings` (build_config/build_runner.toml),
`memory_watch` and `memory_record` (compiler memory during a build, kept for the next plan).
Import the module you need: the package re-exports nothing, so a plan that only reads the memory
record does not load the whole build pipeline (scripts/bench_cli.py).
"""
