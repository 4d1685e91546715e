"""Each method's training objective as one object: the loss of (model, guide) on a batch, and ``eta``'s gradient
where ``eta`` climbs another objective than the weights.

As GPyTorch's ``VariationalELBO(likelihood, model, num_data)`` is the loss of a model and laplace-torch's
``log_marginal_likelihood()`` the evidence, a :class:`MethodLoss` is called on a batch and returns
``-objective`` (N/M-scaled by the model's subsampled plate):

* :class:`MethodLoss`: Pyro's ELBO of ``(model, guide)`` (:func:`~pyroinv.inference.build.build_loss`): ``-ELBO``
  for a Gaussian ``q(W2)``; for a point guide the same estimator is ``-log joint`` (MAP), ``-log-likelihood``
  (maximum likelihood) or Augerino's ``-(log-likelihood + width reward)``. ``eta`` takes the loss's gradient.
* :class:`LaplaceEvidenceLoss` (``--inference laplace``): the weights on ``-log joint`` (plus the body's prior
  where the evidence covers every layer), and ``eta`` on the Laplace evidence::

      log p(D | eta) ~ log p(D, W_hat | eta) - 1/2 log det(alpha P),

  whose Occam term's gradient :meth:`LaplaceEvidenceLoss.eta_gradient` gives, read off the batch's averaged
  features against the curvature refreshed every epoch (:mod:`pyroinv.inference.laplace`,
  :mod:`pyroinv.inference.laplace_layers`).
"""

from __future__ import annotations

from typing import cast

import torch
from pyro.nn import PyroModule

from ..config import Config
from ..model.bnn import InvariantBNN
from ..model.methods import method
from ..model.objectives import LAPLACE
from ..model.scope import local_params
from .build import build_loss
from .laplace import LaplaceEtaGradient
from .laplace_layers import LayersLaplace


class MethodLoss(torch.nn.Module):
    """``-objective`` of ``(model, guide)`` on a batch ``(x, y)`` of a data set of ``num_data`` examples."""

    def __init__(self, cfg: Config, model: InvariantBNN, guide: PyroModule) -> None:
        super().__init__()
        self.elbo = build_loss(cfg, model, guide)

    def forward(self, x: torch.Tensor, y: torch.Tensor, num_data: int) -> torch.Tensor:
        return self.elbo(x, y, num_data=num_data)

    def total(self, loss: torch.Tensor) -> torch.Tensor:
        """The step's loss from Pyro's estimate (:meth:`forward`): the same here; called under module-local
        parameters."""
        return loss

    def eta_gradient(self, step: int, steps_per_epoch: int) -> list[torch.Tensor | None] | None:
        """``eta``'s gradient beyond the loss's at ``step`` (``None``: none)."""
        return None

    @property
    def steps_eagerly(self) -> bool:
        """The step changes state between steps (a refreshed curvature), so it cannot be replayed as a graph."""
        return False

    def diagnostics(self) -> dict[str, float]:
        return {}

    def extra_state(self) -> dict | None:
        """What a checkpoint keeps of the objective beyond the parameters (``None``: nothing)."""
        return None

    def load_extra_state(self, state: dict) -> None:
        """Restore :meth:`extra_state`."""


class LaplaceEvidenceLoss(MethodLoss):
    """The Laplace method's objective: weights on the log joint, ``eta`` on the Laplace evidence (module docstring).

    Args:
        cfg, model, guide: as :class:`MethodLoss`; ``cfg.laplace_layers`` picks the evidence of ``W2`` (``last``)
            or of every fully connected layer (``all``).
        x, y: the training set (the curvature's data).
    """

    def __init__(self, cfg: Config, model: InvariantBNN, guide: PyroModule, x: torch.Tensor, y: torch.Tensor) -> None:
        super().__init__(cfg, model, guide)
        scope = LayersLaplace if cfg.laplace_layers == "all" else LaplaceEtaGradient
        with local_params():
            self.laplace = scope(model, x, y, cfg.alpha, seed=cfg.seed)
        self.model, self.guide = [model], [guide]  # not submodules: their parameters are the ELBO's
        self._x: torch.Tensor | None = None
        self._features: torch.Tensor | None = None
        model.features_hook = self._keep_features

    def _keep_features(self, features: torch.Tensor) -> None:
        self._features = features.mean(0)  # phi_bar of the batch (the logits are averaged: Config.validate)

    def forward(self, x: torch.Tensor, y: torch.Tensor, num_data: int) -> torch.Tensor:
        self._x = x
        return super().forward(x, y, num_data)

    def total(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss plus the body's prior, where the Laplace evidence covers it (``laplace_layers="all"``)."""
        return loss + self.laplace.weight_penalty()

    def eta_gradient(self, step: int, steps_per_epoch: int) -> list[torch.Tensor | None]:
        """``eta``'s gradient of ``1/2 log det(alpha P)`` at this step, the curvature refreshed at the start of every
        epoch (and not more often than every ``refresh_steps`` steps)."""
        W2 = self.guide[0].median().detach()
        if not self.laplace.ready or step % max(steps_per_epoch, self.laplace.refresh_steps) == 0:
            self.laplace.refresh(W2)
        # cast: forward (and the model's features hook) set them before the step asks for eta's gradient
        surrogate = self.laplace.half_logdet_surrogate(
            cast(torch.Tensor, self._x), cast(torch.Tensor, self._features), W2
        )
        eta = list(self.model[0].invariance.parameters())
        return list(torch.autograd.grad(surrogate, eta, retain_graph=True, allow_unused=True))

    @property
    def steps_eagerly(self) -> bool:
        return True

    def diagnostics(self) -> dict[str, float]:
        return self.laplace.diagnostics() if self.laplace.ready else {}

    def extra_state(self) -> dict:
        """The curvature and, over every layer, the learned prior precisions."""
        return self.laplace.state_dict()

    def load_extra_state(self, state: dict) -> None:
        self.laplace.load_state_dict(state)


def method_loss(cfg: Config, model: InvariantBNN, guide: PyroModule, x: torch.Tensor, y: torch.Tensor) -> MethodLoss:
    """The objective object of ``cfg.inference``: the Laplace evidence where ``eta`` climbs it and is learned, Pyro's
    ELBO otherwise."""
    if method(cfg.inference).eta_climbs is LAPLACE and model.invariance.learn:
        return LaplaceEvidenceLoss(cfg, model, guide, x, y)
    return MethodLoss(cfg, model, guide)


__all__ = ["LaplaceEvidenceLoss", "MethodLoss", "method_loss"]
