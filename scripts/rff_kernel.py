#!/usr/bin/env python
"""How well H random Fourier features can resolve the RBF kernel they approximate, and fit, on a data set.

    python scripts/rff_kernel.py --sigma 0.3 0.1 --hidden 512
    python scripts/rff_kernel.py --sigma 0.3 0.1 0.05 --hidden 512 1024 4096 --fit --train-size 20000
    python scripts/rff_kernel.py --sigma 0.3 --hidden 512 --fit --train-size 20000 --rotation 5 --samples 16

For each sigma: the median of k(x, x') = exp(-sigma^2 ||x - x'||^2 / 2) over pairs of training images of the
same class and of different classes, next to the random-feature approximation error, about 1 / sqrt(H).

With ``--fit``, for each sigma and H: the training and test accuracy of the MAP output layer of the RFF
network with the logits averaged over a fixed rotation (Appendix A): the model is linear in the averaged
features ``psi(x) = mean_i [phi(W1 T_i x), 1]`` over ``--samples`` rotations on the deterministic grid of
``+-rotation`` degrees (none at 0), and ``argmax_W2 sum_n log softmax(W2 psi(x_n))_{y_n} - ||W2||^2 / (2 alpha)``
is found by full-batch L-BFGS. It is what those fixed features can fit at their best, whatever the
inference on ``W2``.
"""
import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.train import OneLineParser, pos_float, pos_int  # noqa: E402
from pyroinv.errors import PyroinvError  # noqa: E402


def averaged_features(feats, inv, x, samples: int, chunk: int = 1000):
    """``psi(x) = mean_i [phi(W1 T_i x), 1]`` over ``samples`` rotations on the deterministic grid, ``N x (H + 1)``."""
    import torch

    with torch.no_grad():
        T = inv.sample_transforms(samples, "deterministic")
        return torch.cat([feats(x[i:i + chunk], T).mean(0) for i in range(0, len(x), chunk)])


def map_accuracy(phi, y, phi_test, y_test, alpha: float, iterations: int) -> tuple[float, float]:
    """Training and test accuracy of the MAP output layer on fixed features ``phi`` (``N x (H + 1)``)."""
    import torch

    W2 = torch.zeros(phi.shape[1], int(y.max()) + 1, requires_grad=True)
    opt = torch.optim.LBFGS([W2], lr=1.0, max_iter=iterations, history_size=20, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-6, tolerance_change=1e-10)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(phi @ W2, y, reduction="sum") + W2.pow(2).sum() / (2 * alpha)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return tuple(float(((f @ W2).argmax(1) == t).float().mean()) for f, t in ((phi, y), (phi_test, y_test)))


def main() -> int:
    p = OneLineParser(prog="rff_kernel.py", description=__doc__.splitlines()[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--sigma", type=pos_float, nargs="+", default=[0.3], help="RFF frequency scales (W1 ~ N(0, sigma^2))")
    p.add_argument("--hidden", type=pos_int, nargs="+", default=[512], help="H, the numbers of random features")
    p.add_argument("--train-size", type=pos_int, default=2000, help="class-balanced training images")
    p.add_argument("--test-size", type=pos_int, default=2000, help="class-balanced test images (with --fit)")
    p.add_argument("--fit", action="store_true", help="also fit the MAP output layer and report its accuracy")
    p.add_argument("--alpha", type=pos_float, default=1.0, help="prior variance of W2 (paper: 1)")
    p.add_argument("--rotation", type=float, default=0.0, help="fixed rotation of the features, +- degrees (with --fit)")
    p.add_argument("--samples", type=pos_int, default=16, help="S, rotations averaged over (with --rotation)")
    p.add_argument("--iterations", type=pos_int, default=300, help="L-BFGS iterations of the MAP fit")
    p.add_argument("--pairs", type=pos_int, default=2000, help="images whose pairs give the kernel medians")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    import torch

    from pyroinv.data import load_dataset
    from pyroinv.model.invariance import Invariance
    from pyroinv.model.networks import InvariantFeatures

    try:
        data = load_dataset(args.dataset, train_size=args.train_size, test_size=args.test_size, seed=args.seed)
    except PyroinvError as err:
        sys.stderr.write(f"error: {err}\n")
        return 2
    x, y = data.tensors("train")
    xp, yp = x[:args.pairs].reshape(min(args.pairs, len(x)), -1), y[:args.pairs]
    sq = torch.cdist(xp, xp) ** 2
    same = (yp[:, None] == yp[None]) & ~torch.eye(len(yp), dtype=torch.bool)
    other = yp[:, None] != yp[None]
    print(f"{args.dataset}, {len(yp)} training images' pairs; RFF approximation error ~ 1/sqrt(H) = "
          + ", ".join(f"{h ** -0.5:.4f} (H {h})" for h in args.hidden))
    for s in args.sigma:
        k = torch.exp(-s * s * sq / 2)
        print(f"  sigma {s:g}: median k same class {float(k[same].median()):.4f}, other classes "
              f"{float(k[other].median()):.4f}")
    if not args.fit:
        return 0
    x_test, y_test = data.tensors("test")
    rotated = args.rotation != 0
    print(f"MAP output layer (alpha {args.alpha:g}) on {len(y)} training and {len(y_test)} test images, "
          + (f"logits averaged over {args.samples} rotations in +-{args.rotation:g} degrees:" if rotated
             else "no invariance:"))
    for s in args.sigma:
        for h in args.hidden:
            torch.manual_seed(args.seed)
            inv = (Invariance("rotation", init=math.radians(args.rotation), learn=False, image_size=x.shape[-1])
                   if rotated else Invariance("none"))
            feats = InvariantFeatures(tuple(x.shape[1:]), inv, hidden=h, network="rff", rff_sigma=s)
            samples = args.samples if rotated else 1
            phi, phi_test = (averaged_features(feats, inv, v, samples) for v in (x, x_test))
            train_acc, test_acc = map_accuracy(phi, y, phi_test, y_test, args.alpha, args.iterations)
            print(f"  sigma {s:g}, H {h}: train accuracy {100 * train_acc:.2f}%, test accuracy {100 * test_acc:.2f}%",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
