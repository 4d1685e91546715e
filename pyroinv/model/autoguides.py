"""Pyro's AutoGuides as the variational family of ``W2`` (``--guide autonormal`` / ``autolowrank``), beside the
paper's per-class full-covariance Cholesky guide (:class:`~pyroinv.model.guides.ClassCholeskyGuide`, the default).

* ``autonormal``: :class:`pyro.infer.autoguide.AutoNormal`, a mean-field Gaussian: every weight of ``W2``
  independent, ``q(W2) = prod_{c,d} N(mu_cd, s_cd^2)``; K·D means and K·D scales.
* ``autolowrank``: :class:`pyro.infer.autoguide.AutoLowRankMultivariateNormal`, one Gaussian over all K·D
  weights together with covariance ``F F^T + diag(s^2)``, ``F`` of rank ``r`` (Pyro's default
  ``r = ceil(sqrt(K D))``): correlations across classes as well as within one, at a low rank.

Each AutoGuide is built on the prior's ``W2`` site alone (its ``classes`` plate, event ``D``) and called by
:class:`AutoW2Guide`, which gives it the package's guide interface (KL to the prior, posterior draws,
diagnostics) and the ELBO's estimators: under the ``local`` estimator the AutoGuide is called inside the
per-example ``W2_draws`` plate (:mod:`pyroinv.model.estimators`), so its ``W2`` (or its joint latent) is drawn
once per example from the same ``q``, exactly as the Cholesky guide's is. Both start at the paper's ``mu = 0``
and marginal scale ``init_scale`` (1: ``q`` = the prior's shape at ``alpha = 1``).

The KL of the ELBO is ``KL(q || p) = -H(q) + (K D / 2) log(2 pi alpha) + (tr Cov_q + ||mu||^2) / (2 alpha)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine
import torch
from pyro.infer.autoguide import AutoGuide, AutoLowRankMultivariateNormal, AutoNormal

from .estimators import DRAWS_PLATE, num_draws
from .scope import PyroinvModule, local_params

AUTOGUIDES: dict[str, Callable[..., AutoGuide]] = {
    "autonormal": AutoNormal,
    "autolowrank": AutoLowRankMultivariateNormal,
}


class AutoW2Guide(PyroinvModule):
    """A Pyro AutoGuide over ``W2`` (``kind``: ``autonormal`` or ``autolowrank``) with the package's guide interface.

    Args:
        kind: which AutoGuide (:data:`AUTOGUIDES`).
        num_classes, dim: K and D.
        alpha: the prior variance of every weight (the AutoGuide's prototype is the prior's ``W2`` site).
        init_scale: initial marginal standard deviation of every weight.
        estimator: ``local`` (a draw per example in training) or ``shared`` (one per batch).
    """

    def __init__(
        self,
        kind: str,
        num_classes: int,
        dim: int,
        alpha: float = 1.0,
        init_scale: float = 1.0,
        estimator: str = "shared",
    ) -> None:
        super().__init__()
        if kind not in AUTOGUIDES:
            raise ValueError(f"unknown AutoGuide {kind!r}; choose one of {', '.join(AUTOGUIDES)}")
        num_draws(estimator, 1)  # validates the name
        self.kind, self.estimator = kind, estimator
        self.num_classes, self.dim, self.alpha = num_classes, dim, float(alpha)
        with local_params():
            self.auto = AUTOGUIDES[kind](
                self._prior_w2,
                init_loc_fn=pyro.infer.autoguide.init_to_value(values={"W2": torch.zeros(num_classes, dim)}),
                init_scale=init_scale,
            )
            self.auto._setup_prototype()  # its parameters exist from the start (for the optimiser and state_dict)

    def _prior_w2(self) -> None:
        with pyro.plate("classes", self.num_classes, dim=-1):
            pyro.sample("W2", dist.Normal(0.0, math.sqrt(self.alpha)).expand([self.num_classes, self.dim]).to_event(1))

    def forward(self, x: torch.Tensor | None = None, y: torch.Tensor | None = None, *args, **kwargs) -> torch.Tensor:
        """The ``W2`` site: one draw per example in training under ``local``, else one per call."""
        draws = 1 if x is None else num_draws(self.estimator, x.shape[0], observed=y is not None)
        if draws == 1:
            return self.auto()["W2"]
        with pyro.plate(DRAWS_PLATE, draws, dim=-2), poutine.scale(scale=1.0 / draws):
            return self.auto()["W2"]

    def marginal(self) -> dist.TorchDistribution:
        """``q`` over the K·D weights, flattened: ``Normal`` (autonormal) or ``LowRankMultivariateNormal``."""
        if self.kind == "autonormal":
            loc, scale = self.auto._get_loc_and_scale("W2")
            return dist.Normal(loc.reshape(-1), scale.reshape(-1)).to_event(1)
        return self.auto.get_posterior()

    @torch.no_grad()
    def posterior_sample(self, num_draws: int) -> torch.Tensor:
        """``(L, K, D)`` draws ``W2 ~ q``."""
        return self.marginal().sample((num_draws,)).reshape(num_draws, self.num_classes, self.dim)

    def median(self) -> torch.Tensor:
        """q's mean of ``W2``, ``(K, D)`` (the AutoGuide's own ``median()``)."""
        return self.auto.median()["W2"]

    def _mean_cov_trace(self) -> tuple[torch.Tensor, torch.Tensor]:
        q: Any = self.marginal()  # Independent(Normal) or LowRankMultivariateNormal, by kind
        if self.kind == "autonormal":
            return q.mean, q.base_dist.scale.pow(2).sum()
        return q.loc, q.cov_factor.pow(2).sum() + q.cov_diag.sum()

    def regulariser(self, prior: dist.TorchDistribution) -> torch.Tensor:
        """``KL(q || p)`` against the isotropic prior ``N(0, alpha I)`` (the module docstring's formula)."""
        mean, trace = self._mean_cov_trace()
        n, a = mean.numel(), self.alpha
        return -self.marginal().entropy() + 0.5 * n * math.log(2 * math.pi * a) + 0.5 * (trace + mean.pow(2).sum()) / a

    def mean_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters of q's mean (Adam steps them at their own rate, ``Config.mean_lr``)."""
        if self.kind == "autonormal":
            self.auto.locs.W2  # noqa: B018  (materialise the module-local parameter)
            return [self.auto.locs.W2_unconstrained]
        return [self.auto.loc]

    @torch.no_grad()
    def diagnostics(self) -> dict[str, float]:
        """``q_scale``: the mean marginal standard deviation of a weight (1 at the start); ``mu_norm``: ``||mu||``."""
        mean, trace = self._mean_cov_trace()
        q: Any = self.marginal()  # Independent(Normal) or LowRankMultivariateNormal, by kind
        var = q.variance if self.kind == "autonormal" else q.cov_factor.pow(2).sum(-1) + q.cov_diag
        return {"q_scale": float(var.sqrt().mean()), "mu_norm": float(mean.norm())}


__all__ = ["AUTOGUIDES", "AutoW2Guide"]
