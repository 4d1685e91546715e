#!/usr/bin/env bash
# The main job: learn the invariance of fully rotated MNIST (real data, offline) in a few minutes on 2 CPU cores.
# Reduced from the paper (H=1024, S=32, lr 1e-3, L=I, all 60,000 images) for speed; see docs/RESULTS.md.
# Installs into .venv on first use. Extra arguments are passed on to scripts/svi_train.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python scripts/svi_train.py --invariance rotation --dataset mnist-rot --network relu \
  --train-size 20000 --test-size 2000 --hidden 512 --samples 16 --epochs 8 --lr 5e-3 \
  --guide-init-scale 0.05 --init-eta 5 --out "runs/main-$(date +%Y%m%d-%H%M%S)" "$@"
