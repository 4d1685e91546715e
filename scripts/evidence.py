#!/usr/bin/env python
"""The Laplace estimates of log p(D | eta) / N of trained runs, on their own training sets, eta as learned.

    python scripts/evidence.py runs/reproduce/cpu/mlp-mnist-rot-none-vi-n312-minsteps1500-s0 runs/...

Of the output layer W2 (Kronecker-factored, and exact up to 6,000 output weights) and, for --network relu and mlp,
of every fully connected layer with each layer's prior precision at the evidence's fixed point; W2 at its mode.
Runs trained before these values were recorded in results.json get them here. --importance M checks W2's exact
Laplace estimate by importance sampling from the Laplace posterior.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.train import OneLineParser, setup_logging  # noqa: E402
from pyroinv.errors import PyroinvError  # noqa: E402


def main() -> int:
    p = OneLineParser(prog="evidence.py", description=__doc__.splitlines()[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("runs", type=Path, nargs="+", help="run folders written by svi_train.py")
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    p.add_argument("--importance", type=int, default=0, metavar="M",
                   help="also estimate W2's evidence by importance sampling with M draws from the exact Laplace "
                        "posterior (a check that does not assume a Gaussian posterior; 0: off)")
    args = p.parse_args()
    if args.importance < 0:
        p.error(f"--importance must be a non-negative number of draws, got {args.importance}")
    setup_logging()
    from pyroinv.run.analysis import run_evidence

    rows = []
    check = " IS/N, W2 (ESS; sd of log w / N) |" if args.importance else ""
    print(f"| run | learned invariance | Laplace/N, W2 (Kronecker) | Laplace/N, W2 (exact) |{check} Laplace/N, every "
          f"layer | prior precisions |\n|---|---|---|---|---|---|{'---|' if check else ''}")
    for run in args.runs:
        try:
            r = run_evidence(run, importance_draws=args.importance)
        except PyroinvError as err:
            sys.stderr.write(f"error: {err}\n")
            return 2
        rows.append(r)
        full, layers = r["laplace_full_per_datapoint"], r.get("laplace_layers_per_datapoint")
        precisions = ", ".join(f"{d:.3g}" for d in r.get("prior_precisions") or []) or "–"
        checked = ""
        if args.importance:
            checked = (f" {r['importance_per_datapoint']:.4f} ({r['importance_ess']:.0f}; "
                       f"{r['importance_log_weight_sd_per_datapoint']:.1e}) |"
                       if "importance_per_datapoint" in r else " – |")
        print(f"| {run.name} | {r['learned_invariance']} | {r['laplace_per_datapoint']:.4f} | "
              f"{'–' if full is None else f'{full:.4f}'} |{checked} {'–' if layers is None else f'{layers:.4f}'} | "
              f"{precisions} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
