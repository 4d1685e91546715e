#!/usr/bin/env bash
# Build the documentation site (Sphinx: autodoc, napoleon, MyST-NB, furo) with warnings as errors.
#   bash scripts/docs.sh [OUT]      # OUT defaults to $PYROINV_DOCS_OUT, else docs/_build/html
# Every build reads every page afresh (-E), so a warning is never hidden by a cached one. Notebooks render with their committed outputs (never executed). Extra sphinx-build options: $SPHINXOPTS.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${PYROINV_DOCS_OUT:-docs/_build/html}}
py=.venv/bin/python
[ -x "$py" ] || py=${PYTHON:-python3}
if ! "$py" -c "import sphinx, myst_nb, furo" 2>/dev/null; then
  echo "[docs] sphinx, myst-nb or furo missing: run 'bash scripts/bootstrap.sh' (or pip install -e \".[docs]\")" >&2
  exit 2
fi
# shellcheck disable=SC2086
"$py" -m sphinx -b html -E -W --keep-going -q ${SPHINXOPTS:-} docs "$out"
echo "[docs] site built: $out/index.html" >&2
