"""The training loop of every fit: steps, metric records, progress, checkpoints, divergence and stops.

:func:`train_loop` runs a :class:`~pyroinv.inference.train.Trainer` to its end (or until it is told to stop) and
hands what it makes to a :class:`FitCallbacks`: each metric record (step, epoch, loss, ``elbo_per_datapoint`` =
``-loss / N``, the training batch's NLL, the regime diagnostics, ``eta`` raw and in human units, the learning rate
and the wall time) and each checkpoint's state. :class:`~pyroinv.classifier.InvariantClassifier.fit` keeps the
records in memory and its checkpoint in one file; the command line's run folders
(:mod:`pyroinv.run.experiment`) write them to ``metrics.jsonl`` and ``checkpoint.pt``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from ..errors import PyroinvError
from ..inference.train import Trainer
from ..model import lie
from ..model.methods import method

log = logging.getLogger("pyroinv")


class TrainingDiverged(PyroinvError):
    """The loss became NaN or infinite."""


class FitCallbacks:
    """What a fit does with its records and checkpoints; the defaults keep nothing and never stop early."""

    def started(self, trainer: Trainer) -> None:
        """The trainer is built (and its checkpoint loaded): the last moment before the first step."""

    def record(self, record: dict[str, Any]) -> None:
        """A metric record (every ``log_every`` steps and at the last)."""

    def checkpoint(self, state: dict[str, Any]) -> None:
        """The trainer's state, to be saved (every ``checkpoint_every`` steps, at the last and before a stop)."""

    def should_stop(self) -> bool:
        """Stop after this step (a checkpoint is written first), e.g. on a signal."""
        return False

    def kept(self, step: int) -> str:
        """Where the checkpoint of ``step`` is kept, for the divergence message."""
        return f"the checkpoint of step {step} is kept"


def units_due(step: int, log_every: int, steps_per_epoch: int, done: bool) -> bool:
    """Whether the metric record of ``step`` counts the inactive units (:meth:`Trainer.inactive_units`, which
    costs most of a training step): at the 1st, 2nd, 4th, 8th, ... record (the units die in the first steps),
    at the first record of each epoch and at the last step. At the main job's settings that is 31 counts in
    3,768 steps, against 377 at every record."""
    n = step // log_every
    return done or (n > 0 and n & (n - 1) == 0) or step % steps_per_epoch < log_every


def metrics_record(trainer: Trainer, rec: dict[str, float], units: bool = True) -> dict[str, Any]:
    """One metric record: the step's own numbers, the batch NLL, the regime diagnostics (the inactive units where
    ``units``), eta and the wall time."""
    eta = trainer.model.invariance.eta.detach().cpu()
    return {
        **rec,
        "nll": trainer.last_batch_nll,
        **trainer.diagnostics(units=units),
        "eta": [float(v) for v in eta],
        "eta_human": lie.to_human(eta, trainer.model.invariance.image_size),
        "wall_time": trainer.wall_time,
    }


def regime(r: dict[str, Any]) -> str:
    """``KL/N 0.018 q 0.97 |mu| 36.1 off 12%``: the diagnostics of a metrics record, as the progress line shows them."""
    parts = []
    if "kl_per_datapoint" in r:
        parts.append(f"KL/N {r['kl_per_datapoint']:.3f}")
    if "laplace_per_datapoint" in r:
        parts.append(f"Laplace/N {r['laplace_per_datapoint']:.3f}")
    if "q_scale" in r:
        parts.append(f"q {r['q_scale']:.2f}")
    parts.append(f"|mu| {r['mu_norm']:.1f}")
    if "inactive_units" in r:
        parts.append(f"off {100 * r['inactive_units']:.0f}%")
    return " ".join(parts)


def progress_bar(total: int, initial: int, enabled: bool | None):
    """A tqdm bar over the steps (``enabled=None``: when stderr is a terminal)."""
    from tqdm import tqdm

    if enabled is None:
        enabled = sys.stderr.isatty()
    return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True, disable=not enabled)


def train_loop(
    trainer: Trainer,
    callbacks: FitCallbacks | None = None,
    log_every: int = 10,
    checkpoint_every: int | None = None,
    max_steps: int | None = None,
    progress: bool | None = None,
) -> bool:
    """Run ``trainer``'s remaining steps; ``True`` when training is over, ``False`` when it stopped early
    (``max_steps`` steps in this call, or ``callbacks.should_stop()``), its checkpoint handed over first.

    A NaN or infinite loss stops with :class:`TrainingDiverged` (one line: the step, and what to try)."""
    callbacks = callbacks or FitCallbacks()
    every = checkpoint_every or trainer.steps_per_epoch
    objective = method(trainer.cfg.inference).objective.short
    bar = progress_bar(trainer.total_steps, trainer.step, progress)
    last_good = trainer.step
    steps_this_call = 0
    last_units: dict[str, float] = {}  # the last count of inactive units, for the progress line
    try:
        while not trainer.done:
            rec = trainer.train_step(sync=False)  # the loss stays on the device until it is read below
            steps_this_call += 1
            record_now = rec["step"] % log_every == 0 or trainer.done
            save_now = trainer.step % every == 0 or trainer.done
            stop_now = callbacks.should_stop() or (max_steps is not None and steps_this_call >= max_steps)
            if record_now or save_now or stop_now:
                bad = trainer.first_nonfinite()
                if bad is not None:
                    step, value = bad
                    raise TrainingDiverged(
                        f"loss became {value} at step {step} (epoch {(step - 1) // trainer.steps_per_epoch}); "
                        f"{callbacks.kept(last_good)}. Try a smaller --lr, a smaller --guide-init-scale or "
                        f"--eta-constraint tanh"
                    )
            if record_now:
                units = units_due(int(rec["step"]), log_every, trainer.steps_per_epoch, trainer.done)
                r = metrics_record(trainer, {**rec, **trainer.losses()}, units=units)
                callbacks.record(r)
                if "inactive_units" in r:
                    last_units = {"inactive_units": r["inactive_units"]}
                shown = {**last_units, **r}
                desc = trainer.model.invariance.describe()
                bar.set_postfix_str(
                    f"{objective} {r['elbo_per_datapoint']:.3f} NLL {r['nll']:.3f} {regime(shown)} {desc}"
                )
                if bar.disable:
                    log.info(
                        "step %d/%d epoch %d loss %.4g %s %.4f NLL %.3f %s %s lr %.2e %.2f steps/s",
                        r["step"],
                        trainer.total_steps,
                        r["epoch"],
                        r["loss"],
                        objective,
                        r["elbo_per_datapoint"],
                        r["nll"],
                        regime(shown),
                        desc,
                        r["lr"],
                        r["step"] / max(trainer.wall_time, 1e-9),
                    )
            bar.update(1)
            if save_now:
                callbacks.checkpoint(trainer.state_dict())
                last_good = trainer.step
            if stop_now:
                if last_good != trainer.step:
                    callbacks.checkpoint(trainer.state_dict())
                return False
    finally:
        bar.close()
    return True


__all__ = ["FitCallbacks", "TrainingDiverged", "metrics_record", "progress_bar", "regime", "train_loop", "units_due"]
