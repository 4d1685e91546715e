#!/usr/bin/env python
"""Evaluate a saved run on any data set variant.

    python scripts/evaluate.py runs/main-20261125-120000 --dataset mnist
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.train import evaluate_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(evaluate_main())
