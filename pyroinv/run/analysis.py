"""Analyses of a saved run folder: evaluate it on another data set, estimate its evidence, or profile its bound
along ``eta``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..data import load_dataset
from ..errors import ConfigError
from ..inference.build import resolve_device
from ..inference.evaluate import elbo_per_datapoint, most_confused, posterior_predictive, units_under_q
from ..inference.laplace_layers import laplace_evidences
from ..model import lie
from .folder import RunFolder, load_run


def evaluate_run(
    out: str | Path,
    dataset: str | None = None,
    data_root: str | None = None,
    cache_dir: str | None = None,
    test_size: int | None = None,
    draws: int | None = None,
    samples: int | None = None,
    split: str = "test",
    device: str = "auto",
    sampling: str | None = None,
) -> dict[str, Any]:
    """Evaluate a saved run on any data set variant (default: the one it was trained on).

    ``split``: ``"test"``, or ``"valid"``, the validation set the run held out of its training set
    (``--valid-size``), for choosing evaluation settings without the test set.

    ``samples``: the transforms S of the Monte-Carlo average ``f_hat(x) = (1/S) sum_i f(T_i x)`` (default: the
    run's); the model is the expectation over ``T ~ p_eta``, so a larger S estimates the same predictive more
    closely. ``sampling`` (default: the run's): ``"stochastic"`` draws ``eps ~ U[-1, 1]^k``, ``"deterministic"`` takes
    the midpoint grid of :func:`pyroinv.model.lie.deterministic_eps`, a quadrature of the same expectation (for
    rotation alone, S equally spaced angles over ``[-eta, eta]``). ``most_confused``: the five most frequent
    ``(true, predicted, count)`` errors of the ``errors`` in all."""
    dev = resolve_device(device)
    folder = RunFolder(out)
    folder.require_run()
    saved = folder.config()
    name = dataset or saved["dataset"]
    if split not in ("test", "valid"):
        raise ConfigError(f"--split {split!r} is not one of test, valid")
    if split == "valid" and not saved.get("valid_size"):
        raise ConfigError(
            f"{out} was trained without --valid-size, so it has no validation set; use --split test "
            f"or train with --valid-size"
        )
    data = load_dataset(
        name,
        data_root=data_root,
        cache_dir=cache_dir,
        test_size=test_size,
        seed=int(saved.get("seed", 0)),
        valid_size=saved.get("valid_size") if split == "valid" else None,
    )
    cfg, model, guide, step = load_run(out, dev, input_shape=data.input_shape)
    x, y = data.tensors(split, dev)
    if samples is not None:
        model.num_samples = samples
    if sampling is not None:  # an unknown name or too large a grid is refused where the transforms are drawn
        model.sampling = sampling
    torch.manual_seed(cfg.seed + 1)  # the draws of the run's own evaluation
    pp = posterior_predictive(model, guide, x, y, draws=draws or cfg.eval_draws)
    metrics = pp.metrics()
    units = units_under_q(model, guide, x)  # after the predictive, whose draws stay those of the run's own evaluation
    return {
        "run": str(out),
        "trained_on": cfg.dataset,
        "evaluated_on": name,
        "step": step,
        "samples": model.num_samples,
        "sampling": model.sampling,
        "split": split,
        f"{split}_accuracy": metrics["accuracy"],
        f"{split}_nll": metrics["nll"],
        f"{split}_size": int(x.shape[0]),
        "inactive_units": units["inactive_units"],
        "units_under_q": units,
        "errors": int((pp.log_probs.argmax(-1) != pp.y).sum()),
        "most_confused": most_confused(pp.log_probs, pp.y),
        "learned_invariance": model.invariance.describe(),
        "eta_human": model.invariance.human(),
    }


def training_data(out: str | Path, data_root: str | None = None, cache_dir: str | None = None):
    """The data set a saved run was trained on: its ``config.json``'s data set, training size, seed and
    validation split."""
    saved = RunFolder(out).config()
    return load_dataset(
        saved["dataset"],
        data_root=data_root,
        cache_dir=cache_dir,
        train_size=saved.get("train_size"),
        seed=int(saved.get("seed", 0)),
        valid_size=saved.get("valid_size"),
    )


def run_evidence(
    out: str | Path,
    data_root: str | None = None,
    cache_dir: str | None = None,
    device: str = "auto",
    importance_draws: int = 0,
) -> dict[str, Any]:
    """:func:`laplace_evidences` of a saved run on its own training set, ``eta`` as learned (with the
    importance-sampling check of ``W2``'s evidence when ``importance_draws > 0``)."""
    dev = resolve_device(device)
    data = training_data(out, data_root, cache_dir)
    cfg, model, _, step = load_run(out, dev, input_shape=data.input_shape)
    x, y = data.tensors("train", dev)
    torch.manual_seed(cfg.seed + 1)
    return {
        "run": str(out),
        "step": step,
        "learned_invariance": model.invariance.describe(),
        **laplace_evidences(cfg, model, x, y, seed=cfg.seed, importance_draws=importance_draws),
    }


@torch.no_grad()
def eta_profile(
    out: str | Path,
    values: list[float],
    generator: int = 2,
    data_root: str | None = None,
    cache_dir: str | None = None,
    train_size: int | None = None,
    device: str = "auto",
    seed: int = 0,
    draws: int = 1,
    laplace: bool = False,
) -> list[dict[str, float]]:
    """ELBO/N of a trained run with one ``eta`` generator set to each of ``values`` (human units).

    Everything else (``W1``, ``q``) stays as trained, so this profiles the bound along ``eta``
    at the trained parameters: where it peaks is where gradient ascent on ``eta`` would settle.
    ``draws``: passes averaged per value (see :func:`pyroinv.inference.evaluate.elbo_per_datapoint`).
    ``laplace``: also the Laplace estimates of ``log p(D | eta) / N`` there, with ``W2`` at its mode on the
    averaged features (:func:`laplace_evidences`: of ``W2``, a second estimate of what the ELBO bounds, exact in
    its curvature for the logits averaged; and of every layer where the network is fully connected).
    """
    dev = resolve_device(device)
    full = training_data(out, data_root, cache_dir)
    num_data = len(full.y_train)  # the KL is divided by the N the run was trained on
    data = full.subset(train_size=train_size, seed=seed) if train_size else full
    cfg, model, guide, _ = load_run(out, dev, input_shape=data.input_shape)
    x, y = data.tensors("train", dev)
    rows = []
    for value in values:
        model.invariance.set_eta(generator, lie.from_human(generator, value, model.invariance.image_size))
        torch.manual_seed(seed)
        row = {"eta_human": value, **elbo_per_datapoint(model, guide, x, y, num_data=num_data, draws=draws)}
        if laplace:
            torch.manual_seed(seed)
            row.update(laplace_evidences(cfg, model, x, y, seed=seed))
        rows.append(row)
    return rows
