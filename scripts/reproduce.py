#!/usr/bin/env python
"""Reproduce the paper's tables: python scripts/reproduce.py tableC2 --protocol cpu --jobs 2 (see --help)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.reproduce import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
