"""Cells per hour against the number of cells trained at once on one GPU (``scripts/gpu_grid.sh --sweep``).

For each concurrency K, K paper-size cells (``tableC2``'s learned rotation on fully rotated MNIST, one epoch
each, seeds 0..K-1) run through :class:`~pyroinv.reproduce.runner.DaskRunner` with ``cells_per_gpu=K`` in a
scratch runs directory. Reported per K: the wall time of the batch, each cell's training and evaluation time, and
the projected throughput of full paper-protocol cells,

    cells / hour = 3600 K / (E t_train + t_eval + t_start),

with E the protocol's epochs, t_train the mean training time of one epoch under K-fold sharing, t_eval the mean
evaluation time and t_start the rest of the batch's wall time (process start, data, compilation).

    python -m pyroinv.frontends.sweep --concurrency 1 2 4 8 --json sweep.json
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..config import Config
from ..reproduce import grids
from ..reproduce.runner import DaskRunner, Job, results
from .train import OneLineParser

SWEEP_PROTOCOL = "paper-sweep"


def sweep(
    concurrency: Sequence[int],
    root: Path,
    epochs: int = 1,
    minutes: float | None = None,
    report=print,
    base: str = "paper",
) -> list[dict]:
    """Run the sweep in ``root``; one row per K (see the module docstring). ``base``: the protocol whose cell
    sizes are used (``paper``; the tests use a tiny one)."""
    full_epochs = grids.PROTOCOLS[base]["relu"].get("epochs", Config().epochs)
    grids.PROTOCOLS[SWEEP_PROTOCOL] = {
        kind: {**grids.PROTOCOLS[base][kind], "epochs": epochs} for kind in ("relu", "rff")
    }
    cell = grids.tables()["tableC2"].rows["learned (5° init)"]["mnist-rot"]
    rows = []
    t_start = time.perf_counter()
    for k in concurrency:
        if minutes is not None and time.perf_counter() - t_start > 60 * minutes:
            report(f"sweep: time limit reached before K={k}")
            break
        jobs = [Job(cell, seed, SWEEP_PROTOCOL, root / f"k{k}") for seed in range(k)]
        t0 = time.perf_counter()
        with DaskRunner(cells_per_gpu=k) as runner:
            runner.run(jobs, report=lambda s: None)
        wall = time.perf_counter() - t0
        rs = [r for r in (results(j) for j in jobs) if r]
        if len(rs) < k:
            report(f"sweep: K={k}: {k - len(rs)} cell(s) failed; see {root / f'k{k}'}")
            break
        train = statistics.fmean(r["train_wall_time_s"] for r in rs) / epochs
        evaluation = statistics.fmean(r["eval_wall_time_s"] for r in rs)
        start = max(wall - epochs * train - evaluation, 0.0)
        row = {
            "cells_at_once": k,
            "wall_s": wall,
            "train_s_per_epoch": train,
            "eval_s": evaluation,
            "start_s": start,
            "cells_per_hour": 3600 * k / (full_epochs * train + evaluation + start),
            "steps_per_s": k * rs[0]["steps"] / epochs / train if train else float("nan"),
            "device_name": rs[0].get("device_name", ""),
        }
        rows.append(row)
        report(
            f"sweep: K={k}: {row['cells_per_hour']:.0f} paper cells/hour projected ({row['steps_per_s']:.0f} "
            f"steps/s together; an epoch {train:.1f} s per cell, evaluation {evaluation:.1f} s, start {start:.1f} s)"
        )
    return rows


def table(rows: list[dict]) -> str:
    """The sweep as a Markdown table."""
    lines = [
        "| cells at once | paper cells / hour (projected) | steps / s, all cells | epoch per cell (s) | "
        "evaluation (s) | start (s) |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['cells_at_once']} | {r['cells_per_hour']:.0f} | {r['steps_per_s']:.0f} | "
        f"{r['train_s_per_epoch']:.1f} | {r['eval_s']:.1f} | {r['start_s']:.1f} |"
        for r in rows
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = OneLineParser(prog="python -m pyroinv.frontends.sweep", description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8], metavar="K")
    p.add_argument("--epochs", type=int, default=1, help="epochs of each sweep cell (default: 1)")
    p.add_argument("--minutes", type=float, default=None, help="start no new K after this many minutes")
    p.add_argument("--runs-dir", type=Path, default=None, help="scratch folder (default: a temporary one)")
    p.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    args = p.parse_args(argv)
    if any(k < 1 for k in args.concurrency) or args.epochs < 1:
        p.error("--concurrency and --epochs take positive integers")
    with tempfile.TemporaryDirectory(prefix="pyroinv-sweep-") as tmp:
        rows = sweep(
            args.concurrency,
            args.runs_dir or Path(tmp),
            args.epochs,
            args.minutes,
            report=lambda s: print(s, flush=True),
        )
    print(table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
