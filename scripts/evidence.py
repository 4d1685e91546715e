#!/usr/bin/env python
"""The Laplace estimates of log p(D | eta) / N of trained runs, on their own training sets, eta as learned.

    python scripts/evidence.py runs/reproduce/cpu/mlp-mnist-rot-none-vi-n312-minsteps1500-s0 runs/...

Of the output layer W2 (Kronecker-factored, and exact up to 6,000 output weights) and, for --network relu and mlp,
of every fully connected layer with each layer's prior precision at the evidence's fixed point; W2 at its mode.
Runs trained before these values were recorded in results.json get them here.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.cli import OneLineParser, setup_logging  # noqa: E402
from pyroinv.errors import PyroinvError  # noqa: E402


def main() -> int:
    p = OneLineParser(prog="evidence.py", description=__doc__.splitlines()[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("runs", type=Path, nargs="+", help="run folders written by svi_train.py")
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = p.parse_args()
    setup_logging()
    from pyroinv.run.analysis import run_evidence

    rows = []
    print("| run | learned invariance | Laplace/N, W2 (Kronecker) | Laplace/N, W2 (exact) | Laplace/N, every layer | "
          "prior precisions |\n|---|---|---|---|---|---|")
    for run in args.runs:
        try:
            r = run_evidence(run)
        except PyroinvError as err:
            sys.stderr.write(f"error: {err}\n")
            return 2
        rows.append(r)
        full, layers = r["laplace_full_per_datapoint"], r.get("laplace_layers_per_datapoint")
        precisions = ", ".join(f"{d:.3g}" for d in r.get("prior_precisions") or []) or "–"
        print(f"| {run.name} | {r['learned_invariance']} | {r['laplace_per_datapoint']:.4f} | "
              f"{'–' if full is None else f'{full:.4f}'} | {'–' if layers is None else f'{layers:.4f}'} | "
              f"{precisions} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
