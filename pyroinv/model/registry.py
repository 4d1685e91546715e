"""The networks, by their ``--network`` name: one :class:`Network` entry each, the only place a name is read.

A network is a feature map ``x, T -> (S, B, H + 1)`` under the Bayesian output layer
(:class:`~pyroinv.model.bnn.InvariantBNN`). The method (:mod:`pyroinv.model.methods`) says whether it wants
the transforms on the weights (the paper) or on the inputs (Augerino); :func:`build_features` gives it the
network's way of doing that, and a network whose first layer cannot carry a transform on its weights (a
convolution cannot carry a rotation of the whole image) applies it to the inputs, the same function.

=========  ===================================================================  ===========================
name       feature map                                                          transforms on the weights
=========  ===================================================================  ===========================
``relu``   the paper's: ``relu(W1 T x + b1)``, H units, ``W1`` learned           yes (exact)
``rff``    the paper's random Fourier features, ``W1`` fixed                     yes (exact)
``mlp``    ``--depth`` ReLU layers of H units (:class:`~.deep.DeepMLPFeatures`)  on the first layer (exact)
``cnn``    two conv layers, one of H units; ReLU or tanh (``ConvFeatures``)     no: on the inputs
=========  ===================================================================  ===========================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch.nn as nn

from ..errors import ConfigError
from .deep import CNN_ACTIVATIONS, CNN_CHANNELS, ConvFeatures, DeepMLPFeatures, conv_activations
from .input_features import InputAugmentedFeatures
from .invariance import Invariance
from .networks import InvariantFeatures


@dataclass(frozen=True)
class FeatureSettings:
    """What a feature map is built from (the network's fields of :class:`~pyroinv.config.Config`)."""

    hidden: int = 1024
    depth: int = 3
    channels: tuple[int, int] = CNN_CHANNELS
    activation: str = "relu"
    blur_sigma: float = 0.1
    rff_sigma: float = 0.3
    rff_lengthscale: float | None = None
    init_scale: float = 1.0
    jacobian: bool = False
    standardize: bool = False


def _shallow(activation: str) -> Callable[..., nn.Module]:
    def build(input_shape: tuple[int, ...], invariance: Invariance, s: FeatureSettings, on_inputs: bool) -> nn.Module:
        return _first_layer(input_shape, invariance, s, on_inputs, activation)

    return build


def _first_layer(
    input_shape: tuple[int, ...], invariance: Invariance, s: FeatureSettings, on_inputs: bool, activation: str = "relu"
) -> InvariantFeatures:
    cls = InputAugmentedFeatures if on_inputs else InvariantFeatures
    return cls(
        input_shape,
        invariance,
        hidden=s.hidden,
        network=activation,
        blur_sigma=s.blur_sigma,
        rff_sigma=s.rff_sigma,
        rff_lengthscale=s.rff_lengthscale,
        init_scale=s.init_scale,
        jacobian=s.jacobian,
        standardize=s.standardize,
    )


def _mlp(input_shape: tuple[int, ...], invariance: Invariance, s: FeatureSettings, on_inputs: bool) -> nn.Module:
    # the first layer at Xavier (its scale is kept by the layers above, which start at Kaiming); the last at init_scale
    first = _first_layer(input_shape, invariance, replace(s, init_scale=1.0), on_inputs)
    return DeepMLPFeatures(first, depth=s.depth, init_scale=s.init_scale)


def _cnn(input_shape: tuple[int, ...], invariance: Invariance, s: FeatureSettings, on_inputs: bool) -> nn.Module:
    return ConvFeatures(
        input_shape, invariance, hidden=s.hidden, channels=s.channels, init_scale=s.init_scale, activation=s.activation
    )


@dataclass(frozen=True)
class Network:
    """One ``--network``: its summary, its builder, and the sizes the memory estimate needs.

    Attributes:
        build: ``(input_shape, invariance, FeatureSettings, on_inputs) -> feature map``.
        weight_space: the transforms can act on the first layer's weights.
        layer_laplace: every learned layer is a fully connected ReLU layer, so the Laplace evidence can cover them
            all (``--laplace-layers all``, :mod:`pyroinv.inference.laplace_layers`).
        parameters: learned parameters of the body (below ``W2``), ``(settings, input_shape) -> count``.
        activations: numbers a forward pass keeps per transformed example, ``(settings, input_shape) -> count``.
    """

    name: str
    summary: str
    build: Callable[[tuple[int, ...], Invariance, FeatureSettings, bool], nn.Module]
    parameters: Callable[[FeatureSettings, tuple[int, ...]], int]
    activations: Callable[[FeatureSettings, tuple[int, ...]], int]
    weight_space: bool = True
    layer_laplace: bool = False


def _first_parameters(s: FeatureSettings, shape: tuple[int, ...]) -> int:
    """``W1`` and ``b1`` (and a gain per unit where the layer is standardised)."""
    return s.hidden * (math.prod(shape) + 1 + int(s.standardize))


def _cnn_parameters(s: FeatureSettings, shape: tuple[int, ...]) -> int:
    C, h, w = shape if len(shape) == 3 else (1, 4, 4)
    (c1, c2), k = s.channels, 25
    return C * c1 * k + c1 + c1 * c2 * k + c2 + (c2 * (h // 4) * (w // 4) + 1) * s.hidden


#: every network, by its ``--network`` name
NETWORKS: dict[str, Network] = {
    n.name: n
    for n in [
        Network(
            "relu",
            "the paper's: one ReLU layer of --hidden units, W1 learned",
            _shallow("relu"),
            _first_parameters,
            lambda s, shape: s.hidden,
            layer_laplace=True,
        ),
        Network(
            "rff",
            "the paper's random Fourier features, W1 fixed",
            _shallow("rff"),
            lambda s, shape: 0,
            lambda s, shape: s.hidden,
        ),
        Network(
            "mlp",
            "--depth ReLU layers of --hidden units; the transforms on the first layer's weights",
            _mlp,
            lambda s, shape: _first_parameters(s, shape) + (s.depth - 1) * (s.hidden + 1) * s.hidden,
            lambda s, shape: s.depth * s.hidden,
            layer_laplace=True,
        ),
        Network(
            "cnn",
            "two 5x5 conv layers (--channels, max-pooled) and a ReLU layer of --hidden units; the "
            "transforms on the inputs",
            _cnn,
            _cnn_parameters,
            lambda s, shape: conv_activations(shape, s.hidden, s.channels) if len(shape) == 3 else s.hidden,
            weight_space=False,
        ),
    ]
}


def network(name: str) -> Network:
    """The network called ``name``; a one-line :class:`ConfigError` names the choices otherwise."""
    try:
        return NETWORKS[name]
    except KeyError:
        raise ConfigError(f"--network {name!r} is not one of {', '.join(NETWORKS)}") from None


def build_features(
    name: str, input_shape: tuple[int, ...], invariance: Invariance, settings: FeatureSettings, on_inputs: bool = False
) -> nn.Module:
    """The feature map of network ``name``, its transforms on the inputs when ``on_inputs`` (or when the network
    cannot carry them on its weights)."""
    net = network(name)
    try:
        return net.build(tuple(input_shape), invariance, settings, on_inputs or not net.weight_space)
    except ConfigError as err:  # the feature map's own words, said of the flag that chose it
        raise ConfigError(f"--network {name} {err}") from None


__all__ = ["CNN_ACTIVATIONS", "CNN_CHANNELS", "FeatureSettings", "NETWORKS", "Network", "build_features", "network"]
