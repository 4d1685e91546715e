"""How long a grid's unfinished cells will take, from the kept cells that have run (:mod:`.kept`).

A cell's cost depends on what a training step computes, not on its data set or its ``eta``: the network and its
sizes, the method, the S transforms (none without invariance) and the batch, on one kind of device. So a cell
that has not run is priced by the kept cells of the same :func:`cost_key`:

    seconds ~= (train seconds / steps of the kept cell) * planned steps + the kept cell's evaluation seconds,

taking the medians over those of them nearest in training-set size (the Laplace method refreshes its curvature
every epoch, so its cost per step depends on the size; cells of one cost ran beside different loads), on the same
device kind (``cpu`` or ``cuda``). The kept cells ran at one thread, two at a time on the machine that made them, or
several to a GPU; an estimate carries their conditions with it. ``--dry-run`` prints it per cell and in all;
``--minutes`` does not start a cell whose estimate exceeds the time left
(:meth:`pyroinv.reproduce.runner.DaskRunner.run`). How near the estimates come is checked on the kept cells
themselves (:func:`backtest`: each priced from the others of its cost), and ``--dry-run`` says it in its last line.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config
from ..data.registry import num_train
from ..errors import DataError
from ..files import read_json
from ..inference.train import run_length
from .kept import kept_root

#: the settings that decide what a training step computes (a cell's cost); ``transforms`` stands for
#: ``invariance != "none"``
COST_FIELDS = (
    "network",
    "inference",
    "laplace_layers",
    "hidden",
    "depth",
    "channels",
    "activation",
    "samples",
    "batch_size",
    "estimator",
    "average",
    "elbo",
    "guide",
)


#: how :func:`summary` names a device kind
WHERE = {"cpu": "the CPU", "cuda": "a GPU"}


@dataclass(frozen=True)
class Measured:
    """One kept cell's cost: its training examples, seconds per training step, seconds of evaluation and steps."""

    num_data: int
    step_s: float
    eval_s: float
    steps: int = 0

    @property
    def seconds(self) -> float:
        """The wall time the cell took: training and evaluation."""
        return self.step_s * self.steps + self.eval_s


def cost_key(cfg: dict[str, Any], device: str) -> tuple:
    """What a cell's cost depends on, from its ``config.json`` (or ``Config.to_dict()``) and device kind; a setting
    that a folder written before it existed lacks takes its default."""
    defaults = _defaults()
    key = tuple(_hashable(cfg.get(f, defaults[f])) for f in COST_FIELDS)
    return (*key, cfg.get("invariance") != "none", device)


@functools.cache
def _defaults() -> dict[str, Any]:
    return {
        f.name: f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[operator]
        for f in dataclasses.fields(Config)
    }


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def planned_steps(cfg: dict[str, Any], num_data: int) -> int:
    """The steps a run of ``cfg`` on ``num_data`` examples takes (:func:`~pyroinv.inference.train.run_length`, as
    the trainer counts them)."""
    epochs, per_epoch = run_length(num_data, cfg["batch_size"], cfg["epochs"], cfg.get("min_steps") or 0)
    return epochs * per_epoch


def training_examples(cfg: dict[str, Any]) -> int | None:
    """The training examples of a run of ``cfg`` (its subset, else the data set's training split less the
    validation set); ``None`` for a data set whose size is not known without loading it (a user's ``.npz``)."""
    try:
        total = num_train(cfg["dataset"]) - (cfg.get("valid_size") or 0)
    except DataError:
        return cfg.get("train_size")
    return min(cfg["train_size"], total) if cfg.get("train_size") else total


def measured(protocols: Iterable[str], root: Path | None = None) -> dict[tuple, list[Measured]]:
    """Every kept cell of ``protocols`` with its timings, by :func:`cost_key`."""
    found: dict[tuple, list[Measured]] = {}
    for protocol in protocols:
        folder = (root or kept_root()) / protocol
        for results in sorted(folder.glob("*/results.json")) if folder.exists() else []:
            try:
                r, cfg = read_json(results), read_json(results.with_name("config.json"))
                num_data = read_json(results.with_name("meta.json"))["num_data"]
                step_s = r["train_wall_time_s"] / r["steps"]
                eval_s = r["eval_wall_time_s"]
                device = r["device"]
            except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
                continue  # an SGPR cell, or one written before runs recorded their timings
            found.setdefault(cost_key(cfg, device), []).append(Measured(num_data, step_s, eval_s, r["steps"]))
    return found


def estimate_seconds(cfg: dict[str, Any], device: str, costs: dict[tuple, list[Measured]]) -> float | None:
    """The expected wall time of a run of ``cfg`` on ``device`` from the kept cells ``costs`` (:func:`measured`);
    ``None`` where no kept cell has the same cost key."""
    n = training_examples(cfg)
    same = costs.get(cost_key(cfg, device))
    if not same or not n:
        return None
    return _priced(same, n, planned_steps(cfg, n))


def _priced(same: list[Measured], n: int, steps: int) -> float:
    """The seconds of a run of ``steps`` steps on ``n`` examples, at the median seconds per step and of evaluation
    of the kept cells ``same`` nearest in training-set size to ``n`` (cells of one cost ran beside different loads)."""
    gap = min(abs(math.log(m.num_data / n)) for m in same)
    peers = [m for m in same if abs(math.log(m.num_data / n)) == gap]
    return statistics.median(m.step_s for m in peers) * steps + statistics.median(m.eval_s for m in peers)


def backtest(costs: dict[tuple, list[Measured]], device: str) -> list[float]:
    """How the estimates fare on cells whose time is known: each kept cell on ``device`` with another of its cost
    key is priced from the others, as :func:`estimate_seconds` prices an unfinished one (a kept cell's planned
    steps are the steps it ran), and the ratio estimate / time taken is returned for each."""
    ratios = []
    for key, same in costs.items():
        if key[-1] != device:
            continue
        for i, cell in enumerate(same):
            others = same[:i] + same[i + 1 :]
            if others and cell.seconds > 0:
                ratios.append(_priced(others, cell.num_data, cell.steps) / cell.seconds)
    return ratios


def backtest_summary(ratios: list[float], device: str) -> str:
    """One line on :func:`backtest`'s ratios: how many cells, the median ratio and the range of the middle 90%."""
    if len(ratios) < 2:
        return f"too few kept cells on {WHERE.get(device, device)} with a peer of their cost to check the estimates on"
    cuts = statistics.quantiles(ratios, n=20, method="inclusive")
    return (
        f"checked on the {len(ratios)} kept cells on {WHERE.get(device, device)} with a peer of their cost, each "
        f"priced from the others: estimate / time taken ×{statistics.median(ratios):.2f} at the median, "
        f"×{cuts[0]:.2f}–×{cuts[-1]:.2f} for the middle 90%"
    )


def duration(seconds: float) -> str:
    """``"40 s"``, ``"12 min"``, ``"3.4 h"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def summary(estimates: list[float | None], device: str, brief: bool = False) -> str:
    """One line for the cells still to run: how many, and how long one worker takes for those that can be priced
    (``brief``: without saying how)."""
    known = [s for s in estimates if s is not None]
    if not estimates:
        return "every cell has finished"
    line = f"{len(estimates)} cell(s) to run"
    if known:
        which = "" if len(known) == len(estimates) else f" (the {len(known)} with a kept cell to go by)"
        line += f": about {duration(sum(known))} for one worker on {WHERE.get(device, device)}{which}"
        if not brief:
            line += (
                ", at the speed of the kept cells of the same network, method and sizes; workers that run at "
                "once share it"
            )
    if len(known) < len(estimates):
        line += f"; {len(estimates) - len(known)} with no kept cell to go by"
    return line


def precision_note(precisions: Iterable[str], device: str) -> str | None:
    """A line for cells that compute in bfloat16 (``--precision bf16``, as the ``paper-e30`` protocols do) on a
    ``device`` without native bfloat16 products, where torch emulates them several times slower than float32 and
    the estimates, made from cells on processors that had them, run short; else ``None``."""
    from ..model.precision import native_bf16

    if "bf16" not in set(precisions) or native_bf16(device):
        return None
    return (
        f"note: these cells compute in bfloat16 and {WHERE.get(device, device)} here has no native bfloat16 products "
        "(AVX512_BF16 or AMX): they will run several times slower than float32 and than the estimates"
    )


__all__ = [
    "COST_FIELDS",
    "Measured",
    "backtest",
    "backtest_summary",
    "cost_key",
    "duration",
    "estimate_seconds",
    "measured",
    "planned_steps",
    "precision_note",
    "summary",
    "training_examples",
]
