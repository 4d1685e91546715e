"""What the finished cells of a grid hold, read back for the tables and the claims: which seeds of a cell have
finished, their ``results.json``, and how a value over seeds is written (``mean ± sd (n)``)."""
from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Sequence

from ..run.checkpoint import read_json
from .grids import Cell

LABELS = {"mnist-rot": "fully rotated", "mnist-rot90": "partially rotated", "mnist": "regular",
          "mnist-trans": "translated", "mnist-scale": "scaled", "mnist-rot-trans": "rotated + translated",
          "mnist-rot-scale": "rotated + scaled", "mnist-trans-scale": "translated + scaled",
          "cifar10-rot": "rotated CIFAR-10", "cifar10-trans": "translated CIFAR-10",
          "cifar10-scale": "scaled CIFAR-10", "cifar10": "CIFAR-10"}


def finished(cell: Cell, protocol: str, root: Path) -> list[tuple[int, Path]]:
    """``(seed, folder)`` of every finished run (``results.json`` present) of ``cell``, in seed order."""
    stem = cell.name(0)[:-len("-s0")]
    folder = root / protocol
    found = []
    if folder.exists():
        for d in folder.iterdir():
            m = re.fullmatch(re.escape(stem) + r"-s(\d+)", d.name)
            if m and (d / "results.json").exists():
                found.append((int(m.group(1)), d))
    return sorted(found)


def cell_results(cell: Cell, protocol: str, root: Path) -> list[dict]:
    """The ``results.json`` of every finished seed of ``cell``."""
    return [read_json(d / "results.json") for _, d in finished(cell, protocol, root)]


def mean_sd(values: Sequence[float], fmt: str = "{:.2f}", unit: str = "") -> str:
    """``m`` for one value, ``m ± sd (n)`` for several, ``–`` for none."""
    if not values:
        return "–"
    m = fmt.format(statistics.fmean(values)) + unit
    return m if len(values) == 1 else f"{m} ± {fmt.format(statistics.stdev(values))}{unit} ({len(values)})"
