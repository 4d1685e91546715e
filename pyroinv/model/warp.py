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
import warnings

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


#: ``grid_sample``'s own backward kernel; ``output_mask`` picks which gradients it computes.
_GRID_SAMPLER_BACKWARD = torch.ops.aten.grid_sampler_2d_backward
_BILINEAR, _ZEROS = 0, 0  # grid_sample's integer codes for mode="bilinear", padding_mode="zeros"


def bilinear_taps(grid: torch.Tensor, h: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The pixels and weights that bilinear ``grid_sample`` (zeros padding, ``align_corners=False``) reads.

    For every output pixel ``p`` of every transform ``s``, ``M_s[p, q]`` is non-zero for at most four
    source pixels ``q``. Returns ``q`` (``(S, h*w, 4)``, flat indices, clamped into the image) and the
    weights (``(S, h*w, 4)``, zero for taps outside the image), computed as ``grid_sample`` computes
    them: ``i = ((g + 1) size - 1) / 2``, corners ``floor(i)`` and ``floor(i) + 1``, tent weights.
    """
    S = grid.shape[0]
    ix = ((grid[..., 0] + 1) * w - 1) / 2
    iy = ((grid[..., 1] + 1) * h - 1) / 2
    # points further than one pixel outside read zeros only; the clamp keeps their indices finite
    ix = torch.nan_to_num(ix, nan=-2.0).clamp(-2.0, w + 1.0)
    iy = torch.nan_to_num(iy, nan=-2.0).clamp(-2.0, h + 1.0)
    x0, y0 = torch.floor(ix), torch.floor(iy)
    tx, ty = ix - x0, iy - y0
    xs = torch.stack([x0, x0 + 1, x0, x0 + 1], -1)
    ys = torch.stack([y0, y0, y0 + 1, y0 + 1], -1)
    weights = torch.stack([(1 - tx) * (1 - ty), tx * (1 - ty), (1 - tx) * ty, tx * ty], -1)
    inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    q = (ys.clamp(0, h - 1) * w + xs.clamp(0, w - 1)).long()
    return q.reshape(S, h * w, 4), torch.where(inside, weights, 0.0).reshape(S, h * w, 4)


def adjoint_matrix(grid: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """All S adjoint warps as one sparse CSR matrix ``R`` of shape ``(h*w*S, h*w)``.

    ``R[(q, s), p] = M_s[p, q]``: rows ordered pixel-major, so that ``R X`` for ``X`` of shape
    ``(h*w, B)`` is ``(h*w, S*B)`` with ``(R X)[q, (s, b)] = (M_s^T x_b)[q]``, i.e. the transpose of
    the ``(S*B, h*w)`` matrix of adjoint-warped inputs, laid out for one matrix product with ``W1``.
    Built by one stable sort of the ``4 S h w`` taps by ``(q, s)``; no gradient flows through it.
    """
    S, n = grid.shape[0], h * w
    q, v = bilinear_taps(grid.detach(), h, w)
    # the narrowest integer type that holds the row index: narrow keys sort faster
    key_dtype = torch.int16 if n * S < 2**15 else torch.int32 if n * S < 2**31 else torch.int64
    index_dtype = torch.int32 if n * S < 2**31 else torch.int64
    row = (q * S + torch.arange(S, device=grid.device).view(S, 1, 1)).to(key_dtype).reshape(-1)
    row, order = torch.sort(row, stable=True)
    col = torch.arange(n, device=grid.device, dtype=index_dtype).repeat_interleave(4).repeat(S)[order]
    crow = torch.zeros(n * S + 1, dtype=index_dtype, device=grid.device)
    crow[1:] = torch.bincount(row, minlength=n * S).cumsum(0)
    with warnings.catch_warnings():  # torch flags its CSR support as beta, once per process
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, v.reshape(-1)[order], (n * S, n), check_invariants=False)


class _AdjointWarp(torch.autograd.Function):
    """``out[s, b] = M_s^T x_b`` with hand-written gradients for ``x`` and the sampling grid.

    Forward: on the CPU, one sparse product with :func:`adjoint_matrix` (grid_sample's own
    backward kernel scatters pixel by pixel and is several times slower there); elsewhere that
    kernel with only the input gradient computed. Backward: ``<g, M^T x> = <M g, x>``, so the
    gradient for the grid is grid_sample's grid gradient at input ``g`` and output-gradient ``x``
    (one kernel call), and the gradient for ``x`` is ``sum_s M_s g_s`` (one ``grid_sample``).
    """

    @staticmethod
    def forward(ctx, images: torch.Tensor, grid: torch.Tensor, sparse: bool) -> torch.Tensor:
        B, C, h, w = images.shape
        S = grid.shape[0]
        ctx.save_for_backward(images, grid)
        if sparse:
            out = torch.mm(adjoint_matrix(grid, h, w), images.reshape(B * C, h * w).t().contiguous())  # (h*w*S, B*C)
            return out.view(h * w, S, B, C).permute(1, 2, 3, 0).reshape(S, B, C * h * w)
        cotangent = images.reshape(1, B * C, h, w).expand(S, B * C, h, w)
        shape_only = images.new_zeros(()).expand(S, B * C, h, w)
        adj, _ = _GRID_SAMPLER_BACKWARD(cotangent, shape_only, grid, _BILINEAR, _ZEROS, False, [True, False])
        return adj.view(S, B, C * h * w)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        images, grid = ctx.saved_tensors
        B, C, h, w = images.shape
        S = grid.shape[0]
        # on the CPU path the gradient arrives transposed like the output; the kernels read strides
        g = grad.reshape(S, B * C, h, w)
        grad_images = grad_grid = None
        if ctx.needs_input_grad[1]:
            cotangent = images.reshape(1, B * C, h, w).expand(S, B * C, h, w)
            _, grad_grid = _GRID_SAMPLER_BACKWARD(cotangent, g, grid, _BILINEAR, _ZEROS, False, [False, True])
        if ctx.needs_input_grad[0]:
            warped = F.grid_sample(g, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
            grad_images = warped.sum(0).view(B, C, h, w)
        return grad_images, grad_grid, None


ADJOINT_METHODS = ("auto", "sparse", "kernel")


def warp_adjoint(images: torch.Tensor, T: torch.Tensor, method: str = "auto") -> torch.Tensor:
    """Apply the adjoint of every warp to every image: ``out[s, b] = M_s^T images[b]``, flattened.

    ``M_s`` is the (sparse, bilinear) matrix of :func:`warp_images` with transform ``T[s]``. Since
    ``<M_s w, x> = <w, M_s^T x>``, the pre-activations of warped weights can be computed by warping
    the B inputs instead of the H weight images: the same numbers at a cost proportional to B
    rather than H. Gradients reach ``T`` (and ``eta``) through the sampling grid.

    Args:
        images: ``(B, C, h, w)``; T: ``(S, 3, 3)``.
        method: ``"sparse"`` (one sparse matrix product), ``"kernel"`` (grid_sample's backward
            kernel) or ``"auto"``: sparse on the CPU, the kernel on other devices.

    Returns:
        ``(S, B, C*h*w)``; with the sparse method a transposed view of a ``(C*h*w, S*B)`` matrix (C = 1), which
        a matrix product with ``W1^T`` reads without a copy.
    """
    if method not in ADJOINT_METHODS:
        raise ValueError(f"unknown adjoint method {method!r}; choose one of {', '.join(ADJOINT_METHODS)}")
    sparse = method == "sparse" or (method == "auto" and images.device.type == "cpu")
    h, w = images.shape[-2:]
    grid = F.affine_grid(T[:, :2, :].to(images.dtype), [T.shape[0], 1, h, w], align_corners=False)
    return _AdjointWarp.apply(images, grid, sparse)


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


def warp_coordinate_weights(weights: torch.Tensor, bias: torch.Tensor, T: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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
