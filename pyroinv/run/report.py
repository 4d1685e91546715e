"""Markdown tables of finished runs (``results.json`` + ``config.json``), for the results pages (docs/results/)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..files import read_json

COLUMNS = (
    "run",
    "data",
    "network",
    "inference",
    "learned invariance",
    "test acc. %",
    "test NLL",
    "ELBO/N",
    "steps",
    "train s",
)


def row(run: Path) -> list[str]:
    r = read_json(run / "results.json")
    elbo = r.get("elbo_per_datapoint")
    return [
        run.name,
        r["dataset"],
        r["network"],
        r["inference"],
        r["learned_invariance"],
        f"{100 * r['test_accuracy']:.2f}",
        f"{r['test_nll']:.4f}",
        "–" if elbo is None else f"{elbo:.4f}",
        str(r["steps"]),
        f"{r['train_wall_time_s']:.0f}",
    ]


def markdown_table(runs: Iterable[Path]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row(Path(r))) + " |" for r in runs]
    return "\n".join(lines)
