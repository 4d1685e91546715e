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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import torch

from ..classifier import FitCallbacks, InvariantClassifier, TrainingDiverged  # noqa: F401 (its error, re-exported)
from ..classifier.classifier import CheckpointMismatch
from ..config import Config
from ..data import describe, load_dataset
from ..errors import ConfigError, PyroinvError
from ..files import append_line, write_failure
from ..inference.build import device_name, resolve_device
from ..inference.evaluate import elbo_per_datapoint, inactive_units, posterior_predictive
from ..inference.laplace_layers import laplace_evidences
from ..inference.train import Trainer
from ..model import lie
from ..model.autoguides import AutoW2Guide
from ..model.methods import method
from ..model.precision import native_bf16
from .fit_check import chance_fit_warning
from .folder import CHECKPOINT, CONFIG, DONE, FOREIGN, METRICS, RESUMABLE, UNSTARTED, RunFolder, RunResults
from .lock import RunLock

log = logging.getLogger("pyroinv")


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
            raise Interrupted(
                f"stopped by signal {signal.Signals(signum).name} during {self._finishing}; the "
                f"trained checkpoint is kept, finish the run with --resume",
                signum,
            )

    def raise_now(self, during: str) -> None:
        """From now on a signal raises :class:`Interrupted` naming ``during`` (a pending one raises at once)."""
        self._finishing = during
        if self.received is not None:
            self._handler(self.received, None)

    def ignore(self) -> None:
        self._finishing = None

    def __enter__(self) -> StopSignals:
        self._previous = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._previous.items():
            signal.signal(s, h)


class FolderWriter(FitCallbacks):
    """A fit's records and checkpoints into a run folder (``metrics.jsonl``, ``checkpoint.pt``), stopped by a
    signal. The folder is started (``config.json``, ``meta.json``) once the trainer is built, so a run refused by
    its settings writes nothing."""

    def __init__(self, folder: RunFolder, cfg: Config, signals: StopSignals, resuming: bool, data: str) -> None:
        self.folder, self.cfg, self.signals, self.resuming, self.data = folder, cfg, signals, resuming, data
        self.metrics: IO[str] | None = None

    def started(self, trainer: Trainer) -> None:
        log.info("data %s", self.data)
        if self.resuming:
            self.folder.truncate_metrics(trainer.step)
            log.info("resumed at step %d of %d", trainer.step, trainer.total_steps)
        else:
            self.folder.start(self.cfg, trainer.input_shape, trainer.num_classes, trainer.num_data)
        log.info(
            "device %s, %d steps (%d epochs x %d), products in %s%s%s",
            trainer.device,
            trainer.total_steps,
            trainer.epochs,
            trainer.steps_per_epoch,
            trainer.precision,
            f" ({self.cfg.precision}: native bfloat16 products "
            f"{'found' if native_bf16(trainer.device) else 'not found'})"
            if self.cfg.precision in ("auto", "bf16")
            else "",
            "; full batches replayed as a CUDA graph" if trainer.graph is not None else "",
        )
        try:
            self.metrics = open(self.folder / METRICS, "a")
        except OSError as err:
            raise write_failure(self.folder / METRICS, err) from None

    def record(self, record: dict[str, Any]) -> None:
        append_line(self.metrics, self.folder / METRICS, json.dumps(record) + "\n")

    def checkpoint(self, state: dict[str, Any]) -> None:
        self.folder.save_checkpoint(state)

    def should_stop(self) -> bool:
        return self.signals.received is not None

    def kept(self, step: int) -> str:
        return f"the checkpoint of step {step} is kept in {self.folder.path}"

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()


def run_experiment(
    cfg: Config,
    out: str | Path,
    resume: bool = False,
    data_root: str | None = None,
    cache_dir: str | None = None,
    progress: bool | None = None,
    log_every: int = 10,
    checkpoint_every: int | None = None,
    max_steps: int | None = None,
    quiet: bool = False,
    cuda_graph: bool | None = None,
) -> dict[str, Any]:
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
    clf = InvariantClassifier.from_config(cfg)  # validates cfg, once
    device = resolve_device(cfg.device)  # fail before anything is written
    folder = RunFolder(out)
    opts = RunOptions(data_root, cache_dir, progress, log_every, checkpoint_every, max_steps, quiet, cuda_graph)
    with RunLock(folder.path), StopSignals() as signals:  # one writer per folder; Ctrl-C stops with a checkpoint
        return _train(clf, folder, device, signals, resume, opts)


@dataclass(frozen=True)
class RunOptions:
    """How :func:`run_experiment` runs (its keyword arguments), beside what it runs (the ``Config``)."""

    data_root: str | None = None
    cache_dir: str | None = None
    progress: bool | None = None
    log_every: int = 10
    checkpoint_every: int | None = None
    max_steps: int | None = None
    quiet: bool = False
    cuda_graph: bool | None = None


def _train(
    clf: InvariantClassifier,
    folder: RunFolder,
    device: torch.device,
    signals: StopSignals,
    resume: bool,
    opts: RunOptions,
) -> dict[str, Any]:
    """:func:`run_experiment` under the folder's lock and the signal handlers."""
    cfg, out = clf.config, folder.path
    if resume and folder.state(cfg) == UNSTARTED and (folder / CONFIG).exists():
        log.info("%s", f"{out} was stopped before its first checkpoint; starting it again from step 0")
        resume = False
    if resume:  # a damaged checkpoint is reported before anything else is done
        folder.check_resume(cfg)
        state, used = folder.load_checkpoint(device)
    else:
        folder.check_new(cfg)
    data = load_dataset(
        cfg.dataset,
        data_root=opts.data_root,
        cache_dir=opts.cache_dir,
        train_size=cfg.train_size,
        test_size=cfg.test_size,
        seed=cfg.seed,
        valid_size=cfg.valid_size,
    )
    if resume and used.name != CHECKPOINT:
        log.info("%s", f"{folder / CHECKPOINT} is damaged or missing; resuming from the previous checkpoint {used}")
    writer = FolderWriter(folder, cfg, signals, resuming=resume, data=describe(data, cfg.train_size, cfg.test_size))
    try:
        clf.fit(
            data,
            device=device,
            progress=opts.progress,
            log_every=opts.log_every,
            checkpoint_every=opts.checkpoint_every,
            max_steps=opts.max_steps,
            callbacks=writer,
            resume_state=state if resume else None,
            cuda_graph=opts.cuda_graph,
        )
    except CheckpointMismatch as err:
        raise ConfigError(
            f"--resume: {used} does not fit this run's configuration ({err.detail}); resume with the "
            f"flags it was trained with, or start a new --out"
        ) from None
    finally:
        writer.close()
    trainer = clf.trainer
    assert trainer is not None  # fit made it
    if signals.received is not None:
        raise Interrupted(
            f"stopped by signal {signal.Signals(signals.received).name} at step {trainer.step}; "
            f"checkpoint written, continue with --resume",
            signals.received,
        )
    if not trainer.done:
        return {"step": trainer.step, "finished": False}
    return finish(trainer, folder.path, quiet=opts.quiet, signals=signals)


@contextlib.contextmanager
def _timed(phases: dict[str, float], name: str) -> Iterator[None]:
    """Add the wall time of the block to ``phases[name]`` (seconds)."""
    t0 = time.perf_counter()
    yield
    phases[name] = round(phases.get(name, 0.0) + time.perf_counter() - t0, 3)


def _w2_estimate(guide) -> torch.Tensor | None:
    """The guide's estimate of ``W2`` (the point, or q's mean) as a start for the mode; ``None`` for an AutoGuide."""
    return None if isinstance(guide, AutoW2Guide) else guide.median().detach()


@dataclass
class FinalEvaluation:
    """What :func:`finish` measures of a trained run, each phase timed in ``phases`` (seconds)."""

    test: dict[str, float]
    valid: dict[str, Any]
    elbo: dict[str, float]
    evidence: dict[str, float]
    idata: Any
    units: float
    phases: dict[str, float]


def evaluate_trained(trainer: Trainer) -> FinalEvaluation:
    """The posterior predictive on the test (and validation) set, the training ELBO/N, the Laplace evidences, the
    ArviZ data and the inactive units, in this order of random draws (seeded from ``cfg.seed``)."""
    from ..inference.arviz_export import export_data

    cfg, model, guide = trainer.cfg, trainer.model, trainer.guide
    phases: dict[str, float] = {}
    torch.manual_seed(cfg.seed + 1)
    with _timed(phases, "test"):  # one pass over the test set gives the test metrics and the ArviZ groups
        test = posterior_predictive(model, guide, trainer.x_test, trainer.y_test, draws=cfg.eval_draws).metrics()
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
        evidence = (
            laplace_evidences(cfg, model, trainer.x_train, trainer.y_train, cfg.seed, _w2_estimate(guide))
            if model.average == "logits" and model.prior_kind == "normal"
            else {}
        )
    with _timed(phases, "arviz"):
        idata = export_data(
            model,
            guide,
            trainer.x_train,
            trainer.y_train,
            trainer.x_test,
            trainer.y_test,
            cfg.export_draws,
            seed=cfg.seed,
        )
    with _timed(phases, "units"):  # last of the random draws, so the numbers above are those of earlier runs
        units = inactive_units(model, trainer.x_train[:: max(1, len(trainer.y_train) // 1000)])
    return FinalEvaluation(test, valid, elbo, evidence, idata, units, phases)


def _write_plots(trainer: Trainer, folder: RunFolder, phases: dict[str, float]) -> None:
    from .plots import plot_curves, plot_eta, plot_filter_banks

    cfg, model, records = trainer.cfg, trainer.model, folder.metrics()
    with _timed(phases, "plots"):
        if records:
            plot_eta(
                records,
                model.invariance.active,
                folder / "eta.png",
                title=f"{cfg.dataset}, {cfg.network}, {cfg.inference}",
            )
            plot_curves(records, folder / "curves.png", objective=method(cfg.inference).objective.label)
        if model.features.is_image and model.features.warps_weights:  # input augmentation has no warped filters
            plot_filter_banks(model.features, folder / "filters.png")


def _print_summary(trainer: Trainer, e: FinalEvaluation, folder: RunFolder) -> None:
    from ..inference.arviz_export import readable_summary

    reports_elbo = method(trainer.cfg.inference).reports_elbo
    print(
        f"\nlearned invariance: {trainer.model.invariance.describe()}; inactive units: {100 * e.units:.1f}% of the "
        f"last hidden layer's"
    )
    line = f"test accuracy {100 * e.test['accuracy']:.2f}%  test NLL {e.test['nll']:.4f}"
    line += f"  validation accuracy {100 * e.valid['valid_accuracy']:.2f}%" if e.valid else ""
    line += f"  train ELBO/N {e.elbo['elbo_per_datapoint']:.4f}" if reports_elbo else ""
    line += f"  Laplace log evidence/N {e.evidence['laplace_per_datapoint']:.4f}" if e.evidence else ""
    layers = e.evidence.get("laplace_layers_per_datapoint")
    print(line + (f" (every layer: {layers:.4f})" if layers is not None else ""))
    print("\nArviZ summary (per-class weight norms; predictive probability of the true class, first test points):")
    print(readable_summary(e.idata).to_string())
    written = sorted(p.name for p in folder.path.iterdir() if p.suffix in (".json", ".jsonl", ".png", ".nc"))
    print(f"\nresults in {folder.path}/ ({', '.join(written)})")


def finish(trainer: Trainer, out: Path, quiet: bool = False, signals: StopSignals | None = None) -> dict[str, Any]:
    """Evaluate, write the plots, the ArviZ file and, last, ``results.json``; print a summary.

    With ``signals`` (a run's :class:`StopSignals`), SIGINT or SIGTERM before ``results.json`` is written stops
    with :class:`Interrupted`; the folder then holds the final checkpoint and ``--resume`` finishes it."""
    from ..inference.arviz_export import save_inference_data

    cfg, folder = trainer.cfg, RunFolder(out)
    if signals is not None:
        signals.raise_now("the final evaluation, plots and ArviZ export")
    t0 = time.perf_counter()
    e = evaluate_trained(trainer)
    inv = trainer.model.invariance
    eta = inv.eta.detach().cpu()
    at_chance = chance_fit_warning(
        e.elbo["loglik_per_datapoint"], trainer.num_classes, inv.describe() if inv.learn else None
    )
    _write_plots(trainer, folder, e.phases)
    with _timed(e.phases, "arviz"):
        save_inference_data(e.idata, folder / "posterior.nc")
    results = folder.write_results(
        RunResults(
            dataset=cfg.dataset,
            invariance=cfg.invariance,
            network=cfg.network,
            inference=cfg.inference,
            test_accuracy=e.test["accuracy"],
            test_nll=e.test["nll"],
            elbo_per_datapoint=e.elbo["elbo_per_datapoint"] if method(cfg.inference).reports_elbo else None,
            train_loglik_per_datapoint=e.elbo["loglik_per_datapoint"],
            eta=[float(v) for v in eta],
            eta_human=lie.to_human(eta, inv.image_size),
            learned_invariance=inv.describe(),
            steps=trainer.step,
            train_size=trainer.num_data,
            test_size=int(trainer.x_test.shape[0]),
            train_wall_time_s=trainer.wall_time,
            eval_wall_time_s=time.perf_counter() - t0,
            device=str(trainer.device),
            device_name=device_name(trainer.device),
            inactive_units=e.units,
            eval_phases_s=e.phases,
            graph_replays=trainer.graph_replays,
            precision=trainer.precision,
            warnings=[at_chance] if at_chance else [],
            **cast(dict[str, Any], e.evidence),  # the Laplace fields of RunResults
            **e.valid,
        )
    )
    if signals is not None:
        signals.ignore()  # the run is complete: a signal now changes nothing
    if at_chance:
        log.warning("warning: %s", at_chance)
    if not quiet:
        _print_summary(trainer, e, folder)
    return results


def run_or_load(cfg: Config, out: str | Path, **kwargs: Any) -> dict[str, Any]:
    """The results of ``cfg`` in ``out``: read when that run has finished, else trained (or resumed).

    For notebooks and scripts that are executed again: a finished run is not retrained, an interrupted
    one is resumed from its checkpoint, one stopped before its first checkpoint is started again. A
    folder that holds a run with other settings is refused (one-line :class:`ConfigError`).
    """
    folder = RunFolder(out)
    state = folder.state(cfg)
    if state == FOREIGN:
        folder.check_same_run(cfg)  # names the settings that differ
    if state == DONE:
        return folder.results()
    # an attempt stopped before its first checkpoint is started again from step 0
    return run_experiment(cfg, out, resume=state == RESUMABLE, **kwargs)
