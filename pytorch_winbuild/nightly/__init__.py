"""`invoke nightly`: scheduled wheel builds over a matrix, one run at a time, with a summary.

A loop of plans over a matrix, not a second build system: each build is `invoke build`'s runner in wheel mode.
Nothing is imported here: each task loads only the modules it uses (docs/architecture.md lists them).
"""
