#!/usr/bin/env python
"""How good is q? NUTS on W2 as the gold standard, and the ELBO against Laplace and importance-sampling estimates
of log p(D | eta), at a few fixed rotations (pyroinv.run.nuts_check).

    python scripts/nuts_check.py                                   # 0, 45, 90, 135, 180 degrees; 1,000 images, H = 64
    python scripts/nuts_check.py --etas 0 90 --train-size 200 --nuts-samples 50 --nuts-warmup 50   # seconds
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.train import OneLineParser, pos_int  # noqa: E402


def main(argv=None) -> int:
    p = OneLineParser(prog="nuts_check.py", description=__doc__.splitlines()[0])
    p.add_argument("--etas", type=float, nargs="+", default=[0, 45, 90, 135, 180], help="fixed rotations (degrees)")
    p.add_argument("--dataset", default="mnist-rot")
    p.add_argument("--train-size", type=pos_int, default=1000)
    p.add_argument("--test-size", type=pos_int, default=1000)
    p.add_argument("--hidden", type=pos_int, default=64, help="random Fourier features H (W2 has 10 (H + 1) weights)")
    p.add_argument("--samples", type=pos_int, default=16, help="transforms S on the deterministic grid")
    p.add_argument("--epochs", type=pos_int, default=100, help="epochs of q's training")
    p.add_argument("--draws", type=pos_int, default=1000, help="draws of q for the ELBO and the IS estimate")
    p.add_argument("--nuts-samples", type=pos_int, default=300)
    p.add_argument("--nuts-warmup", type=pos_int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    args = p.parse_args(argv)
    from pyroinv.run.nuts_check import nuts_table, run

    rows = run(args.etas, args.train_size, args.test_size, args.hidden, args.samples, args.epochs, args.draws,
               args.nuts_samples, args.nuts_warmup, args.seed, args.dataset, report=lambda s: print(s, flush=True))
    print(nuts_table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
