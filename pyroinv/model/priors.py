"""The isotropic Gaussian prior ``p(w_c) = N(0, alpha I)`` and its closed-form KL.

:class:`IsotropicNormal` is a ``MultivariateNormal`` with ``scale_tril = sqrt(alpha) I``
whose ``log_prob`` costs O(D) instead of a triangular solve. The KL from a
full-covariance Gaussian ``q = N(mu, L L^T)`` is registered with
:func:`torch.distributions.kl.register_kl` at O(D^2) cost::

    KL(q || p) = 1/2 [ (||L||_F^2 + ||mu||^2) / alpha - D + D log alpha - 2 sum_i log |L_ii| ]

(Appendix A's "closed-form KL regulariser", with ``Sigma_p = alpha I``). Pyro's
``TraceMeanField_ELBO`` uses it; ``Trace_ELBO`` estimates the same term by sampling.
"""

from __future__ import annotations

import functools
import math

import pyro.distributions as dist
import torch
from torch.distributions import MultivariateNormal as TorchMVN
from torch.distributions.kl import register_kl


@functools.lru_cache(maxsize=8)
def _scaled_eye(dim: int, scale: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``scale * I`` (read-only, shared): the prior is built twice per training step."""
    return torch.eye(dim, dtype=dtype, device=device) * scale


class IsotropicNormal(dist.MultivariateNormal):
    """``N(loc, variance * I)`` as a multivariate normal (batch shape ``loc.shape[:-1]``)."""

    def __init__(self, loc: torch.Tensor, alpha: float, validate_args: bool | None = None) -> None:
        if not alpha > 0:
            raise ValueError(f"prior variance alpha must be positive, got {alpha}")
        self.alpha = float(alpha)
        D = loc.shape[-1]
        eye = _scaled_eye(D, math.sqrt(self.alpha), loc.dtype, loc.device)
        super().__init__(loc, scale_tril=eye.expand(loc.shape + (D,)), validate_args=False)

    def expand(self, batch_shape, _instance=None):  # keep the subclass (and its O(D) log_prob)
        return IsotropicNormal(self.loc.expand(torch.Size(batch_shape) + self.event_shape), self.alpha)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        D = self.event_shape[0]
        sq = ((value - self.loc) ** 2).sum(-1)
        return -0.5 * sq / self.alpha - 0.5 * D * math.log(2 * math.pi * self.alpha)

    def entropy(self) -> torch.Tensor:
        D = self.event_shape[0]
        return torch.full(
            self.batch_shape,
            0.5 * D * (1 + math.log(2 * math.pi * self.alpha)),
            dtype=self.loc.dtype,
            device=self.loc.device,
        )


def kl_full_to_isotropic(q: TorchMVN, p: IsotropicNormal) -> torch.Tensor:
    """Closed-form ``KL(N(mu, L L^T) || N(m, alpha I))``, shape ``batch_shape``."""
    L = q._unbroadcasted_scale_tril
    D = q.event_shape[0]
    a = p.alpha
    trace = L.pow(2).sum((-2, -1))
    maha = (q.loc - p.loc).pow(2).sum(-1)
    logdet_q = 2 * L.diagonal(dim1=-2, dim2=-1).abs().log().sum(-1)
    return 0.5 * ((trace + maha) / a - D + D * math.log(a) - logdet_q)


register_kl(TorchMVN, IsotropicNormal)(kl_full_to_isotropic)
