"""What the finished cells of a grid hold, read back for the tables and the claims: which seeds of a cell have
finished, their ``results.json``, and how a value over seeds is written (``mean ± sd (n)``)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from pathlib import Path

from ..data.registry import num_classes
from ..errors import DataError
from ..files import read_json
from ..run.fit_check import chance_fit_warning
from .grids import Cell
from .kept import kept_root

LABELS = {
    "mnist-rot": "fully rotated",
    "mnist-rot90": "partially rotated",
    "mnist": "regular",
    "mnist-trans": "translated",
    "mnist-scale": "scaled",
    "mnist-rot-trans": "rotated + translated",
    "mnist-rot-scale": "rotated + scaled",
    "mnist-trans-scale": "translated + scaled",
    "cifar10-rot": "rotated CIFAR-10",
    "cifar10-trans": "translated CIFAR-10",
    "cifar10-scale": "scaled CIFAR-10",
    "cifar10": "CIFAR-10",
}


def finished(cell: Cell, protocol: str, root: Path) -> list[tuple[int, Path]]:
    """``(seed, folder)`` of every finished run (``results.json`` present) of ``cell``, in seed order: its run
    folder under ``root``, or, for a seed with none there, the outputs kept in the repository (:mod:`.kept`)."""
    stem = cell.name(0)[: -len("-s0")]
    found: dict[int, Path] = {}
    for folder in (root / protocol, kept_root() / protocol):  # a run folder first
        if not folder.exists():
            continue
        for d in folder.iterdir():
            m = re.fullmatch(re.escape(stem) + r"-s(\d+)", d.name)
            if m and (d / "results.json").exists():
                found.setdefault(int(m.group(1)), d)
    return sorted(found.items())


def cell_results(cell: Cell, protocol: str, root: Path) -> list[dict]:
    """The ``results.json`` of every finished seed of ``cell``."""
    return [read_json(d / "results.json") for _, d in finished(cell, protocol, root)]


def at_chance(r: dict) -> bool:
    """Whether a finished run fitted its training data no better than chance: the warning its ``results.json`` keeps,
    or, for results written before runs kept it, the same test (:mod:`pyroinv.run.fit_check`) on its training
    log-likelihood."""
    if r.get("warnings"):
        return True
    try:
        classes = num_classes(r["dataset"])
    except (KeyError, DataError):  # no data set recorded, or a user's .npz: nothing to test against
        return False
    return chance_fit_warning(r.get("train_loglik_per_datapoint"), classes, None) is not None


def mean_sd(values: Sequence[float], fmt: str = "{:.2f}", unit: str = "") -> str:
    """``m`` for one value, ``m ± sd (n)`` for several, ``–`` for none."""
    if not values:
        return "–"
    m = fmt.format(statistics.fmean(values)) + unit
    return m if len(values) == 1 else f"{m} ± {fmt.format(statistics.stdev(values))}{unit} ({len(values)})"
