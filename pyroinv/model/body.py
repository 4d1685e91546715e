"""A user's own network as the body of the invariant model: any ``nn.Module`` from inputs to features.

The invariant features of a body ``g`` (inputs ``(B, C, H, W)``, or ``(B, 2)`` for 2-D data, to ``(B, F)``) are its
features under each of the S transforms, a constant 1 appended for the output bias::

    phi_i(x) = [g(T_i x), 1],   i = 1..S,   shape (S, B, F + 1),

averaged over the transforms under the Bayesian output layer ``W2`` like the package's own networks
(:class:`~pyroinv.model.bnn.InvariantBNN`). Two ways of computing them give the same function:

* ``"inputs"``: every input resampled at ``T_i p`` (bilinear, zeros outside), then the whole body;
* ``"weights"``: where the body starts with a fully connected layer on the flattened input (``nn.Flatten`` then
  ``nn.Linear``, as the paper's network and the MLP; or ``nn.Linear`` on 2-D points), the transforms act on that
  layer's weights, ``(W1 o T_i) x`` (the paper's §3.2, at the cost of the inputs: the adjoint warp), and the rest of
  the body runs on its S pre-activations. The weight images are blurred by ``blur_sigma`` as the paper does.

``"auto"`` takes ``"weights"`` where the body allows it. The body's parameters are trained as they are (the user's
initialisation is kept); it is converted in place to a ``PyroModule`` (:func:`pyro.nn.module.to_pyro_module_`) so
that, called from a user's own ``SVI`` under Pyro's global parameter store, its parameters are Pyro parameters too.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn as nn
from pyro.nn import PyroModule
from pyro.nn.module import _Context, to_pyro_module_

from ..errors import ConfigError
from .deep import with_one
from .input_features import transformed_inputs
from .invariance import Invariance
from .networks import InvariantFeatures
from .precision import products_in
from .scope import PyroinvModule, local_params

#: where the transforms act on a user's body (``InvariantClassifier(transforms_on=...)``)
BODY_PATHS = ("auto", "weights", "inputs")


def leading_linear(body: nn.Module, input_shape: tuple[int, ...]) -> int | None:
    """How many of ``body``'s first modules make its leading fully connected layer on the flattened input (2:
    ``Flatten, Linear`` on images; 1: ``Linear`` on 2-D points), or ``None`` where it has none."""
    if not isinstance(body, nn.Sequential) or len(body) == 0:
        return None
    D = math.prod(input_shape)
    if len(input_shape) == 3 and len(body) >= 2 and isinstance(body[0], nn.Flatten) and body[0].start_dim == 1:
        first, k = body[1], 2
    elif len(input_shape) == 1:
        first, k = body[0], 1
    else:
        return None
    return k if isinstance(first, nn.Linear) and first.in_features == D else None


def probe_features(body: nn.Module, input_shape: tuple[int, ...]) -> int:
    """``F``, from one forward pass of ``body`` on two zero inputs; a one-line error if it is not ``(B, F)``."""
    param = next(body.parameters(), None)
    x = torch.zeros(2, *input_shape, device=param.device if param is not None else None)
    try:
        with torch.no_grad():
            out = body(x)
    except Exception as err:  # noqa: BLE001 (the user's module: any error means the shapes do not fit)
        raise ConfigError(
            f"the body cannot take inputs of shape (B, {', '.join(map(str, input_shape))}): "
            f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
        ) from None
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != 2:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ConfigError(
            f"the body must return features (B, F), got {shape} for a batch of 2; end it with "
            f"nn.Flatten() or a nn.Linear"
        )
    return int(out.shape[1])


class _WarpedLinear(InvariantFeatures):
    """The body's leading ``nn.Linear`` as the paper's first layer: its own weight and bias are ``W1`` and ``b1``
    (shared, not copied), so :class:`InvariantFeatures`'s warps and pre-activations apply to it."""

    def __init__(
        self, linear: nn.Linear, input_shape: tuple[int, ...], invariance: Invariance, blur_sigma: float
    ) -> None:
        PyroinvModule.__init__(self)
        self.linear = linear
        self.jacobian = False
        self.input_shape = tuple(input_shape)
        self.is_image = len(self.input_shape) == 3
        self.invariance = invariance
        self.hidden = linear.out_features
        self.network = "relu"
        self.blur_sigma = blur_sigma
        if linear.bias is None:
            self.register_buffer("zero_bias", torch.zeros(linear.out_features), persistent=False)

    W1 = property(lambda self: self.linear.weight)
    b1 = property(lambda self: self.linear.bias if self.linear.bias is not None else self.zero_bias)


class BodyFeatures(PyroinvModule):
    """``[g(T_i x), 1]`` for a user's body ``g`` (see the module docstring).

    Args:
        body: any ``nn.Module`` from ``(B, *input_shape)`` to ``(B, F)``.
        input_shape: ``(C, H, W)`` images or ``(2,)`` points.
        invariance: ``p_eta(T)``.
        path: ``"auto"``, ``"weights"`` (needs a leading fully connected layer) or ``"inputs"``.
        blur_sigma: blur of the weight images on the ``"weights"`` path (pixels).
    """

    def __init__(
        self,
        body: nn.Module,
        input_shape: tuple[int, ...],
        invariance: Invariance,
        path: str = "auto",
        blur_sigma: float = 0.1,
    ) -> None:
        super().__init__()
        if not isinstance(body, nn.Module):
            raise ConfigError(f"body must be a torch.nn.Module from inputs to features, got {type(body).__name__}")
        if path not in BODY_PATHS:
            raise ConfigError(f"transforms_on={path!r} is not one of {', '.join(BODY_PATHS)}")
        self.input_shape = tuple(input_shape)
        self.is_image = len(self.input_shape) == 3
        self.invariance = invariance
        k = leading_linear(body, self.input_shape)
        if path == "weights" and k is None:
            raise ConfigError(
                "transforms_on='weights' needs a body that starts with nn.Flatten() then nn.Linear on the "
                "flattened input (nn.Linear on 2-D points); use transforms_on='inputs' or 'auto'"
            )
        self.path = "weights" if path != "inputs" and k is not None else "inputs"
        self.num_features = probe_features(body, self.input_shape) + 1  # before it is a PyroModule of this one
        with local_params():
            to_pyro_module_(body)
            for m in body.modules():  # a body that ran before (an earlier fit) joins this module afresh
                if isinstance(m, PyroModule):
                    m._pyro_context = _Context()
            self.body = body
            if self.path == "weights":
                assert k is not None and isinstance(body, nn.Sequential)  # what leading_linear found
                first = cast(nn.Linear, body[k - 1])  # leading_linear's layer
                self.first = _WarpedLinear(first, self.input_shape, invariance, blur_sigma)
                self.rest = body[k:]

    #: the transforms warp the first layer's weights (``"weights"``) or the inputs
    warps_weights = property(lambda self: self.path == "weights")
    #: the dtype of the body's products (``None``: float32; :mod:`pyroinv.model.precision`)
    product_dtype: torch.dtype | None = None

    def weight_bank(self, T: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The first layer's S warped weights (``"weights"``), or the transforms themselves (``"inputs"``)."""
        return self.first.weight_bank(T) if self.path == "weights" else (T,)

    def _head(self, pre: torch.Tensor) -> torch.Tensor:
        """The rest of the body on the first layer's ``(S, B, H)`` pre-activations; ``(S, B, F + 1)``."""
        S, B, H = pre.shape
        with products_in(self.product_dtype, pre.device.type):
            h = self.rest(pre.reshape(S * B, H))
        return with_one(h.to(pre.dtype).view(S, B, -1))

    def apply_bank(self, x: torch.Tensor, bank: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if self.path == "weights":
            return self._head(self.first.bank_pre_activations(x, bank))
        (T,) = bank
        images = transformed_inputs(x, T, self.input_shape)
        with products_in(self.product_dtype, images.device.type):
            h = self.body(images)
        return with_one(h.to(images.dtype).view(T.shape[0], x.shape[0], -1))

    def forward(self, x: torch.Tensor, T: torch.Tensor, path: str = "auto") -> torch.Tensor:
        """Features ``(S, B, F + 1)``; ``path`` is how the first layer's warp is applied (its weights or the adjoint
        on the inputs, :meth:`InvariantFeatures.forward`), on the ``"weights"`` path only."""
        if self.path == "weights":
            return self._head(self.first.pre_activations(x, T, path))
        return self.apply_bank(x, (T,))


__all__ = ["BODY_PATHS", "BodyFeatures", "leading_linear", "probe_features"]
