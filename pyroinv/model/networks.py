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
* ``relu``: ``W1`` learned, Xavier-uniform initialised, biases zero, ReLU. With ``standardize`` (beyond the
  paper; weight standardisation, Qiao et al., 2019) each unit's weights are ``W1_h = g_h (V_h - mean V_h) /
  rms(V_h - mean V_h)``: ``V`` is the learned parameter and ``g`` a learned gain per unit, started at the start's
  per-weight standard deviation, so the first ``W1`` is the unstandardised one, centred and rescaled to that rms.

The features are returned as ``(S, B, H + 1)`` with a constant 1 appended, so the
output layer ``W2`` (``K x (H + 1)``) carries its bias as its last column.

The code below is the formula; the fused activations, the in-place evaluation and the adjoint warp that
compute the same numbers faster are in :mod:`pyroinv.model.kernels`, behind its switch.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ..errors import ConfigError
from . import kernels
from .invariance import Invariance
from .precision import mm
from .scope import PyroinvModule
from .warp import gaussian_blur, jacobian, warp_coordinate_weights, warp_weight_bank

#: the activations of the shallow network (the networks themselves are :data:`pyroinv.model.registry.NETWORKS`)
ACTIVATIONS = ("relu", "rff")


class InvariantFeatures(PyroinvModule):
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
        standardize: learn ``W1`` as a standardised ``V`` times a gain per unit (module docstring; ReLU only).
        jacobian: multiply each warped weight image by ``|det A|`` of its transform
            (:func:`pyroinv.model.warp.jacobian`), so that ``<|det A| w o T, x> = <w, x o T^{-1}>`` and the
            averaged features are invariant to input scaling too; the paper does not (off by default). It
            changes nothing for translation, rotation and shear (determinant 1).
    """

    #: the transforms warp the weight images (input-space augmentation lives in :mod:`pyroinv.model.input_features`)
    warps_weights = True
    #: the dtype of the first layer's product (``None``: float32; :mod:`pyroinv.model.precision`)
    product_dtype: torch.dtype | None = None
    #: ``W1`` learned standardised per unit, times a gain (``__init__``'s ``standardize``)
    standardize: bool = False

    def __init__(
        self,
        input_shape: tuple[int, ...],
        invariance: Invariance,
        hidden: int = 1024,
        network: str = "relu",
        blur_sigma: float = 0.1,
        rff_sigma: float = 0.3,
        rff_lengthscale: float | None = None,
        init_scale: float = 1.0,
        jacobian: bool = False,
        standardize: bool = False,
    ) -> None:
        super().__init__()
        self.jacobian = jacobian
        self.standardize = standardize
        if network not in ACTIVATIONS:
            raise ConfigError(f"unknown network {network!r}; choose one of {', '.join(ACTIVATIONS)}")
        self.input_shape = tuple(input_shape)
        self.is_image = len(self.input_shape) == 3
        if not self.is_image and self.input_shape != (2,):
            raise ConfigError(f"inputs of shape {self.input_shape} are neither images (C, H, W) nor 2-D coordinates")
        self.invariance = invariance
        self.hidden = hidden
        self.network = network
        self.blur_sigma = blur_sigma
        D = math.prod(self.input_shape)
        if standardize and (network != "relu" or not self.is_image):
            raise ConfigError(
                f"weight standardisation needs a learned W1 over image pixels (network relu on images), not "
                f"{network} on inputs of shape {self.input_shape}"
            )
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
            if standardize:  # Xavier-uniform's standard deviation sqrt(2 / (D + H)), times the start's factor
                self.g1 = nn.Parameter(torch.full((hidden,), init_scale * math.sqrt(2.0 / (D + hidden))))

    def first_weights(self) -> torch.Tensor:
        """The ``(H, D)`` weights the first layer applies: ``W1``, or with ``standardize``
        ``g (W1 - mean) / rms`` row by row."""
        if not self.standardize:
            return self.W1
        centred = self.W1 - self.W1.mean(1, keepdim=True)
        return self.g1.unsqueeze(1) * centred * torch.rsqrt(centred.pow(2).mean(1, keepdim=True) + 1e-16)

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
            W = self.first_weights().reshape(self.hidden, *self.input_shape)
            W = gaussian_blur(W, self.blur_sigma)
            bank = warp_weight_bank(W, T).reshape(S, self.hidden, -1)
            if self.jacobian:
                bank = bank * jacobian(T).view(S, 1, 1)
            return bank, self.b1.expand(S, self.hidden)
        return warp_coordinate_weights(self.first_weights(), self.b1, T)

    def bank_pre_activations(self, x: torch.Tensor, bank: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Pre-activations ``(S, B, H)``, ``(W1 o T_i) x + b1``, of inputs ``x`` under a precomputed weight bank."""
        W, b = bank
        return mm(x.reshape(x.shape[0], -1), W.transpose(1, 2), self.product_dtype) + b.unsqueeze(1)

    def apply_bank(self, x: torch.Tensor, bank: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Features ``(S, B, H + 1)`` of inputs ``x`` under a precomputed weight bank."""
        if kernels.enabled() and not torch.is_grad_enabled() and self.product_dtype is None:
            W, b = bank
            return kernels.features_no_grad(x.reshape(x.shape[0], -1), W, b, self.network, self.rff_scale)
        return self.activation(self.bank_pre_activations(x, bank))

    def activation(self, pre: torch.Tensor) -> torch.Tensor:
        """``[phi(pre), 1]``, ``(..., H + 1)``: ``relu``, or ``sqrt(2 / H) cos`` for random Fourier features."""
        if kernels.enabled():
            if self.network == "rff":
                return kernels.cosine_with_one(pre, self.rff_scale)
            return kernels.relu_with_one(pre)
        phi = self.rff_scale * torch.cos(pre) if self.network == "rff" else torch.relu(pre)
        return torch.cat([phi, pre.new_ones(*pre.shape[:-1], 1)], dim=-1)

    def _path(self, x: torch.Tensor, path: str) -> str:
        """``"weights"`` or ``"inputs"``: how :meth:`forward` applies the warp (see there)."""
        if path == "auto":
            path = "inputs" if kernels.enabled() and self.is_image and x.shape[0] < self.hidden else "weights"
        return "weights" if path == "weights" or not self.is_image else "inputs"

    def pre_activations(self, x: torch.Tensor, T: torch.Tensor, path: str = "auto") -> torch.Tensor:
        """Pre-activations ``(S, B, H)`` of ``W1 T_i x + b1`` (times ``|det A_i|`` with ``jacobian``); ``path`` as in
        :meth:`forward`."""
        if self._path(x, path) == "weights":
            return self.bank_pre_activations(x, self.weight_bank(T))
        W = gaussian_blur(self.first_weights().reshape(self.hidden, *self.input_shape), self.blur_sigma)
        W = W.reshape(self.hidden, -1)
        S, B = T.shape[0], x.shape[0]
        xt = kernels.warp_adjoint(x, T).reshape(S * B, -1)  # a view: the layout suits the product below
        if self.jacobian:
            return mm(xt, W.T, self.product_dtype).view(S, B, self.hidden) * jacobian(T).view(S, 1, 1) + self.b1
        if self.product_dtype is not None:
            return (mm(xt, W.T, self.product_dtype) + self.b1).view(S, B, self.hidden)
        return torch.addmm(self.b1, xt, W.T).view(S, B, self.hidden)

    def forward(self, x: torch.Tensor, T: torch.Tensor, path: str = "auto") -> torch.Tensor:
        """Features ``(S, B, H + 1)`` of ``phi(W1 T_i x)``.

        ``path`` picks how the warp is applied; both give the same numbers (up to float
        rounding) and the same gradients:

        * ``"weights"``: warp the S x H weight images (the paper's description);
        * ``"inputs"``: apply the adjoint warp to the S x B inputs
          (:func:`pyroinv.model.kernels.warp_adjoint`), cheaper when the batch is smaller than H;
        * ``"auto"``: with :mod:`~pyroinv.model.kernels` enabled, the cheaper of the two for image data;
          otherwise the weights.
        """
        if self._path(x, path) == "weights":
            return self.apply_bank(x, self.weight_bank(T))
        return self.activation(self.pre_activations(x, T, "inputs"))
