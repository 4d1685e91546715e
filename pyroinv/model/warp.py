"""Affine warps of images and of 2-D coordinates (paper §3.2).

Coordinate convention (shared by the data variants and the model): images live on
PyTorch's normalised grid, x to the right and y *down*, both in [-1, 1] with
``align_corners=False`` (pixel centres at ``-1 + (2k + 1) / W``; one pixel is
``2 / W`` units). A 3x3 affine matrix ``T`` acts on homogeneous coordinates
``(x, y, 1)``; warping an image by ``T`` means

    warped(p) = image(T p)          (``affine_grid`` + bilinear ``grid_sample``),

i.e. the *content* moves by ``T^{-1}``. Pixels that ``T p`` maps outside the image
read the fill value 0 (``padding_mode="zeros"``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def warp_images(images: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """Warp a batch of images, one transform each: ``out[n](p) = images[n](T[n] p)``.

    Args:
        images: ``(N, C, H, W)``.
        T: ``(N, 3, 3)`` (or ``(N, 2, 3)``) affine matrices in normalised coordinates.
    """
    theta = T[:, :2, :].to(images.dtype)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def jacobian(T: torch.Tensor) -> torch.Tensor:
    """``|det A_s|`` of each transform's linear part, shape ``(S,)``.

    Warping a weight image changes the measure: ``<w o T, x> ~ <w, x o T^{-1}> / |det A|`` (substitute
    ``q = T p``). Multiplying the warped weights by ``|det A|`` makes the pre-activation exactly that of the
    inversely warped input, so averaging over ``T`` gives features invariant to the transform group. The
    determinant is ``exp(trace)`` of the Lie algebra element: 1 for translation, rotation and shear, and
    ``exp(eps_4 eta_4 + eps_5 eta_5)`` for scale, the only generators it changes.
    """
    return torch.linalg.det(T[:, :2, :2]).abs()


def warp_weight_bank(weights: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """Warp every weight image by every transform (paper §3.2, "invariance in the weights").

    Args:
        weights: ``(H, C, h, w)``: the rows of ``W1`` viewed as images.
        T: ``(S, 3, 3)``.

    Returns:
        ``(S, H, C, h, w)`` with ``out[s, j](p) = weights[j](T[s] p)``. One
        ``grid_sample`` call: the H weight images are stacked as channels.
    """
    H, C, h, w = weights.shape
    S = T.shape[0]
    stacked = weights.reshape(1, H * C, h, w).expand(S, H * C, h, w)
    return warp_images(stacked, T).reshape(S, H, C, h, w)


#: Below this sigma (pixels) the neighbour weight exp(-1 / (2 sigma^2)) is < 1e-16: the blur is the identity.
NEGLIGIBLE_BLUR_SIGMA = 0.116


def gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur with standard deviation ``sigma`` in pixels, zero padding.

    The kernel radius is ``ceil(3 sigma)`` (at least 1). The paper band-limits weight
    images with sigma = 0.1 before warping them; at 0.1 px the neighbour weight is
    ``exp(-50) ~ 2e-22``, below float64 resolution relative to the centre weight, so
    such a blur is the identity and is skipped (as is ``sigma <= 0``): for
    ``sigma < NEGLIGIBLE_BLUR_SIGMA`` the input is returned unchanged.
    """
    if sigma < NEGLIGIBLE_BLUR_SIGMA:
        return images
    radius = max(1, math.ceil(3 * sigma))
    t = torch.arange(-radius, radius + 1, dtype=images.dtype, device=images.device)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k = k / k.sum()
    C = images.shape[1]
    kx = k.view(1, 1, 1, -1).expand(C, 1, 1, -1)
    ky = k.view(1, 1, -1, 1).expand(C, 1, -1, 1)
    out = F.conv2d(images, kx, padding=(0, radius), groups=C)
    return F.conv2d(out, ky, padding=(radius, 0), groups=C)


def warp_coordinate_weights(
    weights: torch.Tensor, bias: torch.Tensor, T: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Transform the first-layer weights of 2-D coordinate data through the homogeneous coordinate.

    For ``x`` in R^2 the pre-activation of the warped network is
    ``w^T (T [x; 1])_{1:2} + b = (w^T A) x + (w^T t + b)`` with ``T = [[A, t], [0, 1]]``,
    so warping the weights gives weights ``A^T w`` and biases ``b + w^T t``.

    Args:
        weights: ``(H, 2)``; bias: ``(H,)``; T: ``(S, 3, 3)``.

    Returns:
        ``(S, H, 2)`` weights and ``(S, H)`` biases.
    """
    A = T[:, :2, :2]
    t = T[:, :2, 2]
    w = torch.einsum("hi,sij->shj", weights, A)
    b = bias.unsqueeze(0) + torch.einsum("hi,si->sh", weights, t)
    return w, b
