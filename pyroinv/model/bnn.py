"""The Pyro model: ``W2 ~ N(0, alpha I)`` per class, likelihood through the MC-averaged invariant net.

Paper §3.6-3.7 and Appendix A. The paper writes the Monte-Carlo average over the S transforms
``T_i ~ p_eta(T)`` in two ways, both available here (``average``):

* ``"probs"`` (main text, eq. (f-estimate)): average the *probabilities*::

      log f_hat(x)_y = log (1/S) sum_i softmax(W2 phi(W1 T_i x))_y
                     = logsumexp_i log_softmax(W2 phi(W1 T_i x))_y - log S;

* ``"logits"`` (Appendix A): average inside the softmax, ``log sigma_y(E_T[W2 phi(W1 T x)])``,
  i.e. ``log_softmax(W2 (1/S) sum_i phi(W1 T_i x))_y`` (``W2`` is linear, so averaging logits and
  averaging features is the same). The package's default (``Config.average``): on the cpu protocol it
  gave the better bound, accuracy and invariance (docs/results/deviations.md).

The observations sit in a subsampled ``pyro.plate("data", N)`` so Pyro scales the log-likelihood by
N/M (the SGVB estimate). With a guide ``q(W2)`` the ELBO is::

    L = E_q[ sum_n log f_hat(x_n)_{y_n} ] - KL(q(W2) || p(W2))  <=  log p(D | eta)

(Jensen over the S transforms, eq. (bound)); ``eta`` and, for the ReLU network, ``W1`` are
parameters of the model maximised jointly with the variational parameters. ``estimator`` says
whether ``E_q`` is estimated with one ``W2`` draw per batch or per example
(:mod:`pyroinv.model.estimators`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyro
import pyro.distributions as dist
import torch
from pyro.distributions import constraints

from ..errors import ConfigError
from .estimators import ESTIMATORS, num_draws, w2_plates
from .priors import IsotropicNormal
from .scope import PyroinvModule

PRIORS = ("normal", "flat")
#: examples whose features are computed at once when the model predicts outside autograd
PREDICT_CHUNK = 500
#: the two readings of the average over transforms: probabilities (eq. f-estimate) or logits (Appendix A)
AVERAGES = ("probs", "logits")


def mc_log_predictive(
    features: torch.Tensor, W2: torch.Tensor, average: str = "probs", paired: bool = False
) -> torch.Tensor:
    """``log f_hat(x)``, stably, shape ``(B, K)``.

    Args:
        features: ``(S, B, D)`` features of the S transforms.
        W2: ``(K, D)``, one draw for every example; ``(L, K, D)``, L draws for every example, whose
            probabilities are averaged too (the posterior predictive); or, with ``paired``,
            ``(B, K, D)``: draw b for example b only (the ``local`` estimator).
        average: ``"probs"``: ``log (1/S) sum_i softmax(W2 phi_i)``; ``"logits"``:
            ``log_softmax(W2 (1/S) sum_i phi_i)``.
    """
    if average == "logits":
        features = features.mean(0, keepdim=True)
    elif average != "probs":
        raise ValueError(f"unknown average {average!r}; choose one of {', '.join(AVERAGES)}")
    if paired:  # (B, S, D) @ (B, D, K) -> (S, B, K)
        logits = torch.bmm(features.transpose(0, 1), W2.transpose(-1, -2)).transpose(0, 1)
    else:
        logits = torch.matmul(features.unsqueeze(-3) if W2.dim() == 3 else features, W2.transpose(-1, -2))
    logp = torch.log_softmax(logits, dim=-1)
    if W2.dim() == 3 and not paired:  # (S, L, B, K): average over draws and transforms
        return torch.logsumexp(logp.flatten(0, 1), dim=0) - math.log(logp.shape[0] * logp.shape[1])
    return torch.logsumexp(logp, dim=0) - math.log(logp.shape[0])


class InvariantBNN(PyroinvModule):
    """Bayesian output layer on top of :class:`~pyroinv.model.networks.InvariantFeatures`.

    Args:
        features: the invariant feature map (holds ``W1`` and the invariance ``eta``).
        num_classes: K.
        alpha: prior variance of every weight of ``W2`` (paper: 1).
        prior: ``"normal"`` for ``N(0, alpha I)``; ``"flat"`` for an improper uniform prior
            (with a point guide: maximum likelihood).
        num_samples: S, transforms per forward pass (paper: 32).
        sampling: ``"stochastic"`` or ``"deterministic"``.
        average: ``"probs"`` (eq. f-estimate) or ``"logits"`` (Appendix A), see the module docstring.
        estimator: ``"local"`` (a ``W2`` draw per example) or ``"shared"`` (one per batch); the guide
            must be built with the same (:mod:`pyroinv.model.estimators`).
    """

    #: the feature map: any of the registry's (InvariantFeatures, DeepMLPFeatures, ConvFeatures) or a BodyFeatures
    features: Any

    def __init__(
        self,
        features: torch.nn.Module,
        num_classes: int,
        alpha: float = 1.0,
        prior: str = "normal",
        num_samples: int = 32,
        sampling: str = "stochastic",
        width_weight: float = 0.0,
        average: str = "probs",
        estimator: str = "shared",
    ) -> None:
        super().__init__()
        if average not in AVERAGES:
            raise ConfigError(f"unknown average {average!r}; choose one of {', '.join(AVERAGES)}")
        if estimator not in ESTIMATORS:
            raise ConfigError(f"unknown estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")
        if prior not in PRIORS:
            raise ConfigError(f"unknown prior {prior!r}; choose one of {', '.join(PRIORS)}")
        if not alpha > 0:
            raise ConfigError(f"alpha must be a positive prior variance, got {alpha}")
        self.features = features
        self.num_classes = num_classes
        self.alpha = float(alpha)
        self.prior_kind = prior
        self.num_samples = num_samples
        self.sampling = sampling
        self.width_weight = float(width_weight)
        self.average = average
        self.estimator = estimator
        #: when set, called with the ``(S, B, D)`` features of every :meth:`log_predictive` (the Laplace method reads
        #: the training batch's curvature off the step's own forward pass)
        self.features_hook: Callable[[torch.Tensor], None] | None = None

    @property
    def invariance(self):
        return self.features.invariance

    def prior(self, device: torch.device | None = None) -> dist.TorchDistribution:
        """``p(W2)`` with batch shape ``(K,)`` and event shape ``(D,)``."""
        K, D = self.num_classes, self.features.num_features
        if self.prior_kind == "flat":
            return dist.ImproperUniform(constraints.real, (K,), (D,))
        return IsotropicNormal(torch.zeros(K, D, device=device), self.alpha)

    def sample_transforms(self) -> torch.Tensor:
        return self.invariance.sample_transforms(self.num_samples, self.sampling)

    def log_predictive(
        self, x: torch.Tensor, W2: torch.Tensor, T: torch.Tensor | None = None, paired: bool = False
    ) -> torch.Tensor:
        """``log f_hat(x)``, shape ``(B, K)``, for one (or L stacked, or with ``paired`` one per example) ``W2``."""
        T = self.sample_transforms() if T is None else T
        features = self.features(x, T)
        if self.features_hook is not None:
            self.features_hook(features)
        return mc_log_predictive(features, W2, self.average, paired=paired)

    @torch.no_grad()
    def chunked_log_predictive(
        self, x: torch.Tensor, W2: torch.Tensor, T: torch.Tensor | None = None, batch_size: int = PREDICT_CHUNK
    ) -> torch.Tensor:
        """``log f_hat(x)``, ``(N, K)``, for ``W2`` ``(K, D)`` (or ``(L, K, D)``, draws averaged), without autograd: the
        S warped copies of ``W1`` made once, the features ``batch_size`` examples at a time."""
        bank = self.features.weight_bank(self.sample_transforms() if T is None else T)
        return torch.cat(
            [
                mc_log_predictive(self.features.apply_bank(x[i : i + batch_size], bank), W2, self.average)
                for i in range(0, x.shape[0], batch_size)
            ]
        )

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, num_data: int | None = None) -> torch.Tensor:
        """The generative model; returns ``log f_hat(x)`` of the batch.

        With labels ``y`` (training) the ``W2`` site has one draw per example under the ``local`` estimator. Without
        them (prediction, e.g. ``pyro.infer.Predictive``) one ``W2`` serves the whole call, and outside autograd the
        features are computed :data:`PREDICT_CHUNK` examples at a time, so memory is bounded by the chunk."""
        draws = num_draws(self.estimator, x.shape[0], observed=y is not None)
        with w2_plates(self.num_classes, draws):
            W2 = pyro.sample("W2", self.prior(device=x.device))
        if y is None and not torch.is_grad_enabled() and x.shape[0] > PREDICT_CHUNK:
            logp = self.chunked_log_predictive(x, W2)
        else:
            logp = self.log_predictive(x, W2, paired=draws > 1)
        batch = x.shape[0]
        with pyro.plate("data", num_data or batch, subsample=torch.arange(batch, device=x.device)):
            pyro.sample("y", dist.Categorical(logits=logp), obs=y)
        if self.width_weight and self.invariance.learn:
            # Augerino's width reward, lambda * ||eta||_2 per data point (loss = CE - lambda ||eta||)
            pyro.factor("width_reward", (num_data or batch) * self.width_weight * self.invariance.eta.norm())
        return logp
