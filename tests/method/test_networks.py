import math

import pytest
import torch

from pyroinv.invariance import Invariance
from pyroinv.model import InvariantBNN, mc_log_predictive
from pyroinv.networks import InvariantFeatures
from pyroinv.warp import gaussian_blur, warp_images
from pyroinv import lie


def smooth(n, size=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = gaussian_blur(torch.randn(n, 1, size, size, generator=g), 1.5)
    r = torch.linspace(-1, 1, size)
    return x * torch.exp(-((r[:, None] ** 2 + r[None, :] ** 2) / 0.3) ** 2)


def make(eta_deg, network="relu", hidden=32, size=16):
    torch.manual_seed(0)
    inv = Invariance("rotation", init=math.radians(eta_deg), learn=False, image_size=size)
    feats = InvariantFeatures((1, size, size), inv, hidden=hidden, network=network)
    with torch.no_grad():
        feats.W1.copy_(smooth(hidden, size, seed=5).reshape(hidden, -1) * 3)
    return feats


@pytest.mark.parametrize("network", ["relu", "rff"])
def test_full_rotation_grid_makes_output_invariant(network):
    """eta = pi with 4 deterministic angles: rotating the input by 90° permutes the transforms exactly."""
    feats = make(180.0, network)
    model = InvariantBNN(feats, num_classes=3, num_samples=4, sampling="deterministic")
    W2 = torch.randn(3, feats.num_features)
    x = smooth(5, seed=3)
    out = model.log_predictive(x, W2)
    out_rot = model.log_predictive(torch.rot90(x, 1, dims=(-2, -1)), W2)
    torch.testing.assert_close(out, out_rot, atol=1e-5, rtol=1e-5)
    # with no invariance the output changes
    plain = InvariantBNN(make(0.0, network), num_classes=3, num_samples=4, sampling="deterministic")
    diff = (plain.log_predictive(x, W2) - plain.log_predictive(torch.rot90(x, 1, dims=(-2, -1)), W2)).abs().max()
    assert diff > 1e-2


def test_eight_angles_invariant_to_45_degrees_within_interpolation_error():
    feats = make(180.0)
    model = InvariantBNN(feats, num_classes=3, num_samples=8, sampling="deterministic")
    W2 = torch.randn(3, feats.num_features)
    x = smooth(5, seed=4)
    R45 = lie.transforms(torch.tensor([0, 0, math.pi / 4, 0, 0, 0]), torch.tensor([[0, 0, 1.0, 0, 0, 0]]))
    x_rot = warp_images(x, R45.expand(5, 3, 3))
    p, p_rot = model.log_predictive(x, W2).exp(), model.log_predictive(x_rot, W2).exp()
    plain = InvariantBNN(make(0.0), num_classes=3, num_samples=8, sampling="deterministic")
    q, q_rot = plain.log_predictive(x, W2).exp(), plain.log_predictive(x_rot, W2).exp()
    # invariant model: differences from interpolation only; at least 5x smaller than without invariance
    assert (p - p_rot).abs().max() < 0.2 * (q - q_rot).abs().max()


def test_mc_log_predictive_is_log_of_mean_probability():
    f = torch.randn(6, 4, 9, dtype=torch.float64)
    W2 = torch.randn(3, 9, dtype=torch.float64)
    expected = torch.softmax(f @ W2.T, -1).mean(0).log()
    torch.testing.assert_close(mc_log_predictive(f, W2), expected)
    W2s = torch.randn(2, 3, 9, dtype=torch.float64)
    expected = torch.stack([torch.softmax(f @ w.T, -1) for w in W2s]).mean((0, 1)).log()
    torch.testing.assert_close(mc_log_predictive(f, W2s), expected)
    # stable for huge logits
    assert torch.isfinite(mc_log_predictive(f * 1e4, W2)).all()


def test_rff_features_approximate_rbf_kernel():
    torch.manual_seed(0)
    inv = Invariance("none")
    feats = InvariantFeatures((1, 4, 4), inv, hidden=20000, network="rff", rff_lengthscale=2.0)
    x = torch.rand(5, 1, 4, 4)
    phi = feats(x, torch.eye(3).unsqueeze(0))[0, :, :-1]
    K = torch.exp(-torch.cdist(x.flatten(1), x.flatten(1)) ** 2 / (2 * 2.0 ** 2))
    torch.testing.assert_close(phi @ phi.T, K, atol=0.03, rtol=0)


def test_coordinate_network_rotation_invariance():
    torch.manual_seed(0)
    inv = Invariance("rotation", init=math.pi, learn=False)
    feats = InvariantFeatures((2,), inv, hidden=64, network="rff", rff_lengthscale=1.0)
    model = InvariantBNN(feats, num_classes=2, num_samples=12, sampling="deterministic")
    W2 = torch.randn(2, feats.num_features)
    x = torch.randn(7, 2)
    c, s = math.cos(math.pi / 6), math.sin(math.pi / 6)
    x_rot = x @ torch.tensor([[c, -s], [s, c]]).T
    torch.testing.assert_close(model.log_predictive(x, W2), model.log_predictive(x_rot, W2), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("network", ["relu", "rff"])
def test_weight_and_input_paths_agree_with_gradients(network):
    """Warping W1 (S·H warps) and applying the adjoint warp to x (S·B warps): same features, same gradients."""
    torch.manual_seed(0)
    inv = Invariance("affine", init=[0.1, -0.1, 0.5, 0.1, 0.05, 0.05], image_size=12)
    feats = InvariantFeatures((2, 12, 12), inv, hidden=20, network=network, blur_sigma=0.7).double()
    x = torch.rand(6, 2, 12, 12, dtype=torch.float64)
    eps = lie.stochastic_eps(5, inv.active, dtype=torch.float64)
    W2 = torch.randn(4, feats.num_features, dtype=torch.float64)
    out = {}
    for path in ("weights", "inputs"):
        feats.zero_grad()
        f = feats(x, lie.transforms(inv.eta, eps), path=path)
        mc_log_predictive(f, W2).sum().backward()
        out[path] = (f.detach(), {k: p.grad.clone() for k, p in feats.named_parameters()})
    torch.testing.assert_close(out["weights"][0], out["inputs"][0], rtol=1e-4, atol=1e-10)
    for k, g in out["weights"][1].items():
        assert g.abs().sum() > 0, k
        torch.testing.assert_close(out["inputs"][1][k], g, rtol=1e-4, atol=1e-10)
