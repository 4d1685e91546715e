"""Invariant shallow networks (paper eq. (network), §3.1-3.2): features of ``W1 T_i x``.

For images each row of ``W1`` is a ``C x H x W`` weight image; the S transforms warp
the (blurred) weight images, not the inputs, so invariance is "built into the
weights". For 2-D coordinate data the transforms act on the weight vectors through
the homogeneous coordinate (:func:`pyroinv.model.warp.warp_coordinate_weights`).

* ``rff``: random Fourier features (Rahimi & Recht, 2007). ``W1 ~ N(0, sigma^2 I)``
  fixed, ``b ~ U[0, 2 pi]``, ``phi(x) = sqrt(2 / H) cos(W1 x + b)``, so that
  ``phi(x)^T phi(x') ~ exp(-sigma^2 ||x - x'||^2 / 2)``: an RBF kernel with
  lengthscale ``1 / sigma``. The paper's "sigma = 0.3" is read as this frequency
  scale (lengthscale 3.3 in units of pixel intensity in [0, 1]); its toy problem's
  "sigma = 5" is a lengthscale (pass ``rff_lengthscale=5``).
* ``relu``: ``W1`` learned, Xavier-uniform initialised, biases zero, ReLU.

The features are returned as ``(S, B, H + 1)`` with a constant 1 appended, so the
output layer ``W2`` (``K x (H + 1)``) carries its bias as its last column.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from pyro.nn import PyroModule

from ..errors import ConfigError
from .invariance import Invariance
from .warp import gaussian_blur, warp_adjoint, warp_coordinate_weights, warp_weight_bank

NETWORKS = ("relu", "rff")


class _ReluWithOne(torch.autograd.Function):
    """``[relu(z), 1]`` along the last dimension without a separate concatenation."""

    @staticmethod
    def forward(ctx, pre: torch.Tensor) -> torch.Tensor:
        out = pre.new_empty(*pre.shape[:-1], pre.shape[-1] + 1)
        torch.clamp_min(pre, 0, out=out[..., :-1])
        out[..., -1] = 1
        ctx.save_for_backward(out)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (out,) = ctx.saved_tensors
        return torch.ops.aten.threshold_backward(grad[..., :-1], out[..., :-1], 0)


class _CosineWithOne(torch.autograd.Function):
    """``[c cos(z), 1]`` along the last dimension (random Fourier features), in one pass."""

    @staticmethod
    def forward(ctx, pre: torch.Tensor, scale: float) -> torch.Tensor:
        out = pre.new_empty(*pre.shape[:-1], pre.shape[-1] + 1)
        torch.cos(pre, out=out[..., :-1])
        out[..., :-1].mul_(scale)
        out[..., -1] = 1
        ctx.save_for_backward(pre)
        ctx.scale = scale
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (pre,) = ctx.saved_tensors
        return torch.sin(pre).mul_(grad[..., :-1]).mul_(-ctx.scale), None


class InvariantFeatures(PyroModule):
    """``phi(W1 T_i x)`` for every transform ``T_i`` and input ``x``, the transforms applied to the weights.

    Args:
        input_shape: ``(C, H, W)`` for images or ``(2,)`` for coordinates.
        invariance: the :class:`~pyroinv.model.invariance.Invariance` whose transforms are applied.
        hidden: number of hidden units H (paper: 1024).
        network: ``"relu"`` or ``"rff"``.
        blur_sigma: Gaussian blur (pixels) of the weight images before warping (paper: 0.1).
        rff_sigma: RFF frequency scale (paper: 0.3); ignored if ``rff_lengthscale`` is given.
        rff_lengthscale: RFF lengthscale ``1 / sigma``.
        init_scale: factor on the Xavier-uniform initial ``W1`` of the ReLU network (paper: Xavier, i.e. 1).
    """

    #: the transforms warp the weight images (input-space augmentation lives in :mod:`pyroinv.baselines.augerino`)
    warps_weights = True

    def __init__(self, input_shape: tuple[int, ...], invariance: Invariance, hidden: int = 1024,
                 network: str = "relu", blur_sigma: float = 0.1, rff_sigma: float = 0.3,
                 rff_lengthscale: float | None = None, init_scale: float = 1.0) -> None:
        super().__init__()
        if network not in NETWORKS:
            raise ConfigError(f"unknown network {network!r}; choose one of {', '.join(NETWORKS)}")
        self.input_shape = tuple(input_shape)
        self.is_image = len(self.input_shape) == 3
        if not self.is_image and self.input_shape != (2,):
            raise ConfigError(f"inputs of shape {self.input_shape} are neither images (C, H, W) nor 2-D coordinates")
        self.invariance = invariance
        self.hidden = hidden
        self.network = network
        self.blur_sigma = blur_sigma
        D = math.prod(self.input_shape)
        if network == "rff":
            sigma = 1.0 / rff_lengthscale if rff_lengthscale else rff_sigma
            self.register_buffer("W1", torch.randn(hidden, D) * sigma)
            self.register_buffer("b1", torch.rand(hidden) * 2 * math.pi)
        else:
            w = torch.empty(hidden, D)
            nn.init.xavier_uniform_(w)
            w.mul_(init_scale)
            self.W1 = nn.Parameter(w)
            self.b1 = nn.Parameter(torch.zeros(hidden))

    @property
    def num_features(self) -> int:
        """H + 1 (the constant feature that carries the output bias)."""
        return self.hidden + 1

    @property
    def rff_scale(self) -> float:
        """``sqrt(2 / H)``, the factor of the random Fourier features."""
        return math.sqrt(2.0 / self.hidden)

    def weight_bank(self, T: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The S warped copies of ``W1``: ``(S, H, D)`` weights and ``(S, H)`` biases."""
        S = T.shape[0]
        if self.is_image:
            W = self.W1.reshape(self.hidden, *self.input_shape)
            W = gaussian_blur(W, self.blur_sigma)
            bank = warp_weight_bank(W, T).reshape(S, self.hidden, -1)
            return bank, self.b1.expand(S, self.hidden)
        return warp_coordinate_weights(self.W1, self.b1, T)

    def apply_bank(self, x: torch.Tensor, bank: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Features ``(S, B, H + 1)`` of inputs ``x`` under a precomputed weight bank."""
        W, b = bank
        x = x.reshape(x.shape[0], -1)
        if torch.is_grad_enabled():
            return self.activation(torch.matmul(x, W.transpose(1, 2)) + b.unsqueeze(1))
        return self._features_inference(x, W, b)

    def _features_inference(self, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """:meth:`apply_bank` without autograd: each transform's product is written, bias included,
        straight into its slice of the ``(S, B, H + 1)`` output and activated in place there."""
        S, H = W.shape[0], W.shape[1]
        out = x.new_empty(S, x.shape[0], H + 1)
        for s in range(S):
            pre = out[s, :, :H]
            torch.addmm(b[s], x, W[s].T, out=pre)
            if self.network == "rff":
                pre.cos_().mul_(self.rff_scale)
            else:
                pre.clamp_min_(0)
        out[..., H] = 1
        return out

    def activation(self, pre: torch.Tensor) -> torch.Tensor:
        """``phi``, with the constant feature appended: ``(..., H + 1)``, written in one pass."""
        if self.network == "rff":
            return _CosineWithOne.apply(pre, self.rff_scale)
        return _ReluWithOne.apply(pre)

    def forward(self, x: torch.Tensor, T: torch.Tensor, path: str = "auto") -> torch.Tensor:
        """Features ``(S, B, H + 1)`` of ``phi(W1 T_i x)``.

        ``path`` picks how the warp is applied; both give the same numbers (up to float
        rounding) and the same gradients:

        * ``"weights"``: warp the S x H weight images (the paper's description);
        * ``"inputs"``: apply the adjoint warp to the S x B inputs
          (:func:`pyroinv.model.warp.warp_adjoint`), cheaper when the batch is smaller than H;
        * ``"auto"``: the cheaper of the two for image data.
        """
        if path == "auto":
            path = "inputs" if self.is_image and x.shape[0] < self.hidden else "weights"
        if path == "weights" or not self.is_image:
            return self.apply_bank(x, self.weight_bank(T))
        W = gaussian_blur(self.W1.reshape(self.hidden, *self.input_shape), self.blur_sigma).reshape(self.hidden, -1)
        S, B = T.shape[0], x.shape[0]
        xt = warp_adjoint(x, T).reshape(S * B, -1)  # a view: the layout suits the product below
        return self.activation(torch.addmm(self.b1, xt, W.T).view(S, B, self.hidden))
