#!/usr/bin/env python
"""bfloat16 against float32 on the cpu protocol's learned-rotation cells: the learned eta, the test accuracy, the
bound and the Laplace evidence of each precision at each seed, and the difference beside the float32 seeds' spread.

    python scripts/precision_table.py                                  # fully rotated MNIST, seeds 0 1 2
    python scripts/precision_table.py --datasets mnist-rot mnist-rot90 mnist --seeds 0 1 2

Each run is the cpu protocol's cell (20,000 training and 2,000 test images, H = 512, S = 16, 24 epochs, learned
rotation from ±5°; ``bash scripts/main.sh`` is its fully rotated seed 0) with ``--precision`` fp32 or bf16, in
``runs/precision/`` (finished runs are read back, interrupted ones resumed: the script can be run again).
"""
import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv import Config, run_or_load  # noqa: E402
from pyroinv.paths import project_root  # noqa: E402
from pyroinv.run.runtime import keep_freed_memory, subnormals_flushed  # noqa: E402

CELL = dict(invariance="rotation", network="relu", train_size=20000, test_size=2000, hidden=512, samples=16,
            epochs=24, init_eta=5.0)
PRECISIONS = ("fp32", "bf16")


def spread(values: list[float]) -> str:
    return f"{max(values) - min(values):.3g}" if len(values) > 1 else "–"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["mnist-rot"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--runs", type=Path, default=project_root() / "runs" / "precision")
    args = p.parse_args()
    keep_freed_memory()  # the process settings of a command-line run (pyroinv.run.runtime), so the times compare
    rows = {}
    for dataset in args.datasets:
        for seed in args.seeds:
            for precision in PRECISIONS:
                cfg = Config(dataset=dataset, seed=seed, precision=precision, **CELL)
                out = args.runs / f"{dataset}-{precision}-s{seed}"
                print(f"{out.name} ...", flush=True)
                with subnormals_flushed():
                    rows[dataset, seed, precision] = run_or_load(cfg, out, progress=False, quiet=True)
    keys = [("eta", lambda r: r["eta_human"]["rotation_deg"], "°"), ("accuracy", lambda r: 100 * r["test_accuracy"], "%"),
            ("ELBO/N", lambda r: r["elbo_per_datapoint"], ""), ("Laplace/N", lambda r: r["laplace_per_datapoint"], ""),
            ("train s", lambda r: r["train_wall_time_s"], "")]
    print("\n| data | seed | " + " | ".join(f"{k} fp32 | {k} bf16" for k, _, _ in keys) + " |")
    print("|---|---|" + "---|---|" * len(keys))
    for (dataset, seed, precision), r in rows.items():
        if precision != "fp32":
            continue
        b = rows[dataset, seed, "bf16"]
        print(f"| {dataset} | {seed} | " + " | ".join(f"{get(r):.4g} | {get(b):.4g}" for _, get, _ in keys) + " |")
    print("\n| data | quantity | mean bf16 − fp32 | largest abs. difference | fp32 seed spread (max − min) |"
          "\n|---|---|---|---|---|")
    for dataset in args.datasets:
        for name, get, _ in keys[:4]:
            diffs = [get(rows[dataset, s, "bf16"]) - get(rows[dataset, s, "fp32"]) for s in args.seeds]
            base = [get(rows[dataset, s, "fp32"]) for s in args.seeds]
            print(f"| {dataset} | {name} | {statistics.mean(diffs):+.4g} | {max(abs(d) for d in diffs):.4g} | "
                  f"{spread(base)} |")
        speed = [rows[dataset, s, "fp32"]["train_wall_time_s"] / rows[dataset, s, "bf16"]["train_wall_time_s"]
                 for s in args.seeds]
        print(f"| {dataset} | training time fp32 / bf16 | {statistics.mean(speed):.2f}x | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
