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
from pyro.nn import PyroParam
from torch.distributions.utils import _standard_normal

from . import kernels
from .estimators import num_draws, w2_plates
from .precision import mm
from .scope import PyroinvModule


class CholeskyMVN(dist.MultivariateNormal):
    """``MultivariateNormal(loc, scale_tril=L)`` that also holds the diagonal of ``L`` as its own tensor,
    ``scale_diag`` (unbroadcast, like ``L``), so that ``log |L| = sum_i log L_ii`` can take its gradient there
    (:class:`pyroinv.model.kernels.CholeskyNoiseReparam`). Its density and samples are the parent's; with a
    ``product_dtype`` (bfloat16 under ``--precision bf16``) the samples' product ``L eps`` takes that dtype."""

    def __init__(
        self,
        loc: torch.Tensor,
        scale_tril: torch.Tensor,
        scale_diag: torch.Tensor,
        validate_args: bool | None = None,
        product_dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(loc, scale_tril=scale_tril, validate_args=validate_args)
        self.scale_diag = scale_diag
        #: the dtype of the draw's product ``L eps`` (``None``: float32; :mod:`pyroinv.model.precision`)
        self.product_dtype = product_dtype

    def rsample(self, sample_shape: torch.Size | list[int] | tuple[int, ...] = torch.Size()) -> torch.Tensor:
        """``loc + L eps`` with the parent's ``eps``; ``L eps`` is one product per class
        (:func:`pyroinv.model.kernels.scaled_noise`), where the parent's broadcast ``matmul`` would copy ``L`` once
        per draw (128 copies of a ``(10, 513, 513)`` factor a step under the per-example estimator). With a
        ``product_dtype`` the product's operands are in that dtype, the result in float32."""
        if not kernels.enabled() and self.product_dtype is None:
            return super().rsample(sample_shape)
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        L = self._unbroadcasted_scale_tril
        if not kernels.enabled():  # the parent's formula, its product in ``product_dtype``
            return self.loc + mm(L, eps.unsqueeze(-1), self.product_dtype).squeeze(-1)
        return self.loc + kernels.scaled_noise(L, eps, self.product_dtype)

    def expand(
        self, batch_shape: torch.Size | list[int] | tuple[int, ...], _instance: CholeskyMVN | None = None
    ) -> CholeskyMVN:
        new = super().expand(batch_shape, _instance=self.__new__(type(self)) if _instance is None else _instance)
        new.scale_diag = self.scale_diag
        new.product_dtype = self.product_dtype
        return new


class ClassCholeskyGuide(PyroinvModule):
    """Per-class ``MultivariateNormal(mu_c, scale_tril=L_c)`` over the rows of ``W2``.

    Args:
        num_classes: K.
        dim: D, the number of features (hidden units + 1 for the bias).
        init_scale: initial diagonal of ``L`` (paper: 1, i.e. ``L = I``).
        offdiag_scale: factor on the strictly lower part (default ``1 / sqrt(D)``).
        estimator: ``"local"`` draws one ``W2`` per example of the batch, ``"shared"`` one per batch;
            the model must use the same (:mod:`pyroinv.model.estimators`).

    The ``W2`` site is the ``MultivariateNormal`` itself, whose ``log_prob`` solves with ``L``; training under
    ``Trace_ELBO`` draws it through :class:`pyroinv.model.kernels.CholeskyNoiseReparam` instead (the same density
    and gradients without the solve).
    """

    #: the dtype of the draw's product ``L eps`` (``None``: float32; set by
    #: :func:`pyroinv.model.precision.set_product_dtype`)
    product_dtype: torch.dtype | None = None
    # PyroParams: PyroModule turns each into a constrained parameter, read back as a tensor
    loc: torch.Tensor
    diag: torch.Tensor
    offdiag: torch.Tensor

    def __init__(
        self,
        num_classes: int,
        dim: int,
        init_scale: float = 1.0,
        offdiag_scale: float | None = None,
        estimator: str = "shared",
    ) -> None:
        super().__init__()
        num_draws(estimator, 1)  # validates the name
        self.estimator = estimator
        self.num_classes, self.dim = num_classes, dim
        self.offdiag_scale = offdiag_scale if offdiag_scale is not None else 1.0 / math.sqrt(dim)
        self.loc = PyroParam(torch.zeros(num_classes, dim))  # type: ignore[assignment]
        self.diag = PyroParam(  # type: ignore[assignment]
            torch.full((num_classes, dim), float(init_scale)), constraint=constraints.softplus_positive
        )
        self.offdiag = PyroParam(torch.zeros(num_classes, dim, dim))  # type: ignore[assignment]
        # strictly-lower mask times the 1/sqrt(D) factor (a multiply is much faster than torch.tril on CPU)
        self.register_buffer(
            "_lower", torch.tril(torch.ones(dim, dim), diagonal=-1) * self.offdiag_scale, persistent=False
        )

    def scale_tril(self, diag: torch.Tensor | None = None) -> torch.Tensor:
        """``L_c = diag(d_c) + tril(V_c, -1) / sqrt(D)``, shape ``(K, D, D)`` (``diag``: ``d``, if already computed)."""
        diag = self.diag if diag is None else diag
        if kernels.enabled():
            return kernels.scale_tril(self.offdiag, diag, self._lower)
        return torch.diag_embed(diag) + self.offdiag * self._lower

    def distribution(self) -> dist.MultivariateNormal:
        """``q(W2)``: batch ``(K,)``, event ``(D,)``."""
        # L is lower triangular with a positive diagonal by construction: skip the O(K D^2) validation
        diag = self.diag
        return CholeskyMVN(
            self.loc,
            scale_tril=self.scale_tril(diag),
            scale_diag=diag,
            validate_args=False,
            product_dtype=self.product_dtype,
        )

    def forward(self, x: torch.Tensor | None = None, y: torch.Tensor | None = None, *args, **kwargs) -> torch.Tensor:
        """The ``W2`` site: during training (labels ``y`` given) one draw per batch or per example (``estimator``),
        in prediction one draw per call, as the model does."""
        draws = 1 if x is None else num_draws(self.estimator, x.shape[0], observed=y is not None)
        with w2_plates(self.num_classes, draws):
            return pyro.sample("W2", self.distribution())

    @torch.no_grad()
    def posterior_sample(self, num_draws: int) -> torch.Tensor:
        """``(L, K, D)`` draws ``W2 ~ q`` for the posterior predictive."""
        return self.distribution().sample((num_draws,))

    def median(self) -> torch.Tensor:
        """``mu``, ``(K, D)``: q's mean (and median), as Pyro's AutoGuides' ``median()``."""
        return self.loc

    def regulariser(self, prior: dist.TorchDistribution) -> torch.Tensor:
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


class PointGuide(PyroinvModule):
    """``q(W2) = Delta(W2_hat)``: a point estimate, initialised at zero like ``mu``."""

    W2_hat: torch.Tensor  # a PyroParam, read back as a tensor

    def __init__(self, num_classes: int, dim: int) -> None:
        super().__init__()
        self.num_classes, self.dim = num_classes, dim
        self.W2_hat = PyroParam(torch.zeros(num_classes, dim))  # type: ignore[assignment]

    def forward(self, *args, **kwargs) -> torch.Tensor:
        with w2_plates(self.num_classes):
            return pyro.sample("W2", dist.Delta(self.W2_hat, event_dim=1))

    @torch.no_grad()
    def posterior_sample(self, num_draws: int) -> torch.Tensor:
        """The point estimate as one draw, ``(1, K, D)``, whatever ``num_draws``."""
        return self.W2_hat.detach().unsqueeze(0)

    def median(self) -> torch.Tensor:
        """``W2_hat``, ``(K, D)``, as Pyro's AutoGuides' ``median()``."""
        return self.W2_hat

    def regulariser(self, prior: dist.TorchDistribution) -> torch.Tensor:
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
