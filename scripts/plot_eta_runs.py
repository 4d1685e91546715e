#!/usr/bin/env python
"""Overlay eta over training of several runs (Figures 2 and 6 style).

    python scripts/plot_eta_runs.py runs/vi runs/ml --labels VI "maximum likelihood" --out docs/img/vi-vs-ml.png
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.files import read_jsonl  # noqa: E402
from pyroinv.frontends.train import OneLineParser  # noqa: E402
from pyroinv.run.plots import HUMAN_LABELS, plot_eta_runs  # noqa: E402


def main() -> int:
    p = OneLineParser(prog="plot_eta_runs.py", description=__doc__.splitlines()[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("runs", type=Path, nargs="+", help="run folders")
    p.add_argument("--labels", nargs="+", default=None, help="one legend label per run (default: folder names)")
    p.add_argument("--key", choices=list(HUMAN_LABELS), default="rotation_deg", help="which eta to plot")
    p.add_argument("--title", default="", help="figure title")
    p.add_argument("--out", type=Path, required=True, help="PNG file to write")
    args = p.parse_args()
    labels = args.labels or [r.name for r in args.runs]
    if len(labels) != len(args.runs):
        p.error(f"{len(labels)} labels for {len(args.runs)} runs; give one label per run")
    series = []
    for label, run in zip(labels, args.runs):
        records = read_jsonl(run / "metrics.jsonl")
        if not records:
            p.error(f"{run} has no metrics.jsonl records; pass folders written by svi_train.py")
        series.append((label, records))
    plot_eta_runs(series, args.out, key=args.key, title=args.title)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
