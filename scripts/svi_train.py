#!/usr/bin/env python
"""Train an invariant shallow network and read off the invariance it learned.

    python scripts/svi_train.py --invariance rotation
    python scripts/svi_train.py --help
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.train import train_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(train_main())
