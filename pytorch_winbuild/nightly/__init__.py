"""`invoke nightly`: scheduled wheel builds over a matrix, one run at a time, with a summary.

One job per module: `matrix` (build_config/nightly.toml), `lock` (one run at a time), `disk`
(free space first), `interpreter` (each entry's Python), `shared_cache` (the fleet's compiler
cache, build_config/shared_cache.toml), `entry` (one entry's stages), `state` (last successes,
for skipping), `retention` (old outputs), `summary` (JSON, Markdown, GitHub) and `run` (the loop).
Nightly is a loop of plans over a matrix, not a second build system: each build is `invoke
build`'s runner in wheel mode.

Nothing is imported here: each task loads only the modules it uses.
"""
