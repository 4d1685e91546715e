"""ArviZ ``InferenceData`` of a trained model.

``az.from_pyro`` reads only MCMC objects, so the groups are built with
``az.from_dict`` from draws of the variational posterior (one chain):

* ``posterior``: ``W2`` (dims ``class``, ``hidden``; the last hidden index is the bias),
  the per-class weight norm ``w_norm`` and ``p_true``, the predictive probability of the
  true class for a few test points (readable summaries instead of 10,250 weights);
* ``posterior_predictive``: ``y`` sampled from ``p(y | x, W2)`` for every test point;
* ``log_likelihood``: ``y``, the pointwise ``log p(y_n | x_n, W2)`` on the test set (held out,
  so ``az.compare``/``az.loo`` on it rank models by predictive performance);
* ``observed_data``: the test labels;
* ``constant_data``: ``eta`` (a point estimate, not a posterior) raw and in human units.

Draws of i.i.d. variational samples: ESS measures only Monte Carlo error and r_hat
needs several chains, so neither diagnoses the fit.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from . import lie
from .evaluate import posterior_draws
from .model import InvariantBNN, mc_log_predictive

SUMMARY_TEST_POINTS = 5


@torch.no_grad()
def inference_data(model: InvariantBNN, guide, x_test: torch.Tensor, y_test: torch.Tensor, draws: int = 32,
                   batch_size: int = 500, seed: int = 0):
    """Build the ``InferenceData`` (see module docstring).

    Returns ``(idata, log_probs)``: ``log_probs`` ``(N, K)`` is the posterior predictive of the same
    draws and transforms (``log mean_l p(y | x, W2_l)``), from which test accuracy and NLL follow
    without a second pass over the test set.
    """
    import arviz as az

    W2 = posterior_draws(guide, draws)                     # (L, K, D)
    L = W2.shape[0]
    T = model.sample_transforms()
    bank = model.features.weight_bank(T)
    loglik, ypred, predictive = [], [], []
    g = torch.Generator(device="cpu").manual_seed(seed)
    for i in range(0, x_test.shape[0], batch_size):
        feats = model.features.apply_bank(x_test[i:i + batch_size], bank)            # (S, B, D)
        per_draw = torch.stack([mc_log_predictive(feats, W2[l], model.average) for l in range(L)])  # (L, B, K)
        predictive.append((torch.logsumexp(per_draw, 0) - math.log(L)).cpu())
        yb = y_test[i:i + batch_size]
        loglik.append(per_draw.gather(2, yb.view(1, -1, 1).expand(L, -1, 1))[..., 0].cpu())
        ypred.append(torch.multinomial(per_draw.exp().reshape(-1, per_draw.shape[-1]).cpu(), 1, generator=g)
                     .reshape(L, -1))
    loglik_t = torch.cat(loglik, 1)                        # (L, N)
    W2n = W2.cpu().numpy()
    n_show = min(SUMMARY_TEST_POINTS, x_test.shape[0])
    eta = model.invariance.eta.detach().cpu()
    human = lie.to_human(eta, model.invariance.image_size)
    idata = az.from_dict(
        posterior={"W2": W2n[None], "w_norm": np.linalg.norm(W2n, axis=-1)[None],
                   "p_true": loglik_t[:, :n_show].exp().numpy()[None]},
        posterior_predictive={"y": torch.cat(ypred, 1).numpy()[None]},
        log_likelihood={"y": loglik_t.numpy()[None]},
        observed_data={"y": y_test.cpu().numpy()},
        constant_data={"eta": eta.numpy(), "eta_human": np.array(list(human.values()))},
        coords={"class": np.arange(W2n.shape[1]), "hidden": np.arange(W2n.shape[2]),
                "test_point": np.arange(x_test.shape[0]), "shown_test_point": np.arange(n_show),
                "generator": list(lie.GENERATOR_NAMES), "human_unit": list(human)},
        dims={"W2": ["class", "hidden"], "w_norm": ["class"], "p_true": ["shown_test_point"],
              "y": ["test_point"], "eta": ["generator"], "eta_human": ["human_unit"]},
        attrs={"invariance": model.invariance.describe(), "inference_library": "pyro",
               "note": "variational posterior draws (one chain); eta is a point estimate"},
    )
    return idata, torch.cat(predictive)


def save_inference_data(idata, path: Path) -> None:
    """Write ``idata`` to netCDF (``idata.to_netcdf``)."""
    idata.to_netcdf(str(path))


def readable_summary(idata):
    """``az.summary`` of the per-class weight norms and the shown test points' predictive probabilities.

    A point estimate (one draw) has no spread: only its value is shown.
    """
    import warnings

    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's warnings for the spread of a single draw
        table = az.summary(idata, var_names=["w_norm", "p_true"], kind="stats")
    if idata.posterior.sizes["draw"] == 1:
        table = table[["mean"]].rename(columns={"mean": "point estimate"})
    return table
