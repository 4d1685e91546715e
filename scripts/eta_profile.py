#!/usr/bin/env python
"""ELBO/N (and the Laplace evidence/N) of a trained run along one invariance parameter, everything else as trained.

    python scripts/eta_profile.py runs/main-... --values 0 30 60 90 120 150 180
    python scripts/eta_profile.py runs/main-... --values 0 45 90 135 180 --laplace --plot profile.png
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.frontends.train import OneLineParser, any_float, pos_int, setup_logging  # noqa: E402
from pyroinv.errors import PyroinvError  # noqa: E402
from pyroinv.model.lie import GENERATOR_NAMES  # noqa: E402


def main() -> int:
    p = OneLineParser(prog="eta_profile.py", description=__doc__.splitlines()[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("runs", type=Path, nargs="+", help="run folders written by svi_train.py (one table and panel each)")
    p.add_argument("--values", type=any_float, nargs="+", required=True,
                   help="eta values in human units (degrees for rotation, pixels for translation, log-scale otherwise)")
    p.add_argument("--generator", choices=GENERATOR_NAMES, default="rotate", help="which eta to vary")
    p.add_argument("--train-size", type=pos_int, default=None, help="evaluate on a class-balanced subset")
    p.add_argument("--draws", type=pos_int, default=1,
                   help="passes (W2 draws and transform sets) averaged per value, to lower the Monte-Carlo error")
    p.add_argument("--seed", type=int, default=0, help="seed of the W2 draws and transforms (the same for every value)")
    p.add_argument("--laplace", action="store_true",
                   help="also the Laplace evidence/N with W2 at its mode (Kronecker-factored, and exact for up to "
                        "6,000 output weights; and over every layer for --network relu and mlp); needs a run with "
                        "the logits averaged")
    p.add_argument("--plot", type=Path, default=None, help="write the profile as a figure here (.png)")
    args = p.parse_args()
    setup_logging()
    from pyroinv.run.analysis import eta_profile

    profiles = {}
    for run in args.runs:
        try:
            rows = eta_profile(run, args.values, generator=GENERATOR_NAMES.index(args.generator),
                               train_size=args.train_size, seed=args.seed, draws=args.draws, laplace=args.laplace)
        except PyroinvError as err:
            sys.stderr.write(f"error: {err}\n")
            return 2
        profiles[run.name] = rows
        print_table(rows, args.generator, args.laplace, title=str(run))
    if args.plot:
        from pyroinv.run.plots import plot_eta_profile

        plot_eta_profile([], args.plot, generator=args.generator, profiles=profiles)
        print(f"figure: {args.plot}")
    return 0


def print_table(rows: list[dict], generator: str, laplace: bool, title: str) -> None:
    """One run's profile as a Markdown table."""
    print(f"\n{title}\n")
    layers = laplace and "laplace_layers_per_datapoint" in rows[0]
    extra = (" Laplace/N (Kronecker) | Laplace/N (exact) |" if laplace else "") + (" Laplace/N (every layer) |"
                                                                                   if layers else "")
    print(f"| {generator} | ELBO/N | log-lik/N | KL/N |{extra}\n|---|---|---|---|" + "---|" * (2 * laplace + layers))
    for r in rows:
        line = (f"| {r['eta_human']:g} | {r['elbo_per_datapoint']:.4f} | {r['loglik_per_datapoint']:.4f} | "
                f"{r['kl_per_datapoint']:.4f} |")
        if laplace:
            full = r["laplace_full_per_datapoint"]
            line += f" {r['laplace_per_datapoint']:.4f} | {'—' if full is None else f'{full:.4f}'} |"
        if layers:
            line += f" {r['laplace_layers_per_datapoint']:.4f} |"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
