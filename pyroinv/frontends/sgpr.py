"""``scripts/sgpr_train.py`` (``pyroinv sgpr``): the SGPR baseline's command line (:mod:`pyroinv.baselines.sgpr`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..baselines.sgpr import SGPRConfig, run_sgpr
from ..errors import PyroinvError
from .train import EXIT_USAGE, OneLineParser, pos_float, pos_int


def parser():
    """``sgpr_train.py`` flags."""
    d = SGPRConfig()
    p = OneLineParser(
        prog="sgpr_train.py",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="The SGPR baseline: sparse GP regression (RBF kernel, pyro.contrib.gp) on one-hot "
        "labels, classified by the argmax of the predictive mean.",
    )
    p.add_argument("--dataset", default=d.dataset, help="any data set name of svi_train.py, or an .npz path")
    p.add_argument("--inducing", type=pos_int, default=d.inducing, help="inducing points M")
    p.add_argument("--steps", type=pos_int, default=d.steps, help="full-batch Adam steps on the VFE bound")
    p.add_argument("--lr", type=pos_float, default=d.lr, help="Adam learning rate")
    p.add_argument("--train-size", type=pos_int, default=None, help="class-balanced subset of the training set")
    p.add_argument("--test-size", type=pos_int, default=None, help="class-balanced subset of the test set")
    p.add_argument("--seed", type=int, default=d.seed, help="random seed (subset, inducing points)")
    p.add_argument("--out", type=Path, default=None, help="run folder (default runs/DATASET-sgpr-sSEED)")
    p.add_argument("--data-root", default=None, help="folder with your own MNIST IDX files or CIFAR-10 batches")
    p.add_argument("--cache-dir", default=None, help="data cache (default $PYROINV_CACHE or ~/.cache/pyroinv)")
    p.add_argument("--no-progress", action="store_true", help="accepted for symmetry with svi_train.py")
    return p


def config_from_args(args) -> SGPRConfig:
    """The :class:`SGPRConfig` of parsed ``sgpr_train.py`` flags."""
    return SGPRConfig(
        dataset=args.dataset,
        inducing=args.inducing,
        steps=args.steps,
        lr=args.lr,
        train_size=args.train_size,
        test_size=args.test_size,
        seed=args.seed,
    )


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    cfg = config_from_args(args)
    out = args.out or Path("runs") / f"{Path(cfg.dataset).stem}-sgpr-s{cfg.seed}"
    try:
        run_sgpr(cfg, out, data_root=args.data_root, cache_dir=args.cache_dir, report=lambda s: print(s, flush=True))
    except PyroinvError as err:
        sys.stderr.write(f"error: {err}\n")
        return EXIT_USAGE
    return 0
