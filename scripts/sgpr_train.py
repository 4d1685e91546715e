#!/usr/bin/env python
"""The SGPR baseline (sparse GP regression on one-hot labels): python scripts/sgpr_train.py --dataset mnist-rot"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.sgpr import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
