"""Compare the ``local`` and ``shared`` estimators of the ELBO at fixed parameters.

Both are unbiased for the same bound (:mod:`pyroinv.model.estimators`); what differs is the noise of the
gradient that SVI follows. :func:`compare_estimators` draws the loss and its gradient R times under
each estimator, at the same parameters and the same minibatch, and reports

* the mean loss ``-ELBO`` of each, with its Monte-Carlo standard error (they must agree);
* the total variance of the gradient with respect to each parameter group,
  ``sum_j Var[g_j]`` over the R repetitions, and the ratio shared / local.

``scripts/estimator_variance.py`` is the command-line form.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from ..config import Config
from ..model.estimators import ESTIMATORS
from ..model.methods import method
from .build import build_loss, build_model

#: parameter groups reported: name in the loss module -> label
GROUPS = {
    "guide.loc_unconstrained": "mu",
    "guide.diag_unconstrained": "diag(L)",
    "model.features.W1": "W1",
    "model.features.invariance.eta_active_unconstrained": "eta",
}


def compare_estimators(
    cfg: Config,
    x: torch.Tensor,
    y: torch.Tensor,
    num_data: int,
    num_classes: int,
    repeats: int = 64,
    seed: int = 0,
    mu_scale: float = 0.0,
) -> dict[str, Any]:
    """Loss mean and gradient variance of both estimators at one set of parameters.

    Args:
        cfg: the model's configuration (``inference`` must be ``vi``; ``estimator`` is overridden).
        x, y: one minibatch.
        num_data: N, for the N / M scaling.
        num_classes: K.
        repeats: R draws of the loss and gradient per estimator.
        seed: seeds the parameters (the same for both estimators) and then the draws.
        mu_scale: standard deviation of the random ``mu`` the comparison is made at (0: the paper's
            initial ``mu = 0``).
    """
    if not method(cfg.inference).bayesian:
        raise ValueError("the estimators differ only under --inference vi")
    out: dict[str, Any] = {}
    for estimator in ESTIMATORS:
        torch.manual_seed(seed)
        model, guide = build_model(replace(cfg, estimator=estimator), tuple(x.shape[1:]), num_classes)
        with torch.no_grad():
            guide.loc = torch.randn(guide.loc.shape) * mu_scale
        loss_fn = build_loss(cfg, model, guide)
        params = {
            f"{owner}.{n}": p
            for owner, module in (("model", model), ("guide", guide))
            for n, p in module.named_parameters()
        }
        grads: dict[str, list[torch.Tensor]]
        losses, grads = [], {name: [] for name in GROUPS if name in params}
        torch.manual_seed(seed + 1)
        for _ in range(repeats):
            loss = loss_fn(x, y, num_data=num_data)
            names = list(grads)
            g = torch.autograd.grad(loss, [params[n] for n in names])
            losses.append(float(loss.detach()))
            for n, gi in zip(names, g):
                grads[n].append(gi.detach().flatten())
        mean = sum(losses) / repeats
        sd = math.sqrt(sum((v - mean) ** 2 for v in losses) / (repeats - 1))
        out[estimator] = {
            "loss_mean": mean,
            "loss_se": sd / math.sqrt(repeats),
            "grad_variance": {GROUPS[n]: float(torch.stack(v).var(0).sum()) for n, v in grads.items()},
        }
    out["variance_ratio_shared_over_local"] = {
        k: out["shared"]["grad_variance"][k] / max(out["local"]["grad_variance"][k], 1e-300)
        for k in out["local"]["grad_variance"]
    }
    return out
