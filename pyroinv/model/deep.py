"""Deeper invariant networks (beyond the paper's single hidden layer, its named future work).

Both return features ``(S, B, H + 1)`` of the last hidden layer for every transform, a constant 1 appended,
like :class:`~pyroinv.model.networks.InvariantFeatures`: the average over the S transforms is taken before the
Bayesian output layer ``W2`` (:func:`pyroinv.model.bnn.mc_log_predictive`), so the ELBO keeps the paper's form
(``q`` over the last layer, the body's weights fitted jointly with ``eta`` as hyper-parameters) and the Laplace
evidence (:mod:`pyroinv.inference.laplace`) applies to the same network.

* :class:`DeepMLPFeatures` (``--network mlp``): ``depth`` fully connected ReLU layers of ``H`` units,

      phi_i(x) = relu(W_L ... relu(W_2 relu(W_1 T_i x + b_1) + b_2) ... + b_L);

  the transforms act on the first layer's weights (the paper's weight-space trick, exact for any layers
  above it, since ``W_1 T_i x`` is all that sees the transform); with an input-space method (Augerino) on the
  inputs.
* :class:`ConvFeatures` (``--network cnn``): a small CNN, two 5 x 5 convolutions (``channels``) with ReLU (or
  ``tanh``, ``--activation``) and 2 x 2 max-pooling, then a fully connected layer of ``H`` such units. A
  convolution's weights cannot carry a rotation of the whole image, so the transforms act on the inputs (bilinear
  resampling at ``T_i p``, zeros outside): the same function as averaging over augmented copies of the input.

The layers above the first start at Kaiming-uniform (ReLU gain), biases zero, so a unit's scale is kept from
layer to layer; the layer that feeds ``W2`` is multiplied by ``init_scale`` (``Config.w1_init_scale``), as the
shallow network's ``W1`` is, so that ``||phi|| ~ 1`` at the start and q's noise at ``L = I`` is about a nat.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from pyro.nn import PyroModule

from ..errors import ConfigError
from .input_features import transformed_inputs
from .invariance import Invariance
from .networks import InvariantFeatures
from .precision import products_in
from .scope import PyroinvModule, local_params

#: the CNN's two convolutions' channels by default (``--channels``)
CNN_CHANNELS = (16, 32)
#: the CNN's units (``--activation``): ReLU, or tanh as in LILA's LeNet, whose units cannot switch off for good
CNN_ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}


def _relu_layer(n_in: int, n_out: int, scale: float = 1.0) -> nn.Module:
    """A ``Linear`` layer (a ``PyroModule``, so its parameters reach Pyro's store under the global setting) at
    Kaiming-uniform times ``scale``, bias zero."""
    with local_params():
        layer = PyroModule[nn.Linear](n_in, n_out)  # type: ignore[call-arg, arg-type]  # pyro: type[PyroModule]
    nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")
    with torch.no_grad():
        layer.weight.mul_(scale)
        layer.bias.zero_()
    return layer


def with_one(h: torch.Tensor) -> torch.Tensor:
    return torch.cat([h, h.new_ones(*h.shape[:-1], 1)], dim=-1)


class DeepMLPFeatures(PyroinvModule):
    """``depth`` ReLU layers of ``H`` units on top of a first layer that carries the transforms.

    Args:
        first: the first layer, :class:`~pyroinv.model.networks.InvariantFeatures` (transforms on its weights) or
            :class:`~pyroinv.model.input_features.InputAugmentedFeatures` (on the inputs), with ``network="relu"``.
        depth: hidden layers in all, the first included (at least 2; 1 is the paper's network).
        init_scale: factor on the last hidden layer's initial weights.
    """

    #: the dtype of the layers' products above the first (``None``: float32; :mod:`pyroinv.model.precision`)
    product_dtype: torch.dtype | None = None

    def __init__(self, first: InvariantFeatures, depth: int = 3, init_scale: float = 1.0) -> None:
        super().__init__()
        if depth < 2:
            raise ConfigError(
                f"depth={depth}: DeepMLPFeatures has at least 2 hidden layers (InvariantFeatures alone "
                f"is the paper's single one)"
            )
        self.first = first
        H = first.hidden
        self.layers = nn.ModuleList(
            [_relu_layer(H, H, init_scale if i == depth - 2 else 1.0) for i in range(depth - 1)]
        )

    # what the rest of the package reads off a feature map
    invariance = property(lambda self: self.first.invariance)
    input_shape = property(lambda self: self.first.input_shape)
    is_image = property(lambda self: self.first.is_image)
    warps_weights = property(lambda self: self.first.warps_weights)
    hidden = property(lambda self: self.first.hidden)
    W1 = property(lambda self: self.first.W1)

    @property
    def num_features(self) -> int:
        return self.hidden + 1

    def head(self, first_features: torch.Tensor) -> torch.Tensor:
        """The layers above the first, applied to its ``(S, B, H + 1)`` features; ``(S, B, H + 1)``."""
        h = first_features[..., :-1]
        with products_in(self.product_dtype, h.device.type):
            for layer in self.layers:
                h = torch.relu(layer(h))
        return with_one(h.to(first_features.dtype))

    def weight_bank(self, T: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The first layer's bank (its S warped weight copies, or the transforms)."""
        return self.first.weight_bank(T)

    def apply_bank(self, x: torch.Tensor, bank: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return self.head(self.first.apply_bank(x, bank))

    def forward(self, x: torch.Tensor, T: torch.Tensor, path: str = "auto") -> torch.Tensor:
        return self.head(self.first(x, T, path))


class ConvFeatures(PyroinvModule):
    """A small CNN on every transformed input: ``conv5x5(c1)-g-pool2, conv5x5(c2)-g-pool2, fc(H)-g`` with units
    ``g`` = ReLU (default) or tanh.

    Args:
        input_shape: ``(C, H, W)``; images only.
        invariance: the transforms, applied to the inputs.
        hidden: units of the fully connected layer (the features under ``W2``).
        channels: ``(c1, c2)``.
        init_scale: factor on the fully connected layer's initial weights.
        activation: ``"relu"`` or ``"tanh"`` (:data:`CNN_ACTIVATIONS`); the initialisation is the same.
    """

    #: the transforms act on the inputs: there are no warped filters to plot
    warps_weights = False
    is_image = True
    #: the dtype of the convolutions' and the layer's products (``None``: float32; :mod:`pyroinv.model.precision`)
    product_dtype: torch.dtype | None = None

    def __init__(
        self,
        input_shape: tuple[int, ...],
        invariance: Invariance,
        hidden: int = 256,
        channels: tuple[int, int] = CNN_CHANNELS,
        init_scale: float = 1.0,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        if activation not in CNN_ACTIVATIONS:
            raise ConfigError(f"--activation {activation!r} is not one of {', '.join(CNN_ACTIVATIONS)}")
        if len(input_shape) != 3:
            raise ConfigError(
                f"needs images (C, H, W), but the inputs have shape {tuple(input_shape)}; use a fully connected network"
            )
        C, h, w = input_shape
        if h < 4 or w < 4:
            raise ConfigError(f"pools twice and needs images of at least 4 x 4 pixels, got {h} x {w}")
        self.input_shape = tuple(input_shape)
        self.invariance = invariance
        self.hidden = hidden
        self.activation = activation
        c1, c2 = channels
        with local_params():
            # the ignores: pyro types PyroModule[M] as type[PyroModule], not as M's subclass
            self.conv1 = PyroModule[nn.Conv2d](C, c1, 5, padding=2)  # type: ignore[call-arg, arg-type]
            self.conv2 = PyroModule[nn.Conv2d](c1, c2, 5, padding=2)  # type: ignore[call-arg, arg-type]
        for conv in (self.conv1, self.conv2):
            nn.init.kaiming_uniform_(conv.weight, nonlinearity="relu")
            nn.init.zeros_(conv.bias)
            conv.to(memory_format=torch.channels_last)  # see body()
        self.fc = _relu_layer(c2 * (h // 4) * (w // 4), hidden, init_scale)

    @property
    def num_features(self) -> int:
        return self.hidden + 1

    def body(self, images: torch.Tensor) -> torch.Tensor:
        """``(N, C, H, W)`` images to ``(N, H_fc)`` features.

        The convolutions run in the channels-last memory layout (their weights are stored so): the same numbers, and
        on the CPU a whole training step at S = 31 1.4-1.6x faster than in the default layout (oneDNN's convolutions and
        max-pooling are vectorised over channels). ``flatten`` reads the result in (C, H, W) order either way. The
        unit comes after the pooling (``g(pool(h)) = pool(g(h))``: ReLU and tanh are monotone), on a quarter of the
        numbers."""
        g = CNN_ACTIVATIONS[self.activation]
        h = g(F.max_pool2d(self.conv1(images.contiguous(memory_format=torch.channels_last)), 2))
        h = g(F.max_pool2d(self.conv2(h), 2))
        return g(self.fc(h.flatten(1)))

    def weight_bank(self, T: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Nothing to precompute on the weights: the transforms themselves, for :meth:`apply_bank`."""
        return (T,)

    def apply_bank(self, x: torch.Tensor, bank: tuple[torch.Tensor, ...]) -> torch.Tensor:
        (T,) = bank
        images = transformed_inputs(x, T, self.input_shape)
        with products_in(self.product_dtype, images.device.type):
            h = self.body(images)
        return with_one(h.to(images.dtype).view(T.shape[0], x.shape[0], self.hidden))

    def forward(self, x: torch.Tensor, T: torch.Tensor, path: str = "auto") -> torch.Tensor:
        """Features ``(S, B, H + 1)``; ``path`` (how a weight warp is applied) does not apply here."""
        return self.apply_bank(x, (T,))


def conv_activations(input_shape: tuple[int, ...], hidden: int, channels: tuple[int, int] = CNN_CHANNELS) -> int:
    """Numbers a :class:`ConvFeatures` pass keeps per transformed image (for the memory estimate)."""
    C, h, w = input_shape
    c1, c2 = channels
    return (
        C * h * w
        + c1 * h * w * 2
        + c1 * (h // 2) * (w // 2)
        + c2 * (h // 2) * (w // 2) * 2
        + c2 * (h // 4) * (w // 4)
        + hidden
    )


__all__ = ["CNN_ACTIVATIONS", "CNN_CHANNELS", "ConvFeatures", "DeepMLPFeatures", "conv_activations", "with_one"]
