#!/usr/bin/env bash
# The test command the README shows: every tier (pure, cmd, network, build, services, browser, pypi, client).
# Quick local run of the pure tier only:
#   python -m pytest -n auto -m "not cmd and not network and not build and not services and not browser and not pypi and not client"
# The client tier alone (PyTorch's own build code from Debian's source packages, cached in
# $PYTORCH_WINBUILD_CLIENT_CACHE, default ~/.cache/pytorch-winbuild-tests; needs .ci/run's deb-src lines):
#   python -m pytest -m client tests/client
set -euo pipefail
cd "$(dirname "$0")/.."
# Tests run in parallel, one worker per core up to 4 (pytest-xdist): the slow ones wait on
# subprocesses (Wine, compilers, git, servers), so 2 cores finish in about half the time.
exec python -m pytest -q --numprocesses=auto --maxprocesses=4 "$@"
