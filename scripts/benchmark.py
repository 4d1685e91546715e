#!/usr/bin/env python
"""Time the weight-space invariant network's paths against each other and the matrix-product floor.

    python scripts/benchmark.py                 # paper settings: MNIST 28x28, H=1024, S=32, batch 128 and 1024
    python scripts/benchmark.py --quick         # small settings, seconds (used by the tests)

Every path is timed in its own process, so the peak memory column is that path's own.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.cli import OneLineParser, pos_int  # noqa: E402


def measure(args) -> dict:
    import torch

    from pyroinv.benchmark import eval_function, peak_rss_mb, step_function, time_call

    torch.set_num_threads(args.threads)
    if args.kind == "step":
        fn = step_function(args.path, network=args.network, hidden=args.hidden, samples=args.samples, batch=args.batch)
        seconds = time_call(fn, repeats=args.repeats)
    else:
        fn = eval_function(args.path, network=args.network, hidden=args.hidden, samples=args.samples,
                           n_test=args.n_test)
        seconds = time_call(fn, repeats=max(1, args.repeats // 3), warmup=1)
    return {"seconds": seconds, "peak_mb": peak_rss_mb()}


def run_one(base: list[str], **kw) -> dict:
    cmd = [sys.executable, __file__, "--single", *base] + [f"--{k.replace('_', '-')}={v}" for k, v in kw.items()]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = OneLineParser(prog="benchmark.py", description=__doc__.splitlines()[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--hidden", type=pos_int, default=1024)
    p.add_argument("--samples", type=pos_int, default=32)
    p.add_argument("--batches", type=pos_int, nargs="+", default=[128, 1024])
    p.add_argument("--networks", nargs="+", choices=["relu", "rff"], default=["relu", "rff"])
    p.add_argument("--n-test", type=pos_int, default=10000, help="test images for the evaluation throughput")
    p.add_argument("--repeats", type=pos_int, default=7, help="timed repetitions (median reported)")
    p.add_argument("--threads", type=pos_int, default=2, help="torch threads")
    p.add_argument("--quick", action="store_true", help="H=64, S=4, batch 16, 200 test images, 2 repeats")
    p.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kind", default="step", help=argparse.SUPPRESS)
    p.add_argument("--path", default="pyroinv", help=argparse.SUPPRESS)
    p.add_argument("--network", default="relu", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=128, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.hidden, args.samples, args.batches, args.n_test, args.repeats = 64, 4, [16], 200, 2
    if args.single:
        print(json.dumps(measure(args)))
        return 0
    import torch

    from pyroinv.benchmark import PATHS

    base = [f"--hidden={args.hidden}", f"--samples={args.samples}", f"--n-test={args.n_test}",
            f"--repeats={args.repeats}", f"--threads={args.threads}"]
    print(f"torch {torch.__version__}, {args.threads} threads, H={args.hidden}, S={args.samples}, 28x28 inputs, "
          f"median of {args.repeats}")
    print("\ntraining step (forward + backward of the network's log-likelihood; seconds, ratio to pyroinv, peak MiB)\n")
    print("| network | batch | " + " | ".join(PATHS) + " | naive / pyroinv | input-aug / pyroinv | pyroinv / floor |")
    print("|---|---|" + "---|" * (len(PATHS) + 3))
    for net in args.networks:
        for batch in args.batches:
            r = {path: run_one(base, kind="step", path=path, network=net, batch=batch) for path in PATHS}
            cells = [f"{r[q]['seconds']:.4f} s ({r[q]['peak_mb']:.0f} MiB)" for q in PATHS]
            t = {q: r[q]["seconds"] for q in PATHS}
            print(f"| {net} | {batch} | " + " | ".join(cells) + f" | {t['naive'] / t['pyroinv']:.2f}x | "
                  f"{t['input-aug'] / t['pyroinv']:.2f}x | {t['pyroinv'] / t['floor']:.2f}x |")
    print(f"\nevaluation of {args.n_test} test images with S deterministic transforms (images per second)\n")
    print("| network | naive (warp per batch) | pyroinv (warp once) | speed-up |\n|---|---|---|---|")
    for net in args.networks:
        r = {path: run_one(base, kind="eval", path=path, network=net) for path in ("naive", "pyroinv")}
        ips = {q: args.n_test / r[q]["seconds"] for q in r}
        print(f"| {net} | {ips['naive']:.0f} | {ips['pyroinv']:.0f} | {ips['pyroinv'] / ips['naive']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
