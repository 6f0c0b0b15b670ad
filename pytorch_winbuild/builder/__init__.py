"""Act on a plan: get the source, enter the environment, build, explain failures, verify, report.

One job per module (docs/architecture.md lists them). Import the module you need: the package re-exports nothing, so a
plan that only reads the memory record does not load the whole build pipeline (scripts/bench_cli.py).
"""
