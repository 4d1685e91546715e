
import torch

from pyroinv import lie
from pyroinv.warp import gaussian_blur, warp_coordinate_weights, warp_images, warp_weight_bank


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


def test_warp_bank_shapes_and_identity():
    W = torch.randn(5, 3, 8, 8)
    bank = warp_weight_bank(W, torch.eye(3).expand(4, 3, 3))
    assert bank.shape == (4, 5, 3, 8, 8)
    torch.testing.assert_close(bank[2], W)


def test_blur_default_is_identity_and_real_blur_smooths():
    x = torch.randn(2, 1, 16, 16)
    assert gaussian_blur(x, 0.1) is x
    y = gaussian_blur(x, 1.0)
    assert y.std() < 0.6 * x.std()
    torch.testing.assert_close(y.sum(), x.sum(), atol=2.0, rtol=0.2)


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
