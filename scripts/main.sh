#!/usr/bin/env bash
# The main job: learn the invariance of fully rotated MNIST (real data, offline) in a few minutes on 2 CPU cores.
# The cpu protocol of scripts/reproduce.py: the package's defaults (the paper's settings, with the deviations in
# docs/results/deviations.md) on 20,000 images with H=512, S=16 and 24 epochs, for speed.
# Installs into .venv on first use. Extra arguments are passed on to scripts/svi_train.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python scripts/svi_train.py --invariance rotation --dataset mnist-rot --network relu \
  --train-size 20000 --test-size 2000 --hidden 512 --samples 16 --epochs 24 \
  --init-eta 5 --out "runs/main-$(date +%Y%m%d-%H%M%S)" "$@"
