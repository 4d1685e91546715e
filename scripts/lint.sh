#!/usr/bin/env bash
# Lint, format check and type check of the package (configured in pyproject.toml: [tool.ruff], [tool.mypy]).
# Run scripts/bootstrap.sh (or bash scripts/test.sh) first for .venv with the dev extra.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check pyroinv
.venv/bin/ruff format --check pyroinv
.venv/bin/mypy
