import math

import pytest
import torch

from pyroinv.model.invariance import Invariance
from pyroinv.model.bnn import InvariantBNN, mc_log_predictive
from pyroinv.model.networks import InvariantFeatures
from pyroinv.model.warp import gaussian_blur, warp_images
from pyroinv.model import lie
from tests.conftest import DEVICES


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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("jacobian", [False, True])
@pytest.mark.parametrize("network", ["relu", "rff"])
def test_weight_and_input_paths_agree_with_gradients(network, jacobian, device):
    """Warping W1 (S·H warps) and applying the adjoint warp to x (S·B warps): same features, same gradients,
    with and without the ``|det A|`` factor."""
    torch.manual_seed(0)
    inv = Invariance("affine", init=[0.1, -0.1, 0.5, 0.1, 0.05, 0.05], image_size=12)
    feats = InvariantFeatures((2, 12, 12), inv, hidden=20, network=network, blur_sigma=0.7,
                              jacobian=jacobian).double().to(device)
    x = torch.rand(6, 2, 12, 12, dtype=torch.float64, device=device)
    eps = lie.stochastic_eps(5, inv.active, dtype=torch.float64, device=device)
    W2 = torch.randn(4, feats.num_features, dtype=torch.float64, device=device)
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


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("network", ["relu", "rff"])
def test_every_path_gives_the_same_logits_and_gradients_in_float32(network, device, monkeypatch):
    """At MNIST's size in float32: the naive weight warp, the adjoint warp (sparse product and
    grid_sample's kernel) and the no-autograd evaluation path agree within 1e-4 relative error,
    for the logits and for the gradients with respect to eta, W1 and W2."""
    import functools

    import pyroinv.model.kernels as kernels
    from pyroinv.model.kernels import warp_adjoint

    torch.manual_seed(0)
    inv = Invariance("affine", init=[0.2, -0.1, 0.6, 0.1, 0.05, 0.05], image_size=28)
    feats = InvariantFeatures((1, 28, 28), inv, hidden=96, network=network).to(device)
    x = torch.rand(24, 1, 28, 28, device=device)
    eps = lie.stochastic_eps(6, inv.active, device=device)
    W2 = torch.randn(10, feats.num_features, device=device, requires_grad=True)
    params = {"eta": inv.eta_active_unconstrained, "W2": W2}
    if network == "relu":
        params["W1"] = feats.W1
    results = {}
    for name, path, method in (("naive", "weights", None), ("sparse", "inputs", "sparse"),
                               ("kernel", "inputs", "kernel")):
        if method is not None:
            monkeypatch.setattr(kernels, "warp_adjoint", functools.partial(warp_adjoint, method=method))
        logits = torch.matmul(feats(x, lie.transforms(inv.eta, eps), path=path), W2.T)
        grads = torch.autograd.grad(torch.log_softmax(logits, -1).logsumexp(0)[:, 0].sum(), list(params.values()))
        results[name] = (logits.detach(), dict(zip(params, grads)))
    with torch.no_grad():
        bank = feats.weight_bank(lie.transforms(inv.eta, eps))
        eval_logits = torch.matmul(feats.apply_bank(x, bank), W2.T)
    reference_logits, reference_grads = results["naive"]
    assert _relative_error(eval_logits, reference_logits) <= 1e-4
    for name in ("sparse", "kernel"):
        logits, grads = results[name]
        assert _relative_error(logits, reference_logits) <= 1e-4, name
        for k, g in grads.items():
            assert reference_grads[k].abs().sum() > 0, k
            assert _relative_error(g, reference_grads[k]) <= 1e-4, (name, k)


def test_standardized_weights_are_a_gain_times_each_units_centred_unit_rms_row():
    """``standardize``: the first layer applies ``g_h (V_h - mean) / rms``; it starts near the plain start, centred,
    both warp paths agree, and the gain and ``V`` are learned."""
    torch.manual_seed(0)
    inv = Invariance("rotation", init=math.radians(30.0), learn=False, image_size=12)
    feats = InvariantFeatures((1, 12, 12), inv, hidden=16, standardize=True, init_scale=0.15)
    W = feats.first_weights()
    assert torch.allclose(W.mean(1), torch.zeros(16), atol=1e-7)
    assert torch.allclose(W.pow(2).mean(1).sqrt(), feats.g1, rtol=1e-5)
    assert torch.allclose(feats.g1, torch.full((16,), 0.15 * math.sqrt(2 / (144 + 16))))
    # the start is the plain start's rows centred, within the sampling error of their rms
    centred = feats.W1 - feats.W1.mean(1, keepdim=True)
    assert torch.allclose(W, centred, rtol=0.2, atol=1e-3)
    # the weight is invariant to V's scale and shift per unit
    with torch.no_grad():
        feats.W1.mul_(torch.linspace(0.5, 3, 16).unsqueeze(1)).add_(0.7)
    assert torch.allclose(feats.first_weights(), W, atol=1e-6)
    x = torch.rand(3, 1, 12, 12)
    T = lie.transforms(inv.eta, torch.rand(4, 6) * 2 - 1)
    torch.testing.assert_close(feats(x, T, path="weights"), feats(x, T, path="inputs"), atol=1e-5, rtol=1e-4)
    feats(x, T).sum().backward()
    assert feats.g1.grad is not None and feats.g1.grad.abs().sum() > 0 and feats.W1.grad.abs().sum() > 0
    # the plain network has no gain, and applies W1 itself
    plain = InvariantFeatures((1, 12, 12), inv, hidden=16)
    assert not hasattr(plain, "g1") and plain.first_weights() is plain.W1


@pytest.mark.parametrize("kw", [{"network": "rff"}, {"shape": (2,)}])
def test_standardized_weights_need_a_learned_layer_over_pixels(kw):
    from pyroinv.errors import ConfigError

    inv = Invariance("rotation", image_size=12 if "shape" not in kw else None)
    with pytest.raises(ConfigError, match="weight standardisation needs a learned W1 over image pixels"):
        InvariantFeatures(kw.get("shape", (1, 12, 12)), inv, hidden=4, network=kw.get("network", "relu"), standardize=True)
