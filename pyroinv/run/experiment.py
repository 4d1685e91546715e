"""One training run end to end: data, SVI, progress, checkpoints, then evaluation, results, plots and ArviZ.

``run_experiment(Config(...), out="runs/rot")`` is the Python form of ``python scripts/svi_train.py``.
The folder's layout, its checks and the results schema are :mod:`pyroinv.run.folder`'s; each
``metrics.jsonl`` record holds step, epoch, loss, ``elbo_per_datapoint`` = ``-loss / N`` (the minibatch
ELBO estimate under ``vi``; the log joint under ``map``, the log-likelihood under ``ml``), the training-batch
NLL, the regime diagnostics (:meth:`pyroinv.inference.train.Trainer.diagnostics`), eta raw and in human units, the
learning rate and the wall time.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import torch

from ..model import lie
from ..inference.build import check_inputs, device_name, resolve_device
from ..config import Config
from ..data import describe, load_dataset
from ..errors import ConfigError, PyroinvError, one_line
from ..inference.evaluate import elbo_per_datapoint, inactive_units, posterior_predictive
from ..inference.laplace_layers import laplace_evidences
from ..inference.memory import check_fits
from ..inference.methods import method
from .checkpoint import append_line, write_failure
from .fit_check import chance_fit_warning
from .folder import CHECKPOINT, CONFIG, DONE, FOREIGN, METRICS, RESUMABLE, UNSTARTED, RunFolder, RunResults
from .lock import RunLock
from ..inference.train import Trainer

log = logging.getLogger("pyroinv")


class TrainingDiverged(PyroinvError):
    """The loss became NaN or infinite."""


class Interrupted(PyroinvError):
    """SIGINT or SIGTERM arrived; a checkpoint was written. ``signum`` says which."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


class StopSignals:
    """SIGINT and SIGTERM for the whole run: while training, a signal is noted and the loop checkpoints and stops
    at the end of its step; once training is over (:meth:`raise_now`), a signal stops the final evaluation, plots
    and ArviZ export at once with :class:`Interrupted` (nothing of the results is written before the end, so
    ``--resume`` finishes the run); once ``results.json`` is written (:meth:`ignore`), signals are noted only."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._finishing: str | None = None
        self._previous: dict = {}

    def _handler(self, signum, _frame) -> None:
        self.received = signum
        if self._finishing is not None:
            raise Interrupted(f"stopped by signal {signal.Signals(signum).name} during {self._finishing}; the "
                              f"trained checkpoint is kept, finish the run with --resume", signum)

    def raise_now(self, during: str) -> None:
        """From now on a signal raises :class:`Interrupted` naming ``during`` (a pending one raises at once)."""
        self._finishing = during
        if self.received is not None:
            self._handler(self.received, None)

    def ignore(self) -> None:
        self._finishing = None

    def __enter__(self) -> "StopSignals":
        self._previous = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._previous.items():
            signal.signal(s, h)


def _record(trainer: Trainer, rec: dict[str, float]) -> dict[str, Any]:
    eta = trainer.model.invariance.eta.detach().cpu()
    return {**rec, "nll": trainer.last_batch_nll, **trainer.diagnostics(), "eta": [float(v) for v in eta],
            "eta_human": lie.to_human(eta, trainer.model.invariance.image_size), "wall_time": trainer.wall_time}


def _regime(r: dict[str, Any]) -> str:
    """``KL/N 0.018 q 0.97 |mu| 36.1``: the diagnostics of a metrics record, as the progress line shows them."""
    parts = []
    if "kl_per_datapoint" in r:
        parts.append(f"KL/N {r['kl_per_datapoint']:.3f}")
    if "laplace_per_datapoint" in r:
        parts.append(f"Laplace/N {r['laplace_per_datapoint']:.3f}")
    if "q_scale" in r:
        parts.append(f"q {r['q_scale']:.2f}")
    parts.append(f"|mu| {r['mu_norm']:.1f}")
    return " ".join(parts)


def _progress(total: int, initial: int, enabled: bool | None):
    from tqdm import tqdm

    if enabled is None:
        enabled = sys.stderr.isatty()
    return tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True, disable=not enabled)


def run_experiment(cfg: Config, out: str | Path, resume: bool = False, data_root: str | None = None,
                   cache_dir: str | None = None, progress: bool | None = None, log_every: int = 10,
                   checkpoint_every: int | None = None, max_steps: int | None = None,
                   quiet: bool = False, cuda_graph: bool | None = None) -> dict[str, Any]:
    """Train (or continue) one run into ``out`` and return its results.

    Args:
        cfg: the run's configuration (validated here).
        out: run folder; must not hold a run unless ``resume``.
        resume: continue from ``out/checkpoint.pt`` (the configuration must match).
        progress: tqdm bar (default: when stderr is a terminal; plain log lines otherwise).
        log_every: steps between metric records.
        checkpoint_every: steps between checkpoints (default: once per epoch).
        max_steps: stop after this many steps in this call (the run stays resumable).
        quiet: do not print the closing summary (for notebooks; the files are written as usual).
        cuda_graph: on a CUDA device, replay the training step as a CUDA graph (default: on unless
            ``$PYROINV_CUDA_GRAPH`` is ``0``; :mod:`pyroinv.inference.step_graph`).
    """
    cfg.validate()
    device = resolve_device(cfg.device)  # fail before anything is written
    folder = RunFolder(out)
    with RunLock(folder.path), StopSignals() as signals:  # one writer per folder; Ctrl-C stops with a checkpoint
        return _train(cfg, folder, device, signals, resume, data_root, cache_dir, progress, log_every,
                      checkpoint_every, max_steps, quiet, cuda_graph)


def _train(cfg: Config, folder: RunFolder, device: torch.device, signals: StopSignals, resume: bool,
           data_root: str | None, cache_dir: str | None, progress: bool | None, log_every: int,
           checkpoint_every: int | None, max_steps: int | None, quiet: bool,
           cuda_graph: bool | None = None) -> dict[str, Any]:
    """:func:`run_experiment` under the folder's lock and the signal handlers."""
    out = folder.path
    if resume and folder.state(cfg.differences) == UNSTARTED and (folder / CONFIG).exists():
        log.info("%s", f"{out} was stopped before its first checkpoint; starting it again from step 0")
        resume = False
    if resume:  # a damaged checkpoint is reported before anything else is done
        folder.check_resume(cfg)
        state, used = folder.load_checkpoint(device)
    else:
        folder.check_new(cfg)
    data = load_dataset(cfg.dataset, data_root=data_root, cache_dir=cache_dir, train_size=cfg.train_size,
                        test_size=cfg.test_size, seed=cfg.seed, valid_size=cfg.valid_size)
    check_inputs(cfg, data.input_shape)  # before anything is written
    # a run that cannot fit stops here with one line, instead of being killed by the operating system
    check_fits(cfg, data.input_shape, data.num_classes, len(data.y_train), len(data.y_test), device)
    log.info("data %s", describe(data, cfg.train_size, cfg.test_size))
    trainer = Trainer(cfg, data, device=device, cuda_graph=cuda_graph)
    if resume:
        if used.name != CHECKPOINT:
            log.info("%s", f"{folder / CHECKPOINT} is damaged or missing; resuming from the previous checkpoint {used}")
        try:
            state["model"].pop("features._input_shape", None)  # a buffer of folders written before meta.json
            trainer.load_state_dict(state)
        except (KeyError, RuntimeError, ValueError, TypeError) as err:
            raise ConfigError(f"--resume: {used} does not fit this run's configuration ({one_line(err, 160)}); "
                              f"resume with the flags it was trained with, or start a new --out") from None
        folder.truncate_metrics(trainer.step)
        log.info("resumed at step %d of %d", trainer.step, trainer.total_steps)
    else:
        folder.start(cfg, data.input_shape, data.num_classes, trainer.num_data)
    log.info("device %s, %d steps (%d epochs x %d)%s", trainer.device, trainer.total_steps, trainer.epochs,
             trainer.steps_per_epoch, "; full batches replayed as a CUDA graph" if trainer.graph is not None else "")
    every = checkpoint_every or trainer.steps_per_epoch
    objective = method(cfg.inference).objective.short
    bar = _progress(trainer.total_steps, trainer.step, progress)
    last_good = trainer.step
    steps_this_call = 0
    try:
        metrics = open(folder / METRICS, "a")
    except OSError as err:
        raise write_failure(folder / METRICS, err) from None
    try:
        with metrics:
            while not trainer.done:
                rec = trainer.train_step(sync=False)  # the loss stays on the device until it is read below
                steps_this_call += 1
                record_now = rec["step"] % log_every == 0 or trainer.done
                save_now = trainer.step % every == 0 or trainer.done
                stop_now = signals.received is not None or (max_steps is not None and steps_this_call >= max_steps)
                if record_now or save_now or stop_now:
                    bad = trainer.first_nonfinite()
                    if bad is not None:
                        step, value = bad
                        raise TrainingDiverged(
                            f"loss became {value} at step {step} (epoch {(step - 1) // trainer.steps_per_epoch}); "
                            f"the checkpoint of step {last_good} is kept in {out}. Try a smaller --lr, a smaller "
                            f"--guide-init-scale or --eta-constraint tanh")
                if record_now:
                    r = _record(trainer, {**rec, **trainer.losses()})
                    append_line(metrics, folder / METRICS, json.dumps(r) + "\n")
                    desc = trainer.model.invariance.describe()
                    bar.set_postfix_str(f"{objective} {r['elbo_per_datapoint']:.3f} NLL {r['nll']:.3f} "
                                        f"{_regime(r)} {desc}")
                    if bar.disable:
                        log.info("step %d/%d epoch %d loss %.4g %s %.4f NLL %.3f %s %s lr %.2e %.2f steps/s",
                                 r["step"], trainer.total_steps, r["epoch"], r["loss"], objective,
                                 r["elbo_per_datapoint"], r["nll"], _regime(r), desc, r["lr"],
                                 r["step"] / max(trainer.wall_time, 1e-9))
                bar.update(1)
                if save_now:
                    folder.save_checkpoint(trainer.state_dict())
                    last_good = trainer.step
                if stop_now:
                    if last_good != trainer.step:
                        folder.save_checkpoint(trainer.state_dict())
                    if signals.received is not None:
                        raise Interrupted(f"stopped by signal {signal.Signals(signals.received).name} at step "
                                          f"{trainer.step}; checkpoint written, continue with --resume",
                                          signals.received)
                    return {"step": trainer.step, "finished": False}
    finally:
        bar.close()
    return finish(trainer, folder.path, quiet=quiet, signals=signals)


@contextlib.contextmanager
def _timed(phases: dict[str, float], name: str) -> Iterator[None]:
    """Add the wall time of the block to ``phases[name]`` (seconds)."""
    t0 = time.perf_counter()
    yield
    phases[name] = round(phases.get(name, 0.0) + time.perf_counter() - t0, 3)


def _w2_estimate(guide) -> torch.Tensor | None:
    """The guide's estimate of ``W2`` (the point, or q's mean) as a start for the mode; ``None`` for an AutoGuide."""
    for name in ("W2_hat", "loc"):
        if isinstance(getattr(guide, name, None), torch.Tensor):
            return getattr(guide, name).detach()
    return None


def finish(trainer: Trainer, out: Path, quiet: bool = False, signals: StopSignals | None = None) -> dict[str, Any]:
    """Evaluate, write the plots, the ArviZ file and, last, ``results.json``; print a summary.

    With ``signals`` (a run's :class:`StopSignals`), SIGINT or SIGTERM before ``results.json`` is written stops
    with :class:`Interrupted`; the folder then holds the final checkpoint and ``--resume`` finishes it."""
    from .arviz_export import export_data, readable_summary, save_inference_data
    from .plots import plot_curves, plot_eta, plot_filter_banks

    cfg, folder = trainer.cfg, RunFolder(out)
    if signals is not None:
        signals.raise_now("the final evaluation, plots and ArviZ export")
    m = method(cfg.inference)
    t0 = time.perf_counter()
    phases: dict[str, float] = {}
    model, guide = trainer.model, trainer.guide
    torch.manual_seed(cfg.seed + 1)
    with _timed(phases, "test"):  # one pass over the test set gives the test metrics and the ArviZ groups
        pp = posterior_predictive(model, guide, trainer.x_test, trainer.y_test, draws=cfg.eval_draws)
        test = pp.metrics()
    valid = {}
    if trainer.valid is not None:  # the same predictive on the images held out of the training set
        torch.manual_seed(cfg.seed + 1)  # the same draws as the test pass (and as evaluate.py --split valid)
        with _timed(phases, "valid"):
            v = posterior_predictive(model, guide, *trainer.valid, draws=cfg.eval_draws).metrics()
        valid = {"valid_accuracy": v["accuracy"], "valid_nll": v["nll"], "valid_size": int(trainer.valid[1].shape[0])}
    # at least 32 draws of W2 in all (one per batch of 500): a single draw on a small data set is far too noisy
    draws = max(1, math.ceil(32 / math.ceil(len(trainer.y_train) / 500)))
    with _timed(phases, "train_elbo"):
        elbo = elbo_per_datapoint(model, guide, trainer.x_train, trainer.y_train, draws=draws)
    # a second estimate of log p(D | eta), beside the ELBO: the Laplace evidence of W2 at the trained body (the logits
    # averaged, so that the last-layer GGN is the exact Hessian; a proper prior)
    with _timed(phases, "laplace"):
        evidence = laplace_evidences(cfg, model, trainer.x_train, trainer.y_train, cfg.seed, _w2_estimate(guide)) \
            if model.average == "logits" and model.prior_kind == "normal" else {}
    with _timed(phases, "arviz"):
        idata = export_data(model, guide, trainer.x_train, trainer.y_train, trainer.x_test, trainer.y_test,
                            cfg.export_draws, seed=cfg.seed)
    with _timed(phases, "units"):  # last of the random draws, so the numbers above are those of earlier runs
        units = inactive_units(model, trainer.x_train[::max(1, len(trainer.y_train) // 1000)])
    inv = model.invariance
    eta = inv.eta.detach().cpu()
    at_chance = chance_fit_warning(elbo["loglik_per_datapoint"], trainer.num_classes,
                                   inv.describe() if inv.learn else None)
    records = folder.metrics()
    with _timed(phases, "plots"):
        if records:
            plot_eta(records, inv.active, folder / "eta.png", title=f"{cfg.dataset}, {cfg.network}, {cfg.inference}")
            plot_curves(records, folder / "curves.png", objective=m.objective.label)
        if model.features.is_image and model.features.warps_weights:  # input augmentation has no warped filters
            plot_filter_banks(model.features, folder / "filters.png")
    with _timed(phases, "arviz"):
        save_inference_data(idata, folder / "posterior.nc")
    results = folder.write_results(RunResults(
        dataset=cfg.dataset, invariance=cfg.invariance, network=cfg.network, inference=cfg.inference,
        test_accuracy=test["accuracy"], test_nll=test["nll"],
        elbo_per_datapoint=elbo["elbo_per_datapoint"] if m.reports_elbo else None,
        train_loglik_per_datapoint=elbo["loglik_per_datapoint"],
        eta=[float(v) for v in eta], eta_human=lie.to_human(eta, inv.image_size), learned_invariance=inv.describe(),
        steps=trainer.step, train_size=trainer.num_data, test_size=int(trainer.x_test.shape[0]),
        train_wall_time_s=trainer.wall_time, eval_wall_time_s=time.perf_counter() - t0, device=str(trainer.device),
        device_name=device_name(trainer.device), inactive_units=units, eval_phases_s=phases,
        graph_replays=trainer.graph_replays, warnings=[at_chance] if at_chance else [], **evidence, **valid))
    if signals is not None:
        signals.ignore()  # the run is complete: a signal now changes nothing
    if at_chance:
        log.warning("warning: %s", at_chance)
    if quiet:
        return results
    print(f"\nlearned invariance: {inv.describe()}; inactive units: {100 * units:.1f}% of the last hidden layer's")
    line = f"test accuracy {100 * test['accuracy']:.2f}%  test NLL {test['nll']:.4f}"
    line += f"  validation accuracy {100 * valid['valid_accuracy']:.2f}%" if valid else ""
    line += f"  train ELBO/N {elbo['elbo_per_datapoint']:.4f}" if m.reports_elbo else ""
    line += f"  Laplace log evidence/N {evidence['laplace_per_datapoint']:.4f}" if evidence else ""
    layers = evidence.get("laplace_layers_per_datapoint")
    print(line + (f" (every layer: {layers:.4f})" if layers is not None else ""))
    print("\nArviZ summary (per-class weight norms; predictive probability of the true class, first test points):")
    print(readable_summary(idata).to_string())
    written = sorted(p.name for p in folder.path.iterdir() if p.suffix in (".json", ".jsonl", ".png", ".nc"))
    print(f"\nresults in {folder.path}/ ({', '.join(written)})")
    return results


def run_or_load(cfg: Config, out: str | Path, **kwargs: Any) -> dict[str, Any]:
    """The results of ``cfg`` in ``out``: read when that run has finished, else trained (or resumed).

    For notebooks and scripts that are executed again: a finished run is not retrained, an interrupted
    one is resumed from its checkpoint, one stopped before its first checkpoint is started again. A
    folder that holds a run with other settings is refused (one-line :class:`ConfigError`).
    """
    folder = RunFolder(out)
    state = folder.state(cfg.differences)
    if state == FOREIGN:
        folder.check_same_run(cfg)  # names the settings that differ
    if state == DONE:
        return folder.results()
    # an attempt stopped before its first checkpoint is started again from step 0
    return run_experiment(cfg, out, resume=state == RESUMABLE, **kwargs)
