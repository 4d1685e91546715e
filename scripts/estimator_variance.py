#!/usr/bin/env python
"""The local and shared ELBO estimators at the same parameters: loss mean and gradient variance.

    python scripts/estimator_variance.py                       # the paper's sizes at its initial point (mu = 0, L = I)
    python scripts/estimator_variance.py --average logits --repeats 32 --json
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.train import OneLineParser, pos_float, pos_int, setup_logging  # noqa: E402
from pyroinv.errors import PyroinvError  # noqa: E402
from pyroinv.model.bnn import AVERAGES  # noqa: E402


def main() -> int:
    p = OneLineParser(prog="estimator_variance.py", description=__doc__.splitlines()[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", default="mnist-rot", help="data set the minibatch comes from")
    p.add_argument("--network", choices=["relu", "rff"], default="relu")
    p.add_argument("--hidden", type=pos_int, default=1024)
    p.add_argument("--samples", type=pos_int, default=32)
    p.add_argument("--batch-size", type=pos_int, default=128)
    p.add_argument("--average", choices=AVERAGES, default="probs")
    p.add_argument("--init-eta", type=float, default=5.0, help="rotation eta in degrees")
    p.add_argument("--w1-init-scale", type=pos_float, default=1.0)
    p.add_argument("--mu-scale", type=float, default=0.0, help="sd of a random mu (0: the paper's mu = 0)")
    p.add_argument("--repeats", type=pos_int, default=64, help="draws of the loss and gradient per estimator")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root", default=None)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args()
    setup_logging()
    from pyroinv.config import Config
    from pyroinv.data import load_dataset
    from pyroinv.inference.estimator_check import compare_estimators

    try:
        if args.repeats < 2:
            raise PyroinvError("--repeats must be at least 2 to estimate a variance")
        data = load_dataset(args.dataset, data_root=args.data_root, cache_dir=args.cache_dir, seed=args.seed)
        cfg = Config(dataset=args.dataset, network=args.network, hidden=args.hidden, samples=args.samples,
                     batch_size=args.batch_size, average=args.average, init_eta=args.init_eta,
                     w1_init_scale=args.w1_init_scale, seed=args.seed, device="cpu").validate()
        x, y = data.tensors("train")
        x, y = x[:args.batch_size], y[:args.batch_size]
        res = compare_estimators(cfg, x, y, num_data=len(data.y_train), num_classes=data.num_classes,
                                 repeats=args.repeats, seed=args.seed, mu_scale=args.mu_scale)
    except PyroinvError as err:
        sys.stderr.write(f"error: {err}\n")
        return 2
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{args.dataset}, {args.network}, H {args.hidden}, S {args.samples}, batch {args.batch_size}, "
          f"average {args.average}, {args.repeats} draws each")
    for est in ("local", "shared"):
        r = res[est]
        grads = "  ".join(f"{k} {v:.4g}" for k, v in r["grad_variance"].items())
        print(f"  {est:6s}  -ELBO {r['loss_mean']:.6g} ± {r['loss_se']:.3g}   gradient variance: {grads}")
    print("  ratio shared / local: " + "  ".join(f"{k} {v:.3g}" for k, v in res["variance_ratio_shared_over_local"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
