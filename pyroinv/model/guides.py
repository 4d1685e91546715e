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

from .estimators import num_draws, w2_plates


class _ScaleTril(torch.autograd.Function):
    """``L = V * lower`` with ``diag(d)`` written onto its (zero) diagonal, and the gradients
    ``dV = dL * lower``, ``dd = diag(dL)``: one pass each way. (Autograd's own graph of the in-place
    diagonal write clones the whole ``(K, D, D)`` gradient of ``L`` first.)"""

    @staticmethod
    def forward(ctx, offdiag: torch.Tensor, diag: torch.Tensor, lower: torch.Tensor) -> torch.Tensor:
        L = offdiag * lower  # a fresh tensor; ``lower`` is zero on and above the diagonal
        L.diagonal(dim1=-2, dim2=-1).copy_(diag)
        ctx.save_for_backward(lower)
        return L

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        (lower,) = ctx.saved_tensors
        return grad * lower, grad.diagonal(dim1=-2, dim2=-1).clone(), None


def _scale(L: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """``L eps`` for ``L`` ``(K, D, D)`` and ``eps`` ``(..., K, D)``.

    Many draws per class (the ``local`` estimator's one per example) are one ``(D, D) @ (D, n)`` product per
    class rather than ``n`` matrix-vector products that each read the whole of ``L``."""
    if L.dim() == 3 and eps.dim() > 2 and eps.shape[-2:] == L.shape[:2]:
        K, D = L.shape[0], L.shape[1]
        flat = eps.reshape(-1, K, D).permute(1, 2, 0)               # (K, D, n)
        return torch.matmul(L, flat).permute(2, 0, 1).reshape(eps.shape)
    return (L @ eps.unsqueeze(-1)).squeeze(-1)


class ReparameterizedMVN(dist.MultivariateNormal):
    """``MultivariateNormal`` that remembers the noise of its last ``rsample``.

    For ``w = mu + L eps`` the log-density is ``log q(w) = -|eps|^2 / 2 - sum_i log L_ii - D log(2 pi) / 2``
    exactly, so ``log_prob`` of the sample it has just drawn needs no triangular solve (the ``O(K D^2)``
    solve and its backward, a sizeable part of a training step at D = 1025). Value and gradient are those of the
    solve: as a function of the parameters at fixed ``eps``, ``log q(mu + L eps)`` is the expression
    above (the reparameterised, pathwise gradient). Any other value goes through the usual solve.

    ``scale_diag``, the diagonal of ``scale_tril`` held as its own tensor, lets ``sum_i log L_ii`` take its
    gradient there directly instead of through a zero-filled ``(K, D, D)`` gradient of ``L``.
    """

    _last: tuple[torch.Tensor, torch.Tensor] | None = None
    _scale_diag: torch.Tensor | None = None

    def __init__(self, loc: torch.Tensor, scale_tril: torch.Tensor, scale_diag: torch.Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        super().__init__(loc, scale_tril=scale_tril, validate_args=validate_args)
        self._scale_diag = scale_diag

    def expand(self, batch_shape: torch.Size, _instance: ReparameterizedMVN | None = None) -> ReparameterizedMVN:
        new = super().expand(batch_shape, _instance=self.__new__(type(self)) if _instance is None else _instance)
        if self._scale_diag is not None:
            new._scale_diag = self._scale_diag.expand(torch.Size(batch_shape) + self.event_shape)
        return new

    def rsample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:
        shape = self._extended_shape(sample_shape)
        eps = torch.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        value = self.loc + _scale(self._unbroadcasted_scale_tril, eps)
        self._last = (value, eps)
        return value

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._last is None or value is not self._last[0]:
            return super().log_prob(value)
        eps = self._last[1]
        diag = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1) if self._scale_diag is None else self._scale_diag
        half_log_det = diag.log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + eps.pow(2).sum(-1)) - half_log_det


class ClassCholeskyGuide(PyroModule):
    """Per-class ``MultivariateNormal(mu_c, scale_tril=L_c)`` over the rows of ``W2``.

    Args:
        num_classes: K.
        dim: D, the number of features (hidden units + 1 for the bias).
        init_scale: initial diagonal of ``L`` (paper: 1, i.e. ``L = I``).
        offdiag_scale: factor on the strictly lower part (default ``1 / sqrt(D)``).
        estimator: ``"local"`` draws one ``W2`` per example of the batch, ``"shared"`` one per batch;
            the model must use the same (:mod:`pyroinv.model.estimators`).
    """

    def __init__(self, num_classes: int, dim: int, init_scale: float = 1.0, offdiag_scale: float | None = None,
                 estimator: str = "shared") -> None:
        super().__init__()
        num_draws(estimator, 1)  # validates the name
        self.estimator = estimator
        self.num_classes, self.dim = num_classes, dim
        self.offdiag_scale = offdiag_scale if offdiag_scale is not None else 1.0 / math.sqrt(dim)
        self.loc = PyroParam(torch.zeros(num_classes, dim))
        self.diag = PyroParam(torch.full((num_classes, dim), float(init_scale)), constraint=constraints.softplus_positive)
        self.offdiag = PyroParam(torch.zeros(num_classes, dim, dim))
        # strictly-lower mask times the 1/sqrt(D) factor (a multiply is much faster than torch.tril on CPU)
        self.register_buffer("_lower", torch.tril(torch.ones(dim, dim), diagonal=-1) * self.offdiag_scale,
                             persistent=False)

    def scale_tril(self, diag: torch.Tensor | None = None) -> torch.Tensor:
        """``L_c``, shape ``(K, D, D)`` (``diag``: the constrained diagonal, if already computed)."""
        return _ScaleTril.apply(self.offdiag, self.diag if diag is None else diag, self._lower)

    def distribution(self) -> dist.MultivariateNormal:
        # L is lower triangular with a positive diagonal by construction: skip the O(K D^2) validation
        diag = self.diag
        return ReparameterizedMVN(self.loc, scale_tril=self.scale_tril(diag), scale_diag=diag, validate_args=False)

    def forward(self, x: torch.Tensor | None = None, *args, **kwargs) -> torch.Tensor:
        draws = 1 if x is None else num_draws(self.estimator, x.shape[0])
        with w2_plates(self.num_classes, draws):
            return pyro.sample("W2", self.distribution())

    @torch.no_grad()
    def posterior_sample(self, num_draws: int) -> torch.Tensor:
        """``(L, K, D)`` draws ``W2 ~ q`` for the posterior predictive."""
        return self.distribution().sample((num_draws,))

    def regulariser(self, prior: dist.Distribution) -> torch.Tensor:
        """``KL(q || p)`` summed over classes: what the ELBO subtracts from the expected log-likelihood."""
        return torch.distributions.kl_divergence(self.distribution(), prior).sum()

    def mean_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters of ``mu`` (Adam steps them at their own rate, ``Config.mean_lr``)."""
        self.loc  # noqa: B018  (materialise the module-local parameter)
        return [self.loc_unconstrained]

    @torch.no_grad()
    def diagnostics(self) -> dict[str, float]:
        """Where q stands against the prior: ``q_scale``, the mean diagonal of the ``L_c`` (1 at the
        paper's initial ``L = I``; far below 1 when q has collapsed), and ``mu_norm``, ``||mu||_F``."""
        return {"q_scale": float(self.diag.mean()), "mu_norm": float(self.loc.norm())}


class PointGuide(PyroModule):
    """``q(W2) = Delta(W2_hat)``: a point estimate, initialised at zero like ``mu``."""

    def __init__(self, num_classes: int, dim: int) -> None:
        super().__init__()
        self.num_classes, self.dim = num_classes, dim
        self.W2_hat = PyroParam(torch.zeros(num_classes, dim))

    def forward(self, *args, **kwargs) -> torch.Tensor:
        with w2_plates(self.num_classes):
            return pyro.sample("W2", dist.Delta(self.W2_hat, event_dim=1))

    @torch.no_grad()
    def posterior_sample(self, num_draws: int) -> torch.Tensor:
        """The point estimate as one draw, ``(1, K, D)``, whatever ``num_draws``."""
        return self.W2_hat.detach().unsqueeze(0)

    def regulariser(self, prior: dist.Distribution) -> torch.Tensor:
        """``-log p(W2_hat)``: the MAP penalty (zero under the flat prior of maximum likelihood)."""
        return -prior.log_prob(self.W2_hat).sum()

    def mean_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters of ``W2_hat`` (Adam steps them at their own rate, ``Config.mean_lr``)."""
        self.W2_hat  # noqa: B018  (materialise the module-local parameter)
        return [self.W2_hat_unconstrained]

    @torch.no_grad()
    def diagnostics(self) -> dict[str, float]:
        """``mu_norm``: ``||W2_hat||_F`` (no scale: a point estimate)."""
        return {"mu_norm": float(self.W2_hat.norm())}
