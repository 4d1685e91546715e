#!/usr/bin/env python
"""Time the weight-space invariant network's paths against each other and the matrix-product floor
(a wrapper of ``pyroinv benchmark``; its flags and examples: ``pyroinv/frontends/benchmark.py``)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.benchmark import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
