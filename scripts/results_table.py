#!/usr/bin/env python
"""Print a Markdown table of finished runs: python scripts/results_table.py runs/a runs/b ..."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.run.report import markdown_table  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: results_table.py RUN_DIR [RUN_DIR ...]")
    missing = [a for a in sys.argv[1:] if not (Path(a) / "results.json").exists()]
    if missing:
        sys.exit(f"error: no results.json in {', '.join(missing)}; pass folders of finished runs")
    print(markdown_table(sys.argv[1:]))
