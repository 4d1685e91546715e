"""Markdown tables of finished runs (``results.json`` + ``config.json``), for the results pages (docs/results/)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
#: columns shown only where a run of the table has them: ``results.json`` key, heading, format
OPTIONAL = (
    ("valid_accuracy", "valid acc. %", lambda v: f"{100 * v:.2f}"),
    ("inactive_units", "inactive units %", lambda v: f"{100 * v:.1f}"),
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
    """One row per run; the :data:`OPTIONAL` columns (validation accuracy, inactive units) where any run has them."""
    runs = [Path(r) for r in runs]
    results: list[dict[str, Any]] = [read_json(r / "results.json") for r in runs]
    extra = [(key, head, fmt) for key, head, fmt in OPTIONAL if any(r.get(key) is not None for r in results)]
    lines = [
        "| " + " | ".join([*COLUMNS, *(head for _, head, _ in extra)]) + " |",
        "|" + "---|" * (len(COLUMNS) + len(extra)),
    ]
    for run, r in zip(runs, results):
        cells = row(run) + ["–" if r.get(key) is None else fmt(r[key]) for key, _, fmt in extra]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
