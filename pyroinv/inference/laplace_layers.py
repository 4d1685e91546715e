"""The Laplace evidence over every fully connected layer, LILA's scope (``--laplace-layers all``).

:mod:`pyroinv.inference.laplace` covers the output layer ``W2`` alone, so a body that fits the training set without
the invariance pays nothing for its fit (docs/results/beyond.md: the 3-layer MLP learns none at 312 images). Here
each fully connected ReLU layer ``theta_l = [W_l, b_l]`` of the body also gets a Gaussian prior
``N(0, I / delta_l)`` and enters the Laplace approximation (block-diagonal across layers, Kronecker-factored within
one), as in LILA (Immer et al., 2022):

    log p(D | eta) ~ log p(D | theta_hat) - ||W2||^2 / (2 alpha) - 1/2 log det(alpha P_W2)
                     - sum_l [ delta_l ||theta_l||^2 / 2 + 1/2 sum_ij log(1 + a_li g_lj / (N delta_l)) ].

With the logits averaged over the S transforms, ``f(x) = W2 (1/S) sum_s phi_s(x)``, the Jacobian of ``f`` in
``W_l`` is ``sum_s g_s a_s^T`` (``a_s``: the layer's input under transform ``s``, ``g_s``: the output Jacobian
back-propagated to its pre-activation). As in LILA's code (its ASDL fork), the sum of products is replaced by a
product of sums, ``(sum_s g_s)(mean_s a_s)^T``, which gives the Kronecker factors

    A_l = sum_n a_bar_n a_bar_n^T,   G_l = sum_n sum_k g_nk g_nk^T,   g_nk = sum_s J_ns^T L_n e_k,

with ``Lambda_n = diag(p_n) - p_n p_n^T = L_n L_n^T``, ``L_n = diag(sqrt p_n) - p_n sqrt(p_n)^T``, and
``H_l ~ A_l (x) G_l / N`` (eigenvalues ``a_li g_lj / N``).

* The first layer's input under transform ``s`` is the adjoint warp of the image, ``blur(M_s^T x)``: the transforms
  act on ``W1``'s weight images, and ``<M_s blur(w), x> = <w, blur(M_s^T x)>``. This is where ``eta`` enters the
  curvature: averaging over more transforms shrinks ``A_1``, the Occam factor LILA's method rewards.
* The prior precisions ``delta_l`` are learned (LILA learns one, by gradient steps), by MacKay's fixed point of the
  evidence at every refresh, ``delta_l = gamma_l / ||theta_l||^2`` with ``gamma_l = sum_ij lambda_ij / (lambda_ij +
  delta_l)`` the layer's effective number of parameters; the weights are MAP under them (a weight decay of
  ``delta_l / 2 ||theta_l||^2`` in the training loss). ``W2`` keeps the paper's prior ``N(0, alpha I)``.
* ``eta``'s gradient between refreshes: the curvature is refreshed every :data:`REFRESH_STEPS` steps (at least an
  epoch) on :data:`REFRESH_SIZE` training images, and ``d log det P_l = tr(M_A^l dA_l)`` is taken through the A
  factors of a fresh pass over the training batch, and ``tr(M_G^l dG_l)`` through the probabilities in ``Lambda_n``
  (the back-propagated Jacobians held fixed: for ReLU layers they depend on ``eta`` only through the ReLU masks,
  piecewise constant). Without the second term the Occam factor alone would reward destroying the inputs (an
  averaged input near zero shrinks ``A_1``), since the flatter probabilities that this causes raise ``G_l``. LILA
  differentiates the whole evidence, both factors of every layer, once an epoch after 10 burn-in epochs, with one
  scalar prior precision stepped by Adam from 1 (and the network with
  the best evidence kept), where this module steps ``eta`` every step and sets each layer's precision to its
  fixed point at every refresh.

Only image data and the fully connected networks (``relu``, ``mlp``) are covered: a convolution's Kronecker factors
and 2-D coordinate data's homogeneous first layer are not implemented (a one-line error says so).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch

from ..errors import ConfigError
from ..model.bnn import InvariantBNN
from ..model.deep import DeepMLPFeatures
from ..model.kernels import warp_adjoint
from ..model.networks import InvariantFeatures
from ..model.registry import network
from ..model.scope import local_params
from ..model.warp import gaussian_blur, jacobian

if TYPE_CHECKING:
    from ..config import Config
from .laplace import (
    FULL_MAX,
    LaplaceEtaGradient,
    evidence_at_mode,
    importance_log_evidence,
    kron_occam_factors,
    w2_at_mode,
)

#: training images on which the curvature of every layer is refreshed (all of them when the set is smaller)
REFRESH_SIZE = 1000
#: the curvature is refreshed every this many steps, or every epoch when an epoch is longer
REFRESH_STEPS = 50


def covered_layers(features: torch.nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(W_l, b_l)`` of every fully connected layer below ``W2``, bottom up; a one-line :class:`ConfigError` for a
    network the all-layer Laplace does not cover."""
    first = features.first if isinstance(features, DeepMLPFeatures) else features
    if not isinstance(first, InvariantFeatures) or not isinstance(first.W1, torch.nn.Parameter):
        raise ConfigError(
            "--laplace-layers all covers fully connected ReLU layers with a learned W1 and the "
            "transforms on its weights (--network relu or mlp); use --laplace-layers last"
        )
    if not first.is_image:
        raise ConfigError(
            "--laplace-layers all needs image inputs (the first layer's input is the adjoint-warped "
            "image); for 2-D coordinates use --laplace-layers last"
        )
    rest = cast(  # nn.Linear's parameters
        "list[tuple[torch.Tensor, torch.Tensor]]",
        [(layer.weight, layer.bias) for layer in features.layers] if isinstance(features, DeepMLPFeatures) else [],
    )
    return [(first.W1, first.b1)] + rest


def first_layer_inputs(first: InvariantFeatures, x: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """``blur(M_s^T x)`` (times ``|det A_s|`` with ``jacobian``), ``(S, B, D)``: the input that ``W1`` sees under
    transform ``s``, so that the first layer's pre-activation is ``W1 a_s + b1`` (differentiable in ``T``)."""
    S, B = T.shape[0], x.shape[0]
    a = warp_adjoint(x.reshape(B, *first.input_shape), T).reshape(S * B, *first.input_shape)
    a = gaussian_blur(a, first.blur_sigma).reshape(S, B, -1)
    return a * jacobian(T).view(S, 1, 1) if first.jacobian else a


def layer_pass(
    features: torch.nn.Module, x: torch.Tensor, T: torch.Tensor
) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """The network's pass layer by layer: each covered layer's inputs ``(S, B, in)`` and pre-activations
    ``(S, B, out)``, and the features ``phi_bar`` ``(B, H + 1)`` averaged over the transforms."""
    first = cast(InvariantFeatures, features.first if isinstance(features, DeepMLPFeatures) else features)
    a = first_layer_inputs(first, x, T)
    inputs, pres = [], []
    for W, b in covered_layers(features):
        z = torch.matmul(a, W.T) + b
        inputs.append(a)
        pres.append(z)
        a = torch.relu(z)
    return inputs, pres, mean_with_one(a)


def kron_layer_factors(
    features: torch.nn.Module, x: torch.Tensor, T: torch.Tensor, W2: torch.Tensor, differentiable: bool = False
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    """Every covered layer's Kronecker factors ``(A_l, G_l)`` on the examples ``x`` (sums, not scaled), and the
    averaged features ``phi_bar`` ``(n, H + 1)``. ``G_l`` takes one backward pass per class (the columns of
    :func:`ggn_factor_root`). ``differentiable``: the factors keep their graph (to ``eta`` through the inputs and
    the probabilities), for a reference gradient; otherwise no gradient leaves it."""
    with torch.enable_grad():
        inputs, pres, phi = layer_pass(features, x, T)
        logits = phi @ W2.T
        roots = ggn_factor_root(torch.softmax(logits if differentiable else logits.detach(), -1))
        Gs = [z.new_zeros(z.shape[-1], z.shape[-1]) for z in pres]
        for k in range(roots.shape[-1]):
            grads = torch.autograd.grad(
                logits, pres, grad_outputs=roots[:, :, k], retain_graph=True, create_graph=differentiable
            )
            Gs = [G + g.sum(0).T @ g.sum(0) for G, g in zip(Gs, grads)]
    if differentiable:
        return [(mean_with_one(a).T @ mean_with_one(a), G) for a, G in zip(inputs, Gs)], phi
    abars = [mean_with_one(a.detach()) for a in inputs]
    return [(abar.T @ abar, G.detach()) for abar, G in zip(abars, Gs)], phi.detach()


def logit_jacobians(logits: torch.Tensor, pres: list[torch.Tensor]) -> list[torch.Tensor]:
    """``J_l[k, b] = sum_s d logit_bk / d z_l,sb``, ``(K, B, out)`` per layer, detached: all K classes in one
    batched backward pass."""
    K, B = logits.shape[1], logits.shape[0]
    basis = torch.eye(K, dtype=logits.dtype, device=logits.device).unsqueeze(1).expand(K, B, K)
    grads = torch.autograd.grad(logits, pres, grad_outputs=basis, retain_graph=True, is_grads_batched=True)
    return [g.sum(1).detach() for g in grads]


def mean_with_one(a: torch.Tensor) -> torch.Tensor:
    """``[mean_s a_s, 1]``, ``(B, in + 1)``: a layer's input averaged over the transforms, with the bias input."""
    m = a.mean(0)
    return torch.cat([m, m.new_ones(m.shape[0], 1)], -1)


def ggn_factor_root(probs: torch.Tensor) -> torch.Tensor:
    """``L_n = diag(sqrt p_n) - p_n sqrt(p_n)^T``, ``(N, K, K)``, with ``L_n L_n^T = diag(p_n) - p_n p_n^T``."""
    root = probs.sqrt()
    return torch.diag_embed(root) - probs.unsqueeze(2) * root.unsqueeze(1)


class LayersLaplace(LaplaceEtaGradient):
    """``eta``'s gradient of the Laplace evidence of every fully connected layer and ``W2`` (module docstring).

    Args: as :class:`~pyroinv.inference.laplace.LaplaceEtaGradient` (``alpha``: ``W2``'s prior variance).
    """

    refresh_size = REFRESH_SIZE
    refresh_steps = REFRESH_STEPS
    metric = "laplace_layers_per_datapoint"

    def __init__(self, model: InvariantBNN, x: torch.Tensor, y: torch.Tensor, alpha: float, seed: int = 0) -> None:
        super().__init__(model, x, y, alpha, seed)
        self.layers = covered_layers(model.features)
        self.precisions = [1.0] * len(self.layers)
        self.M_A_layers: list[torch.Tensor] | None = None
        self.M_G_layers: list[torch.Tensor] | None = None

    def state_dict(self) -> dict:
        return {
            **super().state_dict(),
            "M_A_layers": self.M_A_layers,
            "M_G_layers": self.M_G_layers,
            "precisions": list(self.precisions),
        }

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.M_A_layers, self.M_G_layers = state["M_A_layers"], state["M_G_layers"]
        self.precisions = [float(d) for d in state["precisions"]]

    def weight_penalty(self) -> torch.Tensor:
        """``sum_l delta_l ||theta_l||^2 / 2``: the body's negative log prior (up to a constant), for the loss."""
        return cast(
            torch.Tensor,
            sum(0.5 * d * (W.pow(2).sum() + b.pow(2).sum()) for d, (W, b) in zip(self.precisions, self.layers)),
        )

    def refresh(self, W2: torch.Tensor) -> float:
        """Recompute every layer's curvature and prior precision at the current weights; returns (and keeps) the
        Laplace estimate of ``log p(D | eta) / N`` over all layers there."""
        N = self.num_data
        idx = torch.randperm(N, generator=self.generator)[: self.refresh_size].to(self.x.device)
        factors, phi = kron_layer_factors(self.model.features, self.x[idx], self.model.sample_transforms().detach(), W2)
        scale = N / phi.shape[0]
        value = self._refresh_output(phi, self.y[idx], W2, scale)
        self.M_A_layers, self.M_G_layers = [], []
        for l, ((W, b), (A, G)) in enumerate(zip(self.layers, factors)):
            occam = kron_occam_factors(
                A * scale,
                G * scale,
                N,
                None,
                precision=self.precisions[l],
                sq_norm=float(W.detach().pow(2).sum() + b.detach().pow(2).sum()),
            )
            assert occam.sq_norm is not None  # given above
            self.precisions[l] = occam.precision
            self.M_A_layers.append(occam.M_A.to(phi.dtype))
            self.M_G_layers.append(occam.M_G.to(phi.dtype))
            value -= 0.5 * occam.precision * occam.sq_norm + 0.5 * float(occam.logdet)
        self.log_evidence = value / N
        return self.log_evidence

    def half_logdet_surrogate(self, x: torch.Tensor, phi: torch.Tensor | None, W2: torch.Tensor) -> torch.Tensor:
        """A scalar whose gradient in ``eta`` is that of ``1/2 sum_l log det(P_l / delta_l)`` (and ``W2``'s term) at
        the refresh, from a fresh pass over the batch ``x``:

            (N / 2B) sum_b sum_l [a_bar_lb^T M_A^l a_bar_lb + tr(C_lb Lambda_b)],   C_lb = J_lb^T M_G^l J_lb,

        plus ``W2``'s surrogate; ``J_lb`` (:func:`logit_jacobians`) is held fixed, so ``G_l`` moves with ``eta``
        through the probabilities in ``Lambda_b`` (the ReLU masks give no pathwise gradient). ``phi`` (the
        training pass's features) is not used: the pass here keeps every layer's."""
        assert self.M_A_layers is not None and self.M_G_layers is not None, "refresh before the surrogate"
        inputs, pres, phi_bar = layer_pass(self.model.features, x, self.model.sample_transforms())
        logits = phi_bar @ W2.detach().T
        p = torch.softmax(logits, -1)
        total = logits.new_zeros(())
        for a, J, M_A, M_G in zip(inputs, logit_jacobians(logits, pres), self.M_A_layers, self.M_G_layers):
            abar = mean_with_one(a)
            C = torch.einsum("kbo,op,jbp->bkj", J, M_G, J)  # (B, K, K)
            total = (
                total
                + ((abar @ M_A) * abar).sum()
                + (p * C.diagonal(dim1=1, dim2=2)).sum()
                - torch.einsum("bk,bkj,bj->", p, C, p)
            )
        return 0.5 * (self.num_data / x.shape[0]) * total + super().half_logdet_surrogate(x, phi_bar, W2)

    def diagnostics(self) -> dict[str, float]:
        out = super().diagnostics()
        out.update({f"prior_precision_{l + 1}": d for l, d in enumerate(self.precisions)})
        return out


def layers_evidence(
    model: InvariantBNN, x: torch.Tensor, y: torch.Tensor, alpha: float, W2: torch.Tensor, seed: int = 0
) -> dict[str, float | list[float]]:
    """The Laplace estimate of ``log p(D | eta) / N`` over every fully connected layer of a trained network
    (``laplace_layers_per_datapoint``), at its body and ``eta`` as they are and ``W2`` (its mode, for the estimate
    to mean what it says), on :data:`REFRESH_SIZE` training images, with each layer's prior precision at the
    evidence's fixed point (``prior_precisions``). A body trained without its prior (any run but
    ``--laplace-layers all``) is not at the mode this approximation assumes: the value then compares networks
    approximately."""
    occam = LayersLaplace(model, x, y, alpha, seed=seed)
    value = occam.refresh(W2)
    return {"laplace_layers_per_datapoint": value, "prior_precisions": list(occam.precisions)}


def laplace_evidences(
    cfg: Config,
    model: InvariantBNN,
    x: torch.Tensor,
    y: torch.Tensor,
    seed: int = 0,
    init: torch.Tensor | None = None,
    importance_draws: int = 0,
) -> dict[str, Any]:
    """The Laplace estimates of ``log p(D | eta) / N`` of a network as it is, ``W2`` at its mode (L-BFGS from
    ``init``): of ``W2`` (:func:`~pyroinv.inference.laplace.evidence_at_mode`) and, for the fully connected networks
    on images, of every layer (:func:`layers_evidence`). ``importance_draws > 0``: also the importance-sampling
    check of ``W2``'s evidence (:func:`~pyroinv.inference.laplace.importance_log_evidence`, up to
    :data:`~pyroinv.inference.laplace.FULL_MAX` output weights)."""
    mode = w2_at_mode(model, x, y, cfg.alpha, init=init)
    out: dict[str, Any] = evidence_at_mode(model, x, y, cfg.alpha, mode=mode)
    if importance_draws and mode[1].numel() <= FULL_MAX:
        out.update(importance_log_evidence(mode[0], y, mode[1], cfg.alpha, importance_draws, seed))
    if network(cfg.network).layer_laplace and model.features.is_image:
        with local_params():
            out.update(layers_evidence(model, x, y, cfg.alpha, mode[1].to(x.dtype), seed=seed))
    return out


__all__ = [
    "LayersLaplace",
    "REFRESH_SIZE",
    "REFRESH_STEPS",
    "covered_layers",
    "first_layer_inputs",
    "ggn_factor_root",
    "kron_layer_factors",
    "laplace_evidences",
    "layer_pass",
    "layers_evidence",
    "logit_jacobians",
    "mean_with_one",
]
