"""The transforms on the inputs (input-space augmentation): the first layer of Augerino (Benton et al. 2020), the
baseline against which weight-space invariance is compared, and of any network whose method asks for it.

Where the paper's :class:`~pyroinv.model.networks.InvariantFeatures` warps the *weights* (``phi(W1 T_i x)`` computed as
``phi((W1 o T_i) x)``), Augerino transforms the *inputs*: every image is resampled at ``T_i p`` (bilinear, zeros
outside; no blur, nothing is warped on the weights) and every 2-D point is mapped to ``T_i x``,

    phi_i(x) = phi(W1 (T_i x) + b1),   i = 1..S.

The ``augerino`` method (:data:`pyroinv.model.methods.METHODS`) puts these features under a point ``W2`` and
the loss ``CE - width_weight * ||eta||_2``; the registry (:mod:`pyroinv.model.registry`) builds them for any method
whose ``transforms_on`` is ``"inputs"``.
"""

from __future__ import annotations

import torch

from .networks import InvariantFeatures
from .precision import mm
from .warp import warp_images


def transformed_inputs(x: torch.Tensor, T: torch.Tensor, input_shape: tuple[int, ...]) -> torch.Tensor:
    """Every input under every transform, ``(S * B, *input_shape)`` in transform-major order: images resampled at
    ``T_i p`` (bilinear, zeros outside), 2-D points mapped to ``T_i x``."""
    S, B = T.shape[0], x.shape[0]
    if len(input_shape) == 3:
        return warp_images(x.reshape(B, *input_shape).repeat(S, 1, 1, 1), T.repeat_interleave(B, 0))
    return (torch.einsum("sij,bj->sbi", T[:, :2, :2], x) + T[:, :2, 2].unsqueeze(1)).reshape(S * B, -1)


class InputAugmentedFeatures(InvariantFeatures):
    """``phi(W1 T_i x)`` with ``T_i`` applied to the inputs; same arguments as :class:`InvariantFeatures`."""

    #: the transforms act on the inputs, so there are no warped filters to plot
    warps_weights = False

    def weight_bank(self, T: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The weights as they are, and ``T``, which :meth:`apply_bank` applies to the inputs."""
        return self.first_weights().unsqueeze(0), self.b1.unsqueeze(0), T

    def apply_bank(self, x: torch.Tensor, bank: tuple[torch.Tensor, ...]) -> torch.Tensor:
        W, b, T = bank
        return self.activation(self.transformed_pre_activations(x, W[0], b[0], T))

    def transformed_pre_activations(
        self, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor, T: torch.Tensor
    ) -> torch.Tensor:
        """``W1 (T_i x) + b1``, shape ``(S, B, H)``."""
        xs = transformed_inputs(x, T, self.input_shape)
        return mm(xs.reshape(T.shape[0], x.shape[0], -1), W.T, self.product_dtype) + b

    def forward(self, x: torch.Tensor, T: torch.Tensor, path: str = "auto") -> torch.Tensor:
        """Features ``(S, B, H + 1)``; ``path`` (how a weight warp is applied) does not apply here."""
        return self.apply_bank(x, self.weight_bank(T))
