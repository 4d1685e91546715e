#!/usr/bin/env bash
# Run the test suite (installs into .venv on first use). Extra arguments go to pytest.
# The tests run on every core (pytest-xdist); PYROINV_TEST_WORKERS=0 runs them in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest -n "${PYROINV_TEST_WORKERS:-auto}" "$@"
