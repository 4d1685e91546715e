
import pytest
import torch

from pyroinv.model import lie
from tests.conftest import DEVICES
from pyroinv.model.kernels import adjoint_matrix, warp_adjoint
from pyroinv.model.warp import gaussian_blur, jacobian, warp_coordinate_weights, warp_images, warp_weight_bank


def smooth_images(n, size=32, seed=0):
    """Smooth random images that vanish towards the border (no content leaves the frame)."""
    g = torch.Generator().manual_seed(seed)
    x = gaussian_blur(torch.randn(n, 1, size, size, generator=g, dtype=torch.float64), 2.5)
    r = torch.linspace(-1, 1, size, dtype=torch.float64)
    window = torch.exp(-((r[:, None] ** 2 + r[None, :] ** 2) / 0.25) ** 2)
    return x * window


def rotation(theta):
    return lie.transforms(torch.tensor([0, 0, theta, 0, 0, 0], dtype=torch.float64), torch.tensor([[0, 0, 1.0, 0, 0, 0]], dtype=torch.float64))


def test_weight_warp_equals_inverse_input_warp():
    """<W∘T, x> = <W, x∘T⁻¹> for rotations (|det T| = 1), up to bilinear interpolation error.

    Tolerance 2% relative: both sides resample once with bilinear interpolation,
    whose error on images smooth at a 2.5-pixel scale is about 1%.
    """
    W, x = smooth_images(8, seed=1), smooth_images(8, seed=2)
    T = rotation(0.7)
    lhs = torch.einsum("jcuv,bcuv->jb", warp_weight_bank(W, T)[0], x)
    rhs = torch.einsum("jcuv,bcuv->jb", W, warp_images(x, torch.linalg.inv(T).expand(8, 3, 3)))
    rel = (lhs - rhs).abs().max() / lhs.abs().max()
    assert rel < 0.02, rel
    # and the non-inverse warp is clearly different
    wrong = torch.einsum("jcuv,bcuv->jb", W, warp_images(x, T.expand(8, 3, 3)))
    assert (lhs - wrong).abs().max() / lhs.abs().max() > 0.2


def test_jacobian_makes_a_scaled_weight_warp_the_inverse_input_warp():
    """Scale by exp(0.25) in x and exp(0.15) in y: ``|det A| <W∘T, x> = <W, x∘T⁻¹>`` (2%, as above); without
    the factor the two differ by exactly ``|det A| = exp(0.4)``. Rotation has determinant 1."""
    W, x = smooth_images(8, seed=1), smooth_images(8, seed=2)
    T = lie.transforms(torch.tensor([0, 0, 0, 0.25, 0.15, 0], dtype=torch.float64),
                       torch.tensor([[0, 0, 0, 1.0, 1.0, 0]], dtype=torch.float64))
    det = jacobian(T)
    assert det.shape == (1,) and det.item() == pytest.approx(torch.e ** 0.4)
    lhs = det * torch.einsum("jcuv,bcuv->jb", warp_weight_bank(W, T)[0], x)
    rhs = torch.einsum("jcuv,bcuv->jb", W, warp_images(x, torch.linalg.inv(T).expand(8, 3, 3)))
    assert (lhs - rhs).abs().max() / lhs.abs().max() < 0.02
    assert (lhs / det - rhs).abs().max() / lhs.abs().max() > 0.2
    torch.testing.assert_close(jacobian(rotation(0.7)), torch.ones(1, dtype=torch.float64))


def test_warp_bank_shapes_and_identity():
    W = torch.randn(5, 3, 8, 8)
    bank = warp_weight_bank(W, torch.eye(3).expand(4, 3, 3))
    assert bank.shape == (4, 5, 3, 8, 8)
    torch.testing.assert_close(bank[2], W)


def test_blur_default_is_identity_and_real_blur_smooths():
    x = torch.randn(2, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    assert gaussian_blur(x, 0.1) is x
    y = gaussian_blur(x, 1.0)
    assert y.std() < 0.6 * x.std()


def test_blur_keeps_mass_away_from_the_border():
    # radius ceil(3 sigma) = 3: an image with a zero border that wide loses nothing to the zero padding
    x = torch.zeros(2, 1, 16, 16, dtype=torch.float64)
    x[..., 3:-3, 3:-3] = torch.rand(2, 1, 10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = gaussian_blur(x, 1.0)
    torch.testing.assert_close(y.sum(dim=(-1, -2)), x.sum(dim=(-1, -2)))


def test_coordinate_weights_through_homogeneous_coordinate():
    w, b = torch.randn(6, 2, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    T = lie.transforms(torch.tensor([0.3, -0.2, 1.1, 0.2, 0.1, 0.05], dtype=torch.float64),
                       torch.rand(3, 6, dtype=torch.float64) * 2 - 1)
    ws, bs = warp_coordinate_weights(w, b, T)
    x = torch.randn(4, 2, dtype=torch.float64)
    xh = torch.cat([x, torch.ones(4, 1, dtype=torch.float64)], 1)
    for s in range(3):
        direct = (T[s] @ xh.T).T[:, :2] @ w.T + b
        torch.testing.assert_close(x @ ws[s].T + bs[s], direct)


def _affine_transforms(S, dtype=torch.float64, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    eta = torch.tensor([0.3, -0.2, 2.5, 0.2, 0.1, 0.1], dtype=dtype, device=device, requires_grad=True)
    eps = (torch.rand(S, 6, generator=g, dtype=dtype) * 2 - 1).to(device)
    return eta, eps


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["sparse", "kernel"])
@pytest.mark.parametrize("channels", [1, 3])
def test_adjoint_warp_is_the_transpose_of_the_warp_with_gradients(method, channels, device):
    """<M_s w, x> = <w, M_s^T x> for every s, and the gradients (for eta and x) match the warp's."""
    S, B, h, w = 5, 4, 9, 11
    eta, eps = _affine_transforms(S, device=device)
    g = torch.Generator().manual_seed(1)
    x = torch.rand(B, channels, h, w, generator=g, dtype=torch.float64).to(device).requires_grad_(True)
    W = torch.randn(3, channels, h, w, generator=g, dtype=torch.float64).to(device)
    T = lie.transforms(eta, eps)
    lhs = torch.einsum("sjd,bd->sjb", warp_weight_bank(W, T).reshape(S, 3, -1), x.reshape(B, -1))
    rhs = torch.einsum("sbd,jd->sjb", warp_adjoint(x, T, method=method), W.reshape(3, -1))
    torch.testing.assert_close(rhs, lhs, rtol=1e-10, atol=1e-12)
    d_lhs = torch.autograd.grad(lhs.square().sum(), [eta, x], retain_graph=True)
    d_rhs = torch.autograd.grad(rhs.square().sum(), [eta, x])
    for a, b in zip(d_rhs, d_lhs):
        assert b.abs().sum() > 0
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_adjoint_methods_agree_in_float32_and_reject_unknown(device):
    eta, eps = _affine_transforms(8, dtype=torch.float32, device=device)
    x = torch.rand(6, 1, 28, 28, device=device)
    T = lie.transforms(eta, eps)
    torch.testing.assert_close(warp_adjoint(x, T, "sparse"), warp_adjoint(x, T, "kernel"), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="unknown adjoint method"):
        warp_adjoint(x, T, "dense")


def test_adjoint_matrix_rows_and_points_far_outside():
    """Rows are (pixel, transform); a transform that maps everything outside the image gives zeros."""
    S, h, w = 3, 5, 6
    T = torch.eye(3, dtype=torch.float64).repeat(S, 1, 1)
    T[2, 0, 2] = 50.0  # shifted 50 half-widths: nothing inside
    grid = torch.nn.functional.affine_grid(T[:, :2, :], [S, 1, h, w], align_corners=False)
    R = adjoint_matrix(grid, h, w).to_dense().reshape(h * w, S, h * w)
    torch.testing.assert_close(R[:, 0], torch.eye(h * w, dtype=torch.float64))
    torch.testing.assert_close(R[:, 1], torch.eye(h * w, dtype=torch.float64))
    assert R[:, 2].abs().max() == 0
