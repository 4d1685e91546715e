"""ArviZ ``InferenceData`` of a trained model (``posterior.nc`` of a run).

``az.from_pyro`` reads only MCMC objects, so the groups are built with ``az.from_dict`` from
``Config.export_draws`` (default 200) draws of the variational posterior (one chain) and one set of S transforms,
the features of each image computed once for all draws (:func:`pyroinv.inference.evaluate.per_draw_log_probs`):

* ``posterior``: ``W2`` (dims ``class``, ``hidden``; the last hidden index is the bias),
  the per-class weight norm ``w_norm`` and ``p_true``, the predictive probability of the
  true class for a few test points (readable summaries instead of 10,250 weights);
* ``log_likelihood``: ``y``, the pointwise ``log p(y_n | x_n, W2)`` on the **training** set, the data the posterior
  was fitted to, where ``az.loo`` and ``az.compare`` expect it (PSIS-LOO);
* ``observed_data``: the training labels;
* ``predictions``: for the test set, ``y`` sampled from ``p(y | x, W2)`` and ``y_log_likelihood``, the pointwise
  held-out ``log p(y_n | x_n, W2)``; ``predictions_constant_data``: the test labels ``y_test``;
* ``constant_data``: ``eta`` (a point estimate, not a posterior) raw and in human units.

Draws of i.i.d. variational samples: ESS measures only Monte Carlo error and r_hat
needs several chains, so neither diagnoses the fit. A point estimate (ML, MAP) has one draw.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

from ..model import lie
from ..model.invariance import Invariance
from .evaluate import PosteriorPredictive, per_draw_log_probs, posterior_draws

SUMMARY_TEST_POINTS = 5


def import_arviz() -> ModuleType:
    """``import arviz``, without the ``FutureWarning`` about its coming refactor that arviz < 1 prints once a day
    on import (nothing a user of this package can act on; arviz 1 needs Python >= 3.12)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")
        import arviz

    return arviz


@torch.no_grad()
def export_data(
    model,
    guide,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_test: torch.Tensor,
    y_test: torch.Tensor,
    draws: int = 200,
    seed: int = 0,
):
    """``draws`` draws of ``W2`` (one for a point guide) and one set of transforms over both data sets, as
    :func:`inference_data`."""
    W2 = posterior_draws(guide, draws)
    T = model.sample_transforms()
    test = per_draw_log_probs(model, W2, x_test, T)  # (L, N_test, K)
    pp = PosteriorPredictive(W2.cpu(), test, torch.logsumexp(test, 0) - math.log(W2.shape[0]), y_test.cpu())
    train = per_draw_log_probs(model, W2, x_train, T, y=y_train)  # (L, N_train)
    return inference_data(pp, model.invariance, seed, train_loglik=train, y_train=y_train.cpu())


@torch.no_grad()
def inference_data(
    pp: PosteriorPredictive,
    invariance: Invariance,
    seed: int = 0,
    train_loglik: torch.Tensor | None = None,
    y_train: torch.Tensor | None = None,
):
    """Build the ``InferenceData`` (see the module docstring) from draws ``pp`` over the test set and, for the
    ``log_likelihood`` group, the training set's pointwise log-likelihood ``train_loglik`` ``(L, N)`` of labels
    ``y_train`` (without them the group holds the test set's, as the files of earlier versions did)."""
    az = import_arviz()

    L, N, K = pp.per_draw.shape
    g = torch.Generator(device="cpu").manual_seed(seed)
    ypred = torch.multinomial(pp.per_draw.exp().reshape(-1, K), 1, generator=g).reshape(L, N)
    test_loglik = pp.pointwise_log_likelihood()  # (L, N)
    W2n = pp.W2.numpy()
    n_show = min(SUMMARY_TEST_POINTS, N)
    eta = invariance.eta.detach().cpu()
    human = lie.to_human(eta, invariance.image_size)
    label = np.uint8 if K <= 256 else np.int64
    if train_loglik is None:
        train_loglik, y_train, point = test_loglik, pp.y, "test_point"
    else:
        assert y_train is not None, "train_loglik needs its labels y_train"
        point = "train_point"
    return az.from_dict(
        posterior={
            "W2": W2n[None],
            "w_norm": np.linalg.norm(W2n, axis=-1)[None],
            "p_true": test_loglik[:, :n_show].exp().numpy()[None],
        },
        log_likelihood={"y": train_loglik.numpy()[None]},
        observed_data={"y": y_train.numpy()},
        predictions={"y": ypred.numpy().astype(label)[None], "y_log_likelihood": test_loglik.numpy()[None]},
        predictions_constant_data={"y_test": pp.y.numpy()},
        constant_data={"eta": eta.numpy(), "eta_human": np.array(list(human.values()))},
        coords={
            "class": np.arange(W2n.shape[1]),
            "hidden": np.arange(W2n.shape[2]),
            "test_point": np.arange(N),
            "train_point": np.arange(train_loglik.shape[1]),
            "shown_test_point": np.arange(n_show),
            "generator": list(lie.GENERATOR_NAMES),
            "human_unit": list(human),
        },
        dims={
            "W2": ["class", "hidden"],
            "w_norm": ["class"],
            "p_true": ["shown_test_point"],
            "y": [point],
            "y_test": ["test_point"],
            "eta": ["generator"],
            "eta_human": ["human_unit"],
        },
        pred_dims={"y": ["test_point"], "y_log_likelihood": ["test_point"]},
        attrs={
            "invariance": invariance.describe(),
            "inference_library": "pyro",
            "note": "variational posterior draws (one chain); eta is a point estimate",
        },
    )


def save_inference_data(idata, path: Path) -> None:
    """Write ``idata`` to netCDF (read back with ``az.from_netcdf``): serialised in memory
    (``idata.to_datatree().to_netcdf()``), then written atomically, so a full disk is a one-line
    :class:`~pyroinv.files.RunWriteError` and never a half-written HDF5 file (HDF5 that fails a write
    on a full disk fails again, loudly, when its file object is collected)."""
    from ..files import write_bytes

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
