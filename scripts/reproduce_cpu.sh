#!/usr/bin/env bash
# The cpu-protocol reproduction, grid by grid in priority order, two cells at a time, then the tables and
# claims in docs/results/tables/. Finished cells are skipped and interrupted ones resumed, so it can be stopped
# (Ctrl-C) and run again at will. Installs into .venv on first use.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
R=".venv/bin/python scripts/reproduce.py --protocol cpu --jobs 2 --no-report"
$R headline figure6 --seeds 0 1 2
$R tableC2 --rows fixed
$R table2 --rows affine
$R augerino
$R table2
$R tableC2
$R table1
$R combinations
$R tableC1
$R tableC3
# beyond the paper: deeper networks and the Laplace evidence, then LILA's data-efficiency grid
$R deep
$R efficiency --datasets mnist-rot
$R efficiency
# partially rotated MNIST with all 60,000 images (the same steps): claims 3 and 4 for the ReLU network
.venv/bin/python scripts/reproduce.py tableC2 --rows fixed "learned (5° init)" --datasets mnist-rot90 --seeds 0 1 2 \
  --protocol cpu-60k --jobs 2 --no-report
.venv/bin/python scripts/reproduce.py tableC2 claims --protocol cpu-60k --report-only
exec .venv/bin/python scripts/reproduce.py headline figure6 tableC2 table2 augerino table1 combinations tableC1 \
  tableC3 deep efficiency --protocol cpu --report-only
