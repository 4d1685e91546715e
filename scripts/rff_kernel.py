#!/usr/bin/env python
"""How well H random Fourier features can resolve the RBF kernel they approximate, on a data set.

    python scripts/rff_kernel.py --sigma 0.3 0.1 --hidden 512

For each sigma: the median of k(x, x') = exp(-sigma^2 ||x - x'||^2 / 2) over pairs of training images of the
same class and of different classes, next to the random-feature approximation error, about 1 / sqrt(H).
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.cli import OneLineParser, pos_float, pos_int  # noqa: E402
from pyroinv.errors import PyroinvError  # noqa: E402


def main() -> int:
    p = OneLineParser(prog="rff_kernel.py", description=__doc__.splitlines()[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--sigma", type=pos_float, nargs="+", default=[0.3], help="RFF frequency scales (W1 ~ N(0, sigma^2))")
    p.add_argument("--hidden", type=pos_int, default=512, help="H, the number of random features")
    p.add_argument("--train-size", type=pos_int, default=2000, help="class-balanced images whose pairs are used")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    import torch

    from pyroinv.data import load_dataset

    try:
        data = load_dataset(args.dataset, train_size=args.train_size, seed=args.seed)
    except PyroinvError as err:
        sys.stderr.write(f"error: {err}\n")
        return 2
    x, y = data.tensors("train")
    sq = torch.cdist(x.reshape(len(x), -1), x.reshape(len(x), -1)) ** 2
    same = (y[:, None] == y[None]) & ~torch.eye(len(y), dtype=torch.bool)
    other = y[:, None] != y[None]
    print(f"{args.dataset}, {len(y)} training images; RFF approximation error ~ 1/sqrt({args.hidden}) = "
          f"{args.hidden ** -0.5:.4f}")
    for s in args.sigma:
        k = torch.exp(-s * s * sq / 2)
        print(f"  sigma {s:g}: median k same class {float(k[same].median()):.4f}, other classes "
              f"{float(k[other].median()):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
