"""Variational families for the output weights ``W2`` (paper §3.7, Appendix A).

:class:`ClassCholeskyGuide` is the paper's ``q(W2) = prod_c N(w_c | mu_c, L_c L_c^T)``:
one full-covariance Gaussian per class with a Cholesky factor, initialised at
``mu = 0``, ``L = I``.

Parameterisation (a deliberate departure from a raw lower-triangular matrix):
``L_c = diag(softplus(rho_c)) + tril(V_c, -1) / sqrt(D)``. Adam moves every
coordinate by about the learning rate per step regardless of its gradient's size,
so a raw ``D x D`` factor trained with Adam random-walks its ~D^2/2 off-diagonal
entries and the covariance grows with D (at D = 1025 the loss rose from 4.6 to 8.9
in 150 steps). Scaling the off-diagonal part by ``1 / sqrt(D)`` makes one Adam step
change a row of ``L`` by as much as it changes one diagonal entry, and the softplus
keeps the diagonal positive so ``L`` stays a valid Cholesky factor. The family is
unchanged: every lower-triangular ``L`` with positive diagonal is reachable.

:class:`PointGuide` is a ``Delta`` on ``W2``: with the Gaussian prior it gives MAP,
with the flat prior maximum likelihood (the §4.1 ablation).
"""
from __future__ import annotations

import math

import pyro
import pyro.distributions as dist
import torch
from pyro.distributions import constraints
from pyro.nn import PyroModule, PyroParam


class ClassCholeskyGuide(PyroModule):
    """Per-class ``MultivariateNormal(mu_c, scale_tril=L_c)`` over the rows of ``W2``.

    Args:
        num_classes: K.
        dim: D, the number of features (hidden units + 1 for the bias).
        init_scale: initial diagonal of ``L`` (paper: 1, i.e. ``L = I``).
        offdiag_scale: factor on the strictly lower part (default ``1 / sqrt(D)``).
    """

    def __init__(self, num_classes: int, dim: int, init_scale: float = 1.0, offdiag_scale: float | None = None) -> None:
        super().__init__()
        self.num_classes, self.dim = num_classes, dim
        self.offdiag_scale = offdiag_scale if offdiag_scale is not None else 1.0 / math.sqrt(dim)
        self.loc = PyroParam(torch.zeros(num_classes, dim))
        self.diag = PyroParam(torch.full((num_classes, dim), float(init_scale)), constraint=constraints.softplus_positive)
        self.offdiag = PyroParam(torch.zeros(num_classes, dim, dim))
        # strictly-lower mask times the 1/sqrt(D) factor (a multiply is much faster than torch.tril on CPU)
        self.register_buffer("_lower", torch.tril(torch.ones(dim, dim), diagonal=-1) * self.offdiag_scale,
                             persistent=False)

    def scale_tril(self) -> torch.Tensor:
        """``L_c``, shape ``(K, D, D)``."""
        return torch.diag_embed(self.diag) + self.offdiag * self._lower

    def distribution(self) -> dist.MultivariateNormal:
        # L is lower triangular with a positive diagonal by construction: skip the O(K D^2) validation
        return dist.MultivariateNormal(self.loc, scale_tril=self.scale_tril(), validate_args=False)

    def forward(self, *args, **kwargs) -> torch.Tensor:
        with pyro.plate("classes", self.num_classes):
            return pyro.sample("W2", self.distribution())


class PointGuide(PyroModule):
    """``q(W2) = Delta(W2_hat)``: a point estimate, initialised at zero like ``mu``."""

    def __init__(self, num_classes: int, dim: int) -> None:
        super().__init__()
        self.num_classes, self.dim = num_classes, dim
        self.W2_hat = PyroParam(torch.zeros(num_classes, dim))

    def forward(self, *args, **kwargs) -> torch.Tensor:
        with pyro.plate("classes", self.num_classes):
            return pyro.sample("W2", dist.Delta(self.W2_hat, event_dim=1))
