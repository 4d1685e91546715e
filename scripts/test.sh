#!/usr/bin/env bash
# The checks (installs into .venv on first use): ruff and mypy on pyroinv/ (scripts/lint.sh), then the test suite.
# Extra arguments go to pytest: bash scripts/test.sh -m "not slow" is the fast subset.
# The tests run on every core (pytest-xdist); PYROINV_TEST_WORKERS=0 runs them in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/lint.sh
exec .venv/bin/python -m pytest -n "${PYROINV_TEST_WORKERS:-auto}" "$@"
