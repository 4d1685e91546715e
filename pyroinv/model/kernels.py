"""Fast paths of the model, behind one switch.

Every module of :mod:`pyroinv.model` writes its formula in plain torch. Where a faster computation of the
same numbers exists, the module asks :func:`enabled` and calls the fast version from here; with the switch
off (``use_kernels(False)``, or ``with plain():``) the formula runs instead. The equality tests
(``tests/model/test_kernels.py`` and the path tests of the network, warp and guide) are the contract between
the two: the same values and gradients.

* :func:`relu_with_one`, :func:`cosine_with_one`: ``[phi(z), 1]`` written in one pass (plain:
  ``torch.cat([phi(z), 1])``).
* :func:`features_no_grad`: evaluation without autograd, each transform's product, bias and activation
  written in place into its slice of the output (plain: the training computation).
* :func:`warp_adjoint`: ``phi(W1 T_i x)`` by warping the B inputs with the adjoint of the weight warp,
  ``<M_s w, x> = <w, M_s^T x>``, cheaper when B < H (plain: warp the H weight images, the paper's
  description); on the CPU one sparse product, elsewhere ``grid_sample``'s own backward kernel.
* :func:`scale_tril`: ``L = diag(d) + V * lower`` in one pass each way (plain: ``diag_embed`` and a product).
* :func:`scaled_noise`: ``L eps`` for many draws per class as one ``(D, D) @ (D, n)`` product per class (in
  the guide's product dtype, :mod:`pyroinv.model.precision`).
* :class:`CholeskyNoiseReparam` (a Pyro reparameteriser, applied to the guide under ``Trace_ELBO`` by
  :func:`pyroinv.inference.build.build_loss`): ``W2 ~ q`` drawn as a ``Delta`` at ``mu + L eps``,
  ``eps ~ N(0, I)``, whose log-density is the draw's ``log q(W2) = log N(eps; 0, I) - log |L|``, with no
  triangular solve (plain: the guide's ``MultivariateNormal`` site, whose ``log_prob`` solves). Nothing is
  cached between calls.
"""

from __future__ import annotations

import math
import warnings

import pyro.distributions as dist
import pyro.poutine as poutine
import torch
import torch.nn.functional as F
from pyro.infer.reparam.reparam import Reparam, ReparamMessage, ReparamResult

from .. import settings
from .precision import mm


def enabled() -> bool:
    """Whether the fast paths are on (the default; the ``kernels`` setting, :mod:`pyroinv.settings`)."""
    return settings.get("kernels")


def use_kernels(on: bool) -> None:
    """Turn the fast paths on or off for the whole process (``pyroinv.settings.set(kernels=on)``)."""
    settings.set(kernels=bool(on))


def plain():
    """Run the plain formulas inside the block (e.g. to check a result against them):
    ``pyroinv.settings.context(kernels=False)``."""
    return settings.context(kernels=False)


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


def relu_with_one(pre: torch.Tensor) -> torch.Tensor:
    """``[relu(pre), 1]``, ``(..., H + 1)``."""
    return _ReluWithOne.apply(pre)


def cosine_with_one(pre: torch.Tensor, scale: float) -> torch.Tensor:
    """``[scale * cos(pre), 1]``, ``(..., H + 1)``."""
    return _CosineWithOne.apply(pre, scale)


@torch.no_grad()
def features_no_grad(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor, network: str, rff_scale: float) -> torch.Tensor:
    """``[phi(W_s x + b_s), 1]`` for every transform s, ``(S, B, H + 1)``, without autograd: each product is
    written, bias included, straight into its slice of the output and activated in place there."""
    S, H = W.shape[0], W.shape[1]
    out = x.new_empty(S, x.shape[0], H + 1)
    for s in range(S):
        pre = out[s, :, :H]
        torch.addmm(b[s], x, W[s].T, out=pre)
        if network == "rff":
            pre.cos_().mul_(rff_scale)
        else:
            pre.clamp_min_(0)
    out[..., H] = 1
    return out


class _ScaleTril(torch.autograd.Function):
    """``L = V * lower`` with ``diag(d)`` written onto its (zero) diagonal, and the gradients
    ``dV = dL * lower``, ``dd = diag(dL)``: one pass each way. (Autograd's own graph of the in-place
    diagonal write clones the whole ``(K, D, D)`` gradient of ``L`` first.)"""

    @staticmethod
    def forward(ctx, offdiag: torch.Tensor, diag: torch.Tensor, lower: torch.Tensor) -> torch.Tensor:
        L = offdiag * lower  # a fresh tensor; ``lower`` is zero on and above the diagonal
        L.diagonal(dim1=-2, dim2=-1).copy_(diag)
        ctx.save_for_backward(lower)
        return L

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        (lower,) = ctx.saved_tensors
        return grad * lower, grad.diagonal(dim1=-2, dim2=-1).clone(), None


def scale_tril(offdiag: torch.Tensor, diag: torch.Tensor, lower: torch.Tensor) -> torch.Tensor:
    """``diag(d) + offdiag * lower`` for a ``lower`` that is zero on and above the diagonal."""
    return _ScaleTril.apply(offdiag, diag, lower)


def scaled_noise(L: torch.Tensor, eps: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``L eps`` for ``L`` ``(K, D, D)`` and ``eps`` ``(..., K, D)``: many draws per class (the ``local``
    estimator's one per example) as one ``(D, D) @ (D, n)`` product per class rather than ``n``
    matrix-vector products that each read the whole of ``L``. With ``dtype`` (bfloat16 under
    ``--precision bf16``) the product's operands are cast to it, ``eps`` laid out contiguously for the product,
    and the result returned in ``L``'s dtype (:func:`pyroinv.model.precision.mm`)."""
    if L.dim() == 3 and eps.dim() > 2 and eps.shape[-2:] == L.shape[:2]:
        K, D = L.shape[0], L.shape[1]
        flat = eps.reshape(-1, K, D).permute(1, 2, 0)  # (K, D, n)
        if dtype is None:
            # contiguous: the sums over D that follow (the densities of the draw) read it row by row
            return torch.matmul(L, flat).permute(2, 0, 1).contiguous().reshape(eps.shape)
        product = mm(L, flat.to(dtype).contiguous(), dtype)  # eps cast once, laid out for the product
        return product.permute(2, 0, 1).contiguous().reshape(eps.shape)
    return mm(L, eps.unsqueeze(-1), dtype).squeeze(-1)


class CholeskyNoiseReparam(Reparam):
    """Draw a ``MultivariateNormal(loc, scale_tril=L)`` site as ``Delta(loc + L eps)``, ``eps ~ N(0, I)``, whose
    log-density is that of the draw, ``log N(loc + L eps; loc, L L^T) = -|eps|^2 / 2 - D log(2 pi) / 2
    - sum_i log L_ii``: the value, its density and their pathwise gradients are those of ``rsample`` and
    ``log_prob`` (the same random numbers), without the triangular solve. For guides (the site stays a latent
    variable of the model): ``poutine.reparam(guide, config={"W2": CholeskyNoiseReparam()})``. A distribution
    that holds the diagonal of ``L`` as its own tensor (``scale_diag``, :class:`pyroinv.model.guides.CholeskyMVN`)
    gives ``sum_i log L_ii`` its gradient there rather than through a ``(K, D, D)`` gradient of ``L``. Other sites (an
    observed one, or one that is not a ``MultivariateNormal``, e.g. a point guide's ``Delta``) pass unchanged.
    """

    def apply(self, msg: ReparamMessage) -> ReparamResult:
        fn = msg["fn"]
        if msg["is_observed"] or not isinstance(fn, torch.distributions.MultivariateNormal):
            # e.g. a point guide's Delta, passed on as it came (pyro's ReparamMessage allows is_observed None, its
            # ReparamResult not: the ignore)
            return {"fn": fn, "value": msg["value"], "is_observed": msg["is_observed"]}  # type: ignore[typeddict-item]
        L = fn._unbroadcasted_scale_tril
        dtype = getattr(fn, "product_dtype", None)
        diag = getattr(fn, "scale_diag", None)
        diag = L.diagonal(dim1=-2, dim2=-1) if diag is None else diag
        eps = torch.randn(fn.loc.shape, dtype=fn.loc.dtype, device=fn.loc.device)
        value = fn.loc + scaled_noise(L, eps, dtype)
        log_density = -0.5 * (fn.event_shape[0] * math.log(2 * math.pi) + eps.pow(2).sum(-1)) - diag.log().sum(-1)
        return {
            "fn": dist.Delta(value, log_density=log_density, event_dim=1, validate_args=False),
            "value": value,
            "is_observed": False,
        }


class NoiseReparameterisedGuide(torch.nn.Module):
    """``guide`` with its ``sites`` drawn through :class:`CholeskyNoiseReparam` (its parameters stay its own).

    A plain ``torch.nn.Module``, not a ``PyroModule``: holding the guide does not make it a sub-module in Pyro's
    sense, so the guide's parameter names (``loc``, ...) stay what they are when it is called on its own."""

    def __init__(self, guide: torch.nn.Module, sites: tuple[str, ...] = ("W2",)) -> None:
        super().__init__()
        self.guide = guide
        self.sites = sites

    def forward(self, *args, **kwargs):
        return poutine.reparam(self.guide, config={s: CholeskyNoiseReparam() for s in self.sites})(*args, **kwargs)


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

    ``M_s`` is the (sparse, bilinear) matrix of :func:`pyroinv.model.warp.warp_images` with transform ``T[s]``. Since
    ``<M_s w, x> = <w, M_s^T x>``, the pre-activations of warped weights can be computed by warping
    the B inputs instead of the H weight images: the same numbers at a cost proportional to B
    rather than H. Gradients reach ``T`` (and ``eta``) through the sampling grid.

    Args:
        images: ``(B, C, h, w)``; T: ``(S, 3, 3)``.
        method: ``"sparse"`` (one sparse matrix product), ``"kernel"`` (grid_sample's backward
            kernel) or ``"auto"``: sparse on the CPU, the kernel on other devices. Under ``torch.jit.trace`` (Pyro's
            ``JitTrace_ELBO``) always sparse: the tracer cannot record the kernel's call (its output mask).

    Returns:
        ``(S, B, C*h*w)``; with the sparse method a transposed view of a ``(C*h*w, S*B)`` matrix (C = 1), which
        a matrix product with ``W1^T`` reads without a copy.
    """
    if method not in ADJOINT_METHODS:
        raise ValueError(f"unknown adjoint method {method!r}; choose one of {', '.join(ADJOINT_METHODS)}")
    sparse = method == "sparse" or (method == "auto" and images.device.type == "cpu") or torch.jit.is_tracing()
    h, w = images.shape[-2:]
    grid = F.affine_grid(T[:, :2, :].to(images.dtype), [T.shape[0], 1, h, w], align_corners=False)
    return _AdjointWarp.apply(images, grid, sparse)
