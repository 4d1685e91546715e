"""ArviZ ``InferenceData`` of a trained model.

``az.from_pyro`` reads only MCMC objects, so the groups are built with
``az.from_dict`` from the one pass of the posterior predictive over the test set
(:func:`pyroinv.inference.evaluate.posterior_predictive`, draws of the variational posterior, one chain):

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

import warnings
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

from ..model import lie
from ..inference.evaluate import PosteriorPredictive
from ..model.invariance import Invariance

SUMMARY_TEST_POINTS = 5


def import_arviz() -> ModuleType:
    """``import arviz``, without the ``FutureWarning`` about its coming refactor that arviz < 1 prints once a day
    on import (nothing a user of this package can act on; arviz 1 needs Python >= 3.12)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")
        import arviz

    return arviz


@torch.no_grad()
def inference_data(pp: PosteriorPredictive, invariance: Invariance, seed: int = 0):
    """Build the ``InferenceData`` (see module docstring) from a posterior-predictive pass ``pp``."""
    az = import_arviz()

    L, N, K = pp.per_draw.shape
    g = torch.Generator(device="cpu").manual_seed(seed)
    ypred = torch.multinomial(pp.per_draw.exp().reshape(-1, K), 1, generator=g).reshape(L, N)
    loglik = pp.pointwise_log_likelihood()                 # (L, N)
    W2n = pp.W2.numpy()
    n_show = min(SUMMARY_TEST_POINTS, N)
    eta = invariance.eta.detach().cpu()
    human = lie.to_human(eta, invariance.image_size)
    return az.from_dict(
        posterior={"W2": W2n[None], "w_norm": np.linalg.norm(W2n, axis=-1)[None],
                   "p_true": loglik[:, :n_show].exp().numpy()[None]},
        posterior_predictive={"y": ypred.numpy()[None]},
        log_likelihood={"y": loglik.numpy()[None]},
        observed_data={"y": pp.y.numpy()},
        constant_data={"eta": eta.numpy(), "eta_human": np.array(list(human.values()))},
        coords={"class": np.arange(W2n.shape[1]), "hidden": np.arange(W2n.shape[2]),
                "test_point": np.arange(N), "shown_test_point": np.arange(n_show),
                "generator": list(lie.GENERATOR_NAMES), "human_unit": list(human)},
        dims={"W2": ["class", "hidden"], "w_norm": ["class"], "p_true": ["shown_test_point"],
              "y": ["test_point"], "eta": ["generator"], "eta_human": ["human_unit"]},
        attrs={"invariance": invariance.describe(), "inference_library": "pyro",
               "note": "variational posterior draws (one chain); eta is a point estimate"},
    )


def save_inference_data(idata, path: Path) -> None:
    """Write ``idata`` to netCDF (read back with ``az.from_netcdf``): serialised in memory
    (``idata.to_datatree().to_netcdf()``), then written atomically, so a full disk is a one-line
    :class:`~pyroinv.run.checkpoint.RunWriteError` and never a half-written HDF5 file (HDF5 that fails a write
    on a full disk fails again, loudly, when its file object is collected)."""
    from .checkpoint import write_bytes

    write_bytes(Path(path), bytes(idata.to_datatree().to_netcdf(None, engine="h5netcdf")))


def readable_summary(idata):
    """``az.summary`` of the per-class weight norms and the shown test points' predictive probabilities.

    A point estimate (one draw) has no spread: only its value is shown.
    """
    az = import_arviz()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's warnings for the spread of a single draw
        table = az.summary(idata, var_names=["w_norm", "p_true"], kind="stats")
    if idata.posterior.sizes["draw"] == 1:
        table = table[["mean"]].rename(columns={"mean": "point estimate"})
    return table
