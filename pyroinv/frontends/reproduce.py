"""``scripts/reproduce.py``: run a grid of the paper and write its table into docs/results/tables/."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import PyroinvError
from ..paths import project_root
from ..reproduce.estimate import (
    Measured,
    backtest,
    backtest_summary,
    duration,
    estimate_seconds,
    measured,
    precision_note,
    summary,
)
from ..reproduce.grids import PROTOCOLS, tables
from ..reproduce.kept import keep
from ..reproduce.runner import DaskRunner, Job, cuda_devices, parse_resources
from .train import OneLineParser

ROOT = project_root()
#: cells trained at once on each GPU by default (a whole step at batch 128 is launch-bound: one cell leaves the
#: card mostly idle). Measured on an H200: 4 keep it busy (about 110 paper cells an hour), 8 add nothing
#: (docs/results/engineering.md, "The paper protocol on a GPU"); ``scripts/gpu_grid.sh --sweep`` measures it again
GPU_CELLS = 4
#: the runs the published tables in docs/results/tables/ are made from
PUBLISHED_RUNS = ROOT / "runs" / "reproduce"
#: where the published tables go: a page per grid (:func:`pyroinv.reproduce.tables.page_path`)
PUBLISHED_TABLES = ROOT / "docs" / "results" / "tables"


def parser() -> OneLineParser:
    names = list(tables())
    p = OneLineParser(
        prog="reproduce.py",
        description=(
            "Run the paper's experiment grids (a finished cell is not rerun; an interrupted one is resumed) and "
            "write each table, next to the paper's numbers, into its page in docs/results/tables/."
        ),
    )
    p.add_argument(
        "tables",
        nargs="+",
        metavar="TABLE",
        choices=names + ["claims"],
        help=f"one or more of: {', '.join(names)}; 'claims' writes the verdict table only",
    )
    p.add_argument(
        "--protocol",
        choices=sorted(PROTOCOLS),
        default="cpu",
        help="paper: the paper's settings (10 epochs); paper-e30: the same trained for 30 epochs in bfloat16; "
        "paper-e30-ws: that with today's first layer (standardised, its rate warmed up); cpu: "
        "documented reductions for a 2-core CPU; the rest are described in docs/reproducing.md (default: cpu)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds of every cell (default: 0)")
    p.add_argument(
        "--rows",
        nargs="+",
        metavar="TEXT",
        help="only the rows whose label contains one of these (e.g. fixed), or the row a label names in "
        "full (default: every row)",
    )
    p.add_argument(
        "--datasets",
        nargs="+",
        metavar="NAME",
        help="only the cells of these data sets, the tables' columns (e.g. mnist-rot90; default: all)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="worker processes of the local Dask cluster, i.e. cells trained at the same time (default: 1)",
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads per cell (default: 1)")
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="send the cells to a running Dask scheduler, e.g. tcp://HOST:8786 (default: "
        "$DASK_SCHEDULER_ADDRESS, else a local cluster of --jobs workers)",
    )
    p.add_argument(
        "--resources",
        nargs="+",
        metavar="NAME=AMOUNT",
        help="what each cell needs of a worker, e.g. GPU=1 (one cell per GPU; start workers with --resources GPU=1)",
    )
    p.add_argument(
        "--cells-per-gpu",
        type=int,
        default=None,
        metavar="K",
        help="train K cells at once on each GPU (a local cluster of K workers per GPU; with --scheduler, "
        f"each cell asks GPU=1/K of a worker). Default: {GPU_CELLS} on a machine with CUDA when "
        "neither --jobs nor --resources is given, else off",
    )
    p.add_argument(
        "--minutes",
        type=float,
        default=None,
        metavar="M",
        help="stop after M minutes: start a cell only while one can still finish, then stop the cells "
        "still training (they checkpoint); run again to go on (default: no limit)",
    )
    p.add_argument(
        "--cell-minutes",
        type=float,
        default=None,
        metavar="M",
        help="with --minutes, the expected duration of a cell until one has finished here (default: 0)",
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="how long to wait for --scheduler to answer (default: 20)",
    )
    p.add_argument(
        "--runs-dir",
        type=Path,
        default=PUBLISHED_RUNS,
        help="where cell folders go: RUNS_DIR/PROTOCOL/CELL (default: runs/reproduce)",
    )
    p.add_argument(
        "--tables-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the folder of the tables' pages (DIR/TABLE.md, DIR/claims.md), whose marked sections are rewritten "
        "(default: docs/results/tables for the default --runs-dir, the published tables' runs; RUNS_DIR/tables for "
        "any other)",
    )
    p.add_argument(
        "--write-docs",
        action="store_true",
        help="rewrite the tables in docs/results/tables from another --runs-dir (replaces the published rows)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print each cell's command and state; run nothing")
    mode.add_argument("--report-only", action="store_true", help="write the tables from finished cells; run nothing")
    mode.add_argument("--no-report", action="store_true", help="run the cells; leave the tables alone")
    return p


def jobs_of(
    keys: Sequence[str],
    protocol: str,
    seeds: Sequence[int],
    root: Path,
    rows: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
) -> list[Job]:
    """The cells of the tables ``keys`` (only ``rows``, only ``datasets`` where given), once each: every table's
    cells of the first seed in the order given, then the next seed's (the order the runner starts them in)."""
    grid = tables()
    seen: dict[Job, None] = {}
    for seed in seeds:
        for key in keys:
            if key == "claims":
                continue
            for cell in grid[key].cells(rows, datasets):
                seen.setdefault(Job(cell, seed, protocol, root))
    return list(seen)


def estimates(jobs: Sequence[Job], device: str, costs: dict[tuple, list[Measured]] | None = None) -> dict[Job, float]:
    """Each job's expected seconds on ``device`` from the kept cells of its protocol (:mod:`.estimate`; ``costs``
    where they have been read already), where one has the same cost."""
    costs = measured({job.protocol for job in jobs}) if costs is None else costs
    found = {}
    for job in jobs:
        if job.cell.kind != "sgpr":
            seconds = estimate_seconds(job.cell.config(job.protocol, job.seed).to_dict(), device, costs)
            if seconds is not None:
                found[job] = seconds
    return found


def dry_run(jobs: Sequence[Job], protocol: str, device: str, tables: dict[str, Sequence[Job]] | None = None) -> None:
    """Print each cell's state and command, with the time a cell still to run is expected to take on ``device``;
    then, for several ``tables`` (their cells among ``jobs``), a line each; then one line for them all, and one on
    how near such estimates come on the kept cells of ``protocol`` (:func:`~pyroinv.reproduce.estimate.backtest`)."""
    costs = measured([protocol])
    expected = estimates(jobs, device, costs)
    states = {job: job.state() for job in jobs}
    for job in jobs:
        cmd = " ".join(
            shlex.quote(a)
            for a in ["python", f"scripts/{job.cell.script}", *job.cell.argv(protocol, job.seed, str(job.out))]
        )
        about = f", about {duration(expected[job])}" if states[job] != "done" and job in expected else ""
        print(f"[{states[job]}{about}] {cmd}")
    for key, members in (tables or {}).items() if len(tables or {}) > 1 else ():
        left = [expected.get(job) for job in members if states[job] != "done"]
        print(
            f"{key}: {len(members) - len(left)} of {len(members)} cells finished; {summary(left, device, brief=True)}"
        )
    print(summary([expected.get(job) for job in jobs if states[job] != "done"], device))
    print(backtest_summary(backtest(costs, device), device))
    note = job_precision_note([job for job in jobs if states[job] != "done"], device)
    if note:
        print(note)


def job_precision_note(jobs: Sequence[Job], device: str) -> str | None:
    """:func:`~pyroinv.reproduce.estimate.precision_note` for the cells of ``jobs`` (the SGPR baseline has no
    precision to set: it runs in float32)."""
    return precision_note(
        (job.cell.config(job.protocol, job.seed).precision for job in jobs if job.cell.kind != "sgpr"), device
    )


def report_dir(runs_dir: Path, tables_dir: Path | None = None, write_docs: bool = False) -> Path:
    """Where the tables go, a page per grid: ``tables_dir`` if given; for the published runs (or ``write_docs``)
    docs/results/tables, whatever the protocol; else ``RUNS_DIR/tables`` beside the runs, so a scratch runs directory
    never rewrites the published tables."""
    if tables_dir is not None:
        return tables_dir
    if write_docs or runs_dir.resolve() == PUBLISHED_RUNS.resolve():
        return PUBLISHED_TABLES
    return runs_dir / "tables"


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if (args.jobs is not None and args.jobs < 1) or args.threads < 1:
        p.error("--jobs and --threads must be positive integers")
    if args.cells_per_gpu is not None and args.cells_per_gpu < 0:
        p.error("--cells-per-gpu must be a positive integer (0: off)")
    for flag, value in (("--minutes", args.minutes), ("--cell-minutes", args.cell_minutes)):
        if value is not None and not value > 0:
            p.error(f"{flag} must be a positive number of minutes")
    cells_per_gpu = args.cells_per_gpu
    if cells_per_gpu is None:
        cells_per_gpu = GPU_CELLS if args.jobs is None and not args.resources and cuda_devices() else 0
    if args.datasets:
        known = {d for key in args.tables if key != "claims" for d in tables()[key].datasets}
        unknown = [d for d in args.datasets if d not in known]
        if unknown:
            p.error(
                f"--datasets {' '.join(unknown)}: not a column of {' '.join(args.tables)}; choose from "
                f"{', '.join(sorted(known))}"
            )
    if not args.connect_timeout > 0:
        p.error("--connect-timeout must be a positive number of seconds")
    if args.write_docs and args.tables_dir is not None:
        p.error("--write-docs and --tables-dir name two folders for the tables; pass one")
    tables_dir = report_dir(args.runs_dir, args.tables_dir, args.write_docs)
    jobs = jobs_of(args.tables, args.protocol, args.seeds, args.runs_dir, args.rows, args.datasets)
    try:
        resources = parse_resources(args.resources)
        device = "cuda" if cells_per_gpu or resources.get("GPU") or (not args.scheduler and cuda_devices()) else "cpu"
        if args.dry_run:
            dry_run(
                jobs,
                args.protocol,
                device,
                {
                    key: jobs_of([key], args.protocol, args.seeds, args.runs_dir, args.rows, args.datasets)
                    for key in args.tables
                    if key != "claims"
                },
            )
            return 0
        if not args.report_only:
            note = job_precision_note([job for job in jobs if job.state() != "done"], device)
            if note:
                print(note, flush=True)
            with DaskRunner(
                args.jobs or 1,
                args.threads,
                scheduler=args.scheduler,
                resources=resources,
                connect_timeout=args.connect_timeout,
                cells_per_gpu=cells_per_gpu,
            ) as runner:
                runner.run(
                    jobs,
                    report=lambda s: print(s, flush=True),
                    minutes=args.minutes,
                    cell_minutes=args.cell_minutes,
                    estimates=estimates(jobs, device) if args.minutes is not None else None,
                )
        else:  # the runner keeps the cells it sees finished; without it, keep them here (pyroinv.reproduce.kept)
            for job in jobs:
                keep(job.out, job.protocol)
        if not args.no_report:
            from ..reproduce.tables import write_report

            written = write_report(args.tables, args.protocol, args.runs_dir, tables_dir)
            print(f"wrote {', '.join(written)} into {tables_dir}")
    except PyroinvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: running cells were checkpointed; run the same command again to resume", file=sys.stderr)
        return 130
    return 0
