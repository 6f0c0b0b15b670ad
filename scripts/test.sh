#!/usr/bin/env bash
# The test command the README shows: every tier (pure, cmd, network, build, services).
# Quick local run of the pure tier only:  python -m pytest -m "not cmd and not network and not build and not services"
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m pytest -q "$@"
