"""One training run end to end: data, SVI, progress, checkpoints, metrics, results, plots, ArviZ.

``run_experiment(Config(...), out="runs/rot")`` is the Python form of
``python scripts/svi_train.py``. The run folder holds

* ``config.json``: the resolved configuration;
* ``metrics.jsonl``: one JSON record per logged step (step, epoch, loss, ``elbo_per_datapoint`` =
  ``-loss / N`` (the minibatch ELBO estimate under ``vi``; the log joint under ``map`` and the
  log-likelihood under ``ml``), training-batch NLL, eta raw and in human units, learning rate, wall time);
* ``checkpoint.pt``: everything ``--resume`` needs (written atomically, loaded weights-only);
* ``results.json``: test accuracy and NLL, ELBO/N on the training set, learned invariance,
  wall time, device and library versions;
* ``eta.png``, ``curves.png``, ``filters.png`` and ``posterior.nc`` (ArviZ InferenceData).
"""
from __future__ import annotations

import json
import logging
import math
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch

from . import lie
from .build import check_inputs
from .checkpoint import load_latest_checkpoint, read_config, read_json, read_jsonl, save_checkpoint, write_json
from .config import Config
from .data import describe, load_dataset
from .errors import ConfigError, PyroinvError, one_line
from .evaluate import classification_metrics, elbo_per_datapoint, evaluate
from .methods import method
from .train import Trainer

log = logging.getLogger("pyroinv")

CONFIG, METRICS, CHECKPOINT, RESULTS = "config.json", "metrics.jsonl", "checkpoint.pt", "results.json"
#: the checkpoint before the latest, kept so that a damaged latest file costs one checkpoint interval
PREVIOUS_CHECKPOINT = "checkpoint.prev.pt"


class TrainingDiverged(PyroinvError):
    """The loss became NaN or infinite."""


class Interrupted(PyroinvError):
    """SIGINT or SIGTERM arrived; a checkpoint was written. ``signum`` says which."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


def versions() -> dict[str, str]:
    import arviz
    import pyro

    return {"python": platform.python_version(), "torch": torch.__version__, "pyro": pyro.__version__,
            "arviz": arviz.__version__}


def _has_checkpoint(out: Path) -> bool:
    """Whether ``out`` holds a checkpoint to resume from (the latest or the one before it)."""
    return (out / CHECKPOINT).exists() or (out / PREVIOUS_CHECKPOINT).exists()


def _check_out(out: Path, cfg: Config, resume: bool) -> None:
    """Refuse an ``out`` that cannot take this run (nothing is written)."""
    if resume:
        if not _has_checkpoint(out):
            raise ConfigError(f"--resume: no checkpoint in {out}; start a new run without --resume")
        if not (out / CONFIG).exists():
            raise ConfigError(f"--resume: {out} has no {CONFIG}; it is not a complete run folder, start a new --out")
        diff = cfg.differences(read_config(out / CONFIG))
        if diff:
            raise ConfigError(f"--resume: the configuration differs from the checkpoint's in {', '.join(diff)}; "
                              f"use the same flags, or a new --out")
        return
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a folder; choose a new --out")
    if out.exists() and any((out / n).exists() for n in (CHECKPOINT, PREVIOUS_CHECKPOINT, RESULTS, METRICS)):
        raise ConfigError(f"--out {out} already holds a run; pass --resume to continue it or choose a new --out")


def _start_out(out: Path, cfg: Config, resume: bool) -> None:
    if not resume:
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / CONFIG, cfg.to_dict())


def _record(trainer: Trainer, rec: dict[str, float]) -> dict[str, Any]:
    eta = trainer.model.invariance.eta.detach().cpu()
    return {**rec, "nll": trainer.last_batch_nll, **trainer.diagnostics(), "eta": [float(v) for v in eta],
            "eta_human": lie.to_human(eta, trainer.model.invariance.image_size), "wall_time": trainer.wall_time}


def _regime(r: dict[str, Any]) -> str:
    """``KL/N 0.018 q 0.97 |mu| 36.1``: the diagnostics of a metrics record, as the progress line shows them."""
    parts = []
    if "kl_per_datapoint" in r:
        parts.append(f"KL/N {r['kl_per_datapoint']:.3f}")
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
                   quiet: bool = False) -> dict[str, Any]:
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
    """
    cfg.validate()
    from .build import resolve_device

    device = resolve_device(cfg.device)  # fail before anything is written
    out = Path(out)
    _check_out(out, cfg, resume)
    if resume:  # a damaged checkpoint is reported before anything else is done
        state, used = load_latest_checkpoint(out / CHECKPOINT, out / PREVIOUS_CHECKPOINT, map_location=device)
    data = load_dataset(cfg.dataset, data_root=data_root, cache_dir=cache_dir, train_size=cfg.train_size,
                        test_size=cfg.test_size, seed=cfg.seed)
    check_inputs(cfg, data.input_shape)  # before anything is written
    log.info("data %s", describe(data, cfg.train_size, cfg.test_size))
    trainer = Trainer(cfg, data, device=device)
    if resume:
        if used.name != CHECKPOINT:
            log.info("%s", f"{out / CHECKPOINT} is damaged or missing; resuming from the previous checkpoint {used}")
        try:
            trainer.load_state_dict(state)
        except (KeyError, RuntimeError, ValueError, TypeError) as err:
            raise ConfigError(f"--resume: {used} does not fit this run's configuration ({one_line(err, 160)}); "
                              f"resume with the flags it was trained with, or start a new --out") from None
    _start_out(out, cfg, resume)
    if resume:
        kept = [r for r in read_jsonl(out / METRICS) if r["step"] <= trainer.step]
        (out / METRICS).write_text("".join(json.dumps(r) + "\n" for r in kept))
        log.info("resumed at step %d of %d", trainer.step, trainer.total_steps)
    log.info("device %s, %d steps (%d epochs x %d)", trainer.device, trainer.total_steps, cfg.epochs,
             trainer.steps_per_epoch)
    every = checkpoint_every or trainer.steps_per_epoch
    # -loss/N is the ELBO per data point under VI; under MAP the log joint, under ML the log-likelihood
    objective = method(cfg.inference).objective
    stop = {"signal": None}

    def handler(signum, _frame):
        stop["signal"] = signum

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    bar = _progress(trainer.total_steps, trainer.step, progress)
    last_good = trainer.step
    steps_this_call = 0
    try:
        with open(out / METRICS, "a") as metrics:
            while not trainer.done:
                rec = trainer.train_step()
                steps_this_call += 1
                if not math.isfinite(rec["loss"]):
                    raise TrainingDiverged(
                        f"loss became {rec['loss']} at step {rec['step']} (epoch {rec['epoch']}); the checkpoint of "
                        f"step {last_good} is kept in {out}. Try a smaller --lr, a smaller --guide-init-scale or "
                        f"--eta-constraint tanh")
                if rec["step"] % log_every == 0 or trainer.done:
                    r = _record(trainer, rec)
                    metrics.write(json.dumps(r) + "\n")
                    metrics.flush()
                    desc = trainer.model.invariance.describe()
                    bar.set_postfix_str(f"{objective} {r['elbo_per_datapoint']:.3f} NLL {r['nll']:.3f} "
                                        f"{_regime(r)} {desc}")
                    if bar.disable:
                        log.info("step %d/%d epoch %d loss %.4g %s %.4f NLL %.3f %s %s lr %.2e %.2f steps/s",
                                 r["step"], trainer.total_steps, r["epoch"], r["loss"], objective,
                                 r["elbo_per_datapoint"], r["nll"], _regime(r), desc, r["lr"],
                                 r["step"] / max(trainer.wall_time, 1e-9))
                bar.update(1)
                if trainer.step % every == 0 or trainer.done:
                    save_checkpoint(out / CHECKPOINT, trainer.state_dict(), previous=out / PREVIOUS_CHECKPOINT)
                    last_good = trainer.step
                if stop["signal"] is not None or (max_steps is not None and steps_this_call >= max_steps):
                    save_checkpoint(out / CHECKPOINT, trainer.state_dict(), previous=out / PREVIOUS_CHECKPOINT)
                    if stop["signal"] is not None:
                        raise Interrupted(f"stopped by signal {signal.Signals(stop['signal']).name} at step "
                                          f"{trainer.step}; checkpoint written, continue with --resume",
                                          stop["signal"])
                    return {"step": trainer.step, "finished": False}
    finally:
        bar.close()
        for s, h in previous.items():
            signal.signal(s, h)
    return finish(trainer, out, quiet=quiet)


def finish(trainer: Trainer, out: Path, quiet: bool = False) -> dict[str, Any]:
    """Evaluate, write ``results.json``, the plots and the ArviZ file; print a summary."""
    from .arviz_export import inference_data, readable_summary, save_inference_data
    from .plots import plot_curves, plot_eta, plot_filter_banks

    cfg = trainer.cfg
    m = method(cfg.inference)
    t0 = time.perf_counter()
    model, guide = trainer.model, trainer.guide
    torch.manual_seed(cfg.seed + 1)
    # one pass over the test set gives the ArviZ groups and the posterior-predictive metrics
    idata, log_probs = inference_data(model, guide, trainer.x_test, trainer.y_test, draws=cfg.eval_draws,
                                      seed=cfg.seed)
    test = classification_metrics(log_probs, trainer.y_test.cpu())
    # at least 32 draws of W2 in all (one per batch of 500): a single draw on a small data set is far too noisy
    draws = max(1, math.ceil(32 / math.ceil(len(trainer.y_train) / 500)))
    elbo = elbo_per_datapoint(model, guide, trainer.x_train, trainer.y_train, draws=draws)
    inv = model.invariance
    eta = inv.eta.detach().cpu()
    results = {
        "dataset": cfg.dataset, "invariance": cfg.invariance, "network": cfg.network, "inference": cfg.inference,
        "test_accuracy": test["accuracy"], "test_nll": test["nll"],
        "elbo_per_datapoint": elbo["elbo_per_datapoint"] if m.reports_elbo else None,
        "train_loglik_per_datapoint": elbo["loglik_per_datapoint"],
        "eta": [float(v) for v in eta], "eta_human": lie.to_human(eta, inv.image_size),
        "learned_invariance": inv.describe(), "steps": trainer.step, "train_size": trainer.num_data,
        "test_size": int(trainer.x_test.shape[0]), "train_wall_time_s": trainer.wall_time,
        "device": str(trainer.device), "versions": versions(),
    }
    records = read_jsonl(out / METRICS)
    if records:
        plot_eta(records, inv.active, out / "eta.png", title=f"{cfg.dataset}, {cfg.network}, {cfg.inference}")
        plot_curves(records, out / "curves.png", objective=m.objective_label)
    if model.features.is_image and model.features.warps_weights:  # input augmentation has no warped filters
        plot_filter_banks(model.features, out / "filters.png")
    save_inference_data(idata, out / "posterior.nc")
    results["eval_wall_time_s"] = time.perf_counter() - t0
    write_json(out / RESULTS, results)
    if quiet:
        return results
    print(f"\nlearned invariance: {inv.describe()}")
    line = f"test accuracy {100 * test['accuracy']:.2f}%  test NLL {test['nll']:.4f}"
    print(line + (f"  train ELBO/N {elbo['elbo_per_datapoint']:.4f}" if m.reports_elbo else ""))
    print("\nArviZ summary (per-class weight norms; predictive probability of the true class, first test points):")
    print(readable_summary(idata).to_string())
    written = sorted(p.name for p in out.iterdir() if p.suffix in (".json", ".jsonl", ".png", ".nc"))
    print(f"\nresults in {out}/ ({', '.join(written)})")
    return results


def run_or_load(cfg: Config, out: str | Path, **kwargs: Any) -> dict[str, Any]:
    """The results of ``cfg`` in ``out``: read when that run has finished, else trained (or resumed).

    For notebooks and scripts that are executed again: a finished run is not retrained, an interrupted
    one is resumed from its checkpoint, one stopped before its first checkpoint is started again. A
    folder that holds a run with other settings is refused (one-line :class:`ConfigError`).
    """
    out = Path(out)
    if (out / CONFIG).exists():
        diff = cfg.differences(read_config(out / CONFIG))
        if diff:
            raise ConfigError(f"{out} holds a run with other settings ({', '.join(diff)}); choose another folder")
        if (out / RESULTS).exists():
            return read_json(out / RESULTS)
        if _has_checkpoint(out):
            return run_experiment(cfg, out, resume=True, **kwargs)
        # an attempt stopped before its first checkpoint: only its metrics log is left; start again
        (out / METRICS).unlink(missing_ok=True)
    return run_experiment(cfg, out, **kwargs)


def load_run(out: str | Path, device: str | torch.device = "cpu", input_shape: tuple[int, ...] | None = None):
    """Rebuild ``(cfg, model, guide, step)`` of a run folder from ``config.json`` and ``checkpoint.pt``.

    ``input_shape`` is read from the checkpoint; pass it for checkpoints that do not record it.
    """
    import pyro

    from .build import build_model

    out = Path(out)
    if not (out / CONFIG).exists() or not _has_checkpoint(out):
        raise ConfigError(f"{out} is not a run folder (needs {CONFIG} and {CHECKPOINT}); pass the --out of a training run")
    cfg = Config.from_dict(read_config(out / CONFIG))
    state, _ = load_latest_checkpoint(out / CHECKPOINT, out / PREVIOUS_CHECKPOINT, map_location=device)
    saved = state["model"].get("features._input_shape")
    if saved is not None:
        shape = tuple(int(v) for v in saved.tolist())
        if input_shape is not None and tuple(input_shape) != shape:
            raise ConfigError(f"the data have inputs {tuple(input_shape)} but the run was trained on {shape}; "
                              f"evaluate it on a variant of {cfg.dataset}")
    elif input_shape is not None:
        shape = tuple(input_shape)
        state["model"]["features._input_shape"] = torch.tensor(shape)
    else:
        raise ConfigError(f"{out / CHECKPOINT} does not record its input shape; pass input_shape")
    guide_state = state["guide"]
    num_classes = int((guide_state.get("loc_unconstrained", guide_state.get("W2_hat_unconstrained"))).shape[0])
    pyro.set_rng_seed(cfg.seed)
    model, guide = build_model(cfg, shape, num_classes)
    model.load_state_dict(state["model"])
    guide.load_state_dict(guide_state)
    return cfg, model.to(device), guide.to(device), int(state["step"])


def evaluate_run(out: str | Path, dataset: str | None = None, data_root: str | None = None,
                 cache_dir: str | None = None, test_size: int | None = None, draws: int | None = None,
                 device: str = "auto") -> dict[str, Any]:
    """Evaluate a saved run on any data set variant (default: the one it was trained on)."""
    from .build import resolve_device

    dev = resolve_device(device)
    out = Path(out)
    if not (out / CONFIG).exists():
        raise ConfigError(f"{out} is not a run folder (needs {CONFIG} and {CHECKPOINT}); pass the --out of a training run")
    trained_on = read_config(out / CONFIG)["dataset"]
    name = dataset or trained_on
    seed = int(read_config(out / CONFIG).get("seed", 0))
    data = load_dataset(name, data_root=data_root, cache_dir=cache_dir, test_size=test_size, seed=seed)
    cfg, model, guide, step = load_run(out, dev, input_shape=data.input_shape)
    x, y = data.tensors("test", dev)
    torch.manual_seed(cfg.seed + 1)
    metrics = evaluate(model, guide, x, y, draws=draws or cfg.eval_draws)
    return {"run": str(out), "trained_on": cfg.dataset, "evaluated_on": name, "step": step,
            "test_accuracy": metrics["accuracy"], "test_nll": metrics["nll"], "test_size": int(x.shape[0]),
            "learned_invariance": model.invariance.describe(), "eta_human": model.invariance.human()}


@torch.no_grad()
def eta_profile(out: str | Path, values: list[float], generator: int = 2, data_root: str | None = None,
                cache_dir: str | None = None, train_size: int | None = None, device: str = "auto",
                seed: int = 0, draws: int = 1) -> list[dict[str, float]]:
    """ELBO/N of a trained run with one ``eta`` generator set to each of ``values`` (human units).

    Everything else (``W1``, ``q``) stays as trained, so this profiles the bound along ``eta``
    at the trained parameters: where it peaks is where gradient ascent on ``eta`` would settle.
    ``draws``: passes averaged per value (see :func:`pyroinv.evaluate.elbo_per_datapoint`).
    """
    from .build import resolve_device

    dev = resolve_device(device)
    out = Path(out)
    saved = read_config(out / CONFIG)
    full = load_dataset(saved["dataset"], data_root=data_root, cache_dir=cache_dir, train_size=saved.get("train_size"),
                        seed=int(saved.get("seed", 0)))
    num_data = len(full.y_train)  # the KL is divided by the N the run was trained on
    data = full.subset(train_size=train_size, seed=seed) if train_size else full
    cfg, model, guide, _ = load_run(out, dev, input_shape=data.input_shape)
    x, y = data.tensors("train", dev)
    rows = []
    for value in values:
        model.invariance.set_eta(generator, lie.from_human(generator, value, model.invariance.image_size))
        torch.manual_seed(seed)
        rows.append({"eta_human": value, **elbo_per_datapoint(model, guide, x, y, num_data=num_data, draws=draws)})
    return rows
