"""The switch of the fast paths, and each kernel against the formula it replaces."""
import contextlib
import warnings

import pytest
import torch

from pyroinv.model import kernels, lie
from pyroinv.model.invariance import Invariance
from pyroinv.model.networks import InvariantFeatures
from tests.conftest import DEVICES


def test_plain_turns_the_kernels_off_and_restores_the_switch():
    assert kernels.enabled()
    with kernels.plain():
        assert not kernels.enabled()
        with pytest.raises(RuntimeError):
            with kernels.plain():
                raise RuntimeError
        assert not kernels.enabled()
    assert kernels.enabled()


@pytest.mark.parametrize("network", ["relu", "rff"])
def test_fused_activation_and_in_place_evaluation_equal_the_formula(network):
    torch.manual_seed(0)
    feats = InvariantFeatures((1, 10, 10), Invariance("rotation", init=0.5, image_size=10), hidden=20, network=network)
    pre = torch.randn(3, 4, 20, requires_grad=True)
    fast = feats.activation(pre)
    with kernels.plain():
        plain = feats.activation(pre)
    torch.testing.assert_close(fast, plain)
    g = torch.randn_like(fast)
    torch.testing.assert_close(*(torch.autograd.grad((out * g).sum(), pre)[0] for out in (fast, plain)))
    x = torch.rand(7, 1, 10, 10)
    bank = feats.weight_bank(feats.invariance.sample_transforms(3))
    with torch.no_grad():
        fast = feats.apply_bank(x, bank)
        with kernels.plain():
            plain = feats.apply_bank(x, bank)
    torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-6)


def test_auto_path_takes_the_weight_warp_when_the_kernels_are_off(monkeypatch):
    feats = InvariantFeatures((1, 10, 10), Invariance("rotation", init=0.5, image_size=10), hidden=20)
    calls = []
    adjoint = kernels.warp_adjoint
    monkeypatch.setattr(kernels, "warp_adjoint", lambda *a, **k: calls.append(1) or adjoint(*a, **k))
    x, T = torch.rand(4, 1, 10, 10), feats.invariance.sample_transforms(2)
    fast = feats(x, T)
    assert calls == [1]
    with kernels.plain():
        plain = feats(x, T)
    assert calls == [1]
    torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-6)


def test_scale_tril_kernel_equals_the_formula():
    torch.manual_seed(0)
    offdiag, diag = torch.randn(2, 4, 4, requires_grad=True), torch.rand(2, 4, requires_grad=True)
    lower = torch.tril(torch.ones(4, 4), -1) * 0.5
    fast = kernels.scale_tril(offdiag, diag, lower)
    plain = torch.diag_embed(diag) + offdiag * lower
    torch.testing.assert_close(fast, plain)
    g = torch.randn(2, 4, 4)
    for a, b in zip(torch.autograd.grad((fast * g).sum(), [offdiag, diag]),
                    torch.autograd.grad((plain * g).sum(), [offdiag, diag])):
        torch.testing.assert_close(a, b)


def test_the_guides_draw_is_the_parents_draw_without_a_copy_of_l_per_draw():
    """CholeskyMVN.rsample (the guide's W2 under Pyro's own SVI and TraceMeanField_ELBO): the same values and
    gradients as torch's MultivariateNormal.rsample, per-example draws computed as one product per class."""
    from pyroinv.model.guides import ClassCholeskyGuide

    torch.manual_seed(0)
    guide = ClassCholeskyGuide(3, 6, init_scale=0.8)
    with torch.no_grad():
        guide.offdiag.normal_()
    params = [guide.loc_unconstrained, guide.diag_unconstrained, guide.offdiag]
    draws = []
    for plain in (True, False):
        torch.manual_seed(1)
        with (kernels.plain() if plain else contextlib.nullcontext()):
            w = guide.distribution().expand((5, 3)).rsample((2,))
        draws.append((w, torch.autograd.grad(w.pow(2).sum(), params)))
    (a, ga), (b, gb) = draws
    assert a.shape == (2, 5, 3, 6)
    torch.testing.assert_close(a, b)
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["auto", "kernel"])
def test_the_adjoint_warp_traces_under_torch_jit(device, method):
    """Pyro's JitTrace_ELBO traces the model: the grid-sample kernel's call cannot be recorded, so a trace takes the
    sparse product, with the kernel's values and gradients."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 1, 8, 8, generator=g).to(device)
    eta = torch.tensor([0.1, 0.0, 1.2, 0.1, 0.0, 0.0], device=device, requires_grad=True)
    eps = lie.stochastic_eps(4, range(6), generator=g).to(device)

    def f(images, eta):
        return kernels.warp_adjoint(images, lie.transforms(eta, eps), method=method)

    eager = f(x, eta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python values taken from shapes
        traced = torch.jit.trace(f, (x, eta), check_trace=False)
    out = traced(x, eta)
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-6)
    (g_eager,) = torch.autograd.grad(eager.square().sum(), eta)
    (g_traced,) = torch.autograd.grad(out.square().sum(), eta)
    torch.testing.assert_close(g_traced, g_eager, rtol=1e-4, atol=1e-5)
