import math

import pytest
import torch

from pyroinv.model import lie
from pyroinv.errors import ConfigError
from tests.conftest import DEVICES


def _eps(active, values):
    e = torch.zeros(1, 6, dtype=torch.float64)
    for k, v in zip(active, values):
        e[0, k] = v
    return e


def test_rotation_closed_form():
    eta = torch.tensor([0, 0, 2.0, 0, 0, 0], dtype=torch.float64)
    T = lie.transforms(eta, _eps([2], [0.6]))[0]
    a = 1.2
    expected = torch.tensor([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]], dtype=torch.float64)
    torch.testing.assert_close(T, expected)


def test_translation_closed_form():
    eta = torch.tensor([0.5, 0.25, 0, 0, 0, 0], dtype=torch.float64)
    T = lie.transforms(eta, _eps([0, 1], [0.4, -1.0]))[0]
    expected = torch.tensor([[1, 0, 0.2], [0, 1, -0.25], [0, 0, 1]], dtype=torch.float64)
    torch.testing.assert_close(T, expected)


def test_scale_closed_form():
    eta = torch.tensor([0, 0, 0, 0.7, 0.3, 0], dtype=torch.float64)
    T = lie.transforms(eta, _eps([3, 4], [1.0, -0.5]))[0]
    expected = torch.diag(torch.tensor([math.exp(0.7), math.exp(-0.15), 1.0], dtype=torch.float64))
    torch.testing.assert_close(T, expected)


def test_shear_closed_form():
    eta = torch.tensor([0, 0, 0, 0, 0, 0.4], dtype=torch.float64)
    T = lie.transforms(eta, _eps([5], [1.0]))[0]
    c, s = math.cosh(0.4), math.sinh(0.4)
    torch.testing.assert_close(T, torch.tensor([[c, s, 0], [s, c, 0], [0, 0, 1]], dtype=torch.float64))


def test_generator_order_matches_appendix_e():
    G = lie.generators()
    assert G[2].tolist() == [[0, -1, 0], [1, 0, 0], [0, 0, 0]]
    assert lie.GENERATOR_NAMES == ("translate_x", "translate_y", "rotate", "scale_x", "scale_y", "shear")
    assert lie.PRESETS["rotation"] == (2,) and lie.PRESETS["translation"] == (0, 1) and lie.PRESETS["scale"] == (3, 4)


def test_stochastic_eps_is_reparameterised():
    eta = torch.tensor([0, 0, 1.0, 0, 0, 0], requires_grad=True)
    eps = lie.stochastic_eps(16, (2,))
    assert eps.abs().max() <= 1 and (eps[:, [0, 1, 3, 4, 5]] == 0).all()
    lie.transforms(eta, eps)[:, 0, 1].sum().backward()
    assert eta.grad[2] != 0


def test_deterministic_grid():
    eps = lie.deterministic_eps(8, (2,))
    torch.testing.assert_close(eps[:, 2], torch.tensor([-7, -5, -3, -1, 1, 3, 5, 7]) / 8.0)
    assert lie.deterministic_eps(32, (0, 1)).shape == (36, 6)  # 6 x 6 grid
    with pytest.raises(ConfigError, match="deterministic grid over 6 generators .* 4096"):
        lie.deterministic_eps(10 ** 6, lie.PRESETS["affine"])
    # the training step's grid is made once per setting and device (no copy to the device at every step)
    grid = lie.deterministic_grid(8, (2,), torch.float32, torch.device("cpu"))
    assert grid is lie.deterministic_grid(8, (2,), torch.float32, torch.device("cpu"))
    torch.testing.assert_close(grid, eps)


def test_human_units():
    eta = torch.tensor([0.5, -0.25, math.pi, math.log(2), 0.0, 0.1])
    h = lie.to_human(eta, image_size=28)
    assert h["translate_x_px"] == pytest.approx(7.0) and h["translate_y_px"] == pytest.approx(3.5)
    assert h["rotation_deg"] == pytest.approx(180.0) and h["scale_x_factor"] == pytest.approx(2.0)
    assert lie.from_human(2, 90.0) == pytest.approx(math.pi / 2) and lie.from_human(0, 7.0, 28) == pytest.approx(0.5)
    assert lie.describe(eta, (2,), 28) == "rotation ±180.0°"


@pytest.mark.parametrize("constraint,init,ok", [("softplus", 0.3, True), ("softplus", 0.0, False),
                                               ("tanh", 3.0, True), ("tanh", 3.2, False), ("none", -1.0, True)])
def test_eta_constraints(constraint, init, ok):
    from pyroinv.errors import ConfigError
    from pyroinv.model.invariance import Invariance

    if not ok:
        with pytest.raises(ConfigError):
            Invariance("rotation", init=init, constraint=constraint)
        return
    inv = Invariance("rotation", init=init, constraint=constraint)
    assert float(inv.eta[2].detach()) == pytest.approx(init, abs=1e-5)
    with torch.no_grad():  # push the unconstrained value far out: the constraint holds
        inv.eta_active_unconstrained.fill_(50.0 if constraint != "none" else 1.0)
    if constraint == "tanh":
        assert float(inv.eta[2].detach()) <= math.pi
    if constraint == "softplus":
        with torch.no_grad():
            inv.eta_active_unconstrained.fill_(-50.0)
        assert float(inv.eta[2].detach()) > 0


@pytest.mark.parametrize("constraint", ["none", "softplus", "tanh"])
def test_set_eta_respects_the_constraint(constraint):
    from pyroinv.model.invariance import Invariance

    inv = Invariance("translation", init=[0.2, 0.3], constraint=constraint)
    inv.set_eta(1, 0.7)
    assert inv.eta.detach()[[0, 1]].tolist() == pytest.approx([0.2, 0.7], abs=1e-5)
    fixed = Invariance("rotation", init=0.1, learn=False)
    fixed.set_eta(2, 1.5)
    assert float(fixed.eta[2]) == pytest.approx(1.5)


@pytest.mark.parametrize("device", DEVICES)
def test_transforms_and_their_gradient_on_every_device(device):
    """On an accelerator the exponentials stay there (expm_taylor): the CPU's values, gradients reach eta."""
    eta = torch.tensor([0.2, -0.1, 1.3, 0.1, -0.2, 0.05], dtype=torch.float64, requires_grad=True)
    eps = lie.stochastic_eps(7, range(6), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    eta_d = eta.detach().to(device).requires_grad_(True)
    T = lie.transforms(eta, eps)
    T_d = lie.transforms(eta_d, eps.to(device))
    assert T_d.device.type == torch.device(device).type
    torch.testing.assert_close(T_d.cpu(), T)
    (g,) = torch.autograd.grad(T.square().sum(), eta)
    (g_d,) = torch.autograd.grad(T_d.square().sum(), eta_d)
    assert g.abs().min() > 0
    torch.testing.assert_close(g_d.cpu(), g)


@pytest.mark.parametrize("norm", [0.05, 1.0, math.pi, 8.0, 32.0])
def test_expm_taylor_matches_matrix_exp(norm):
    """The device's fixed-degree exponential (no branch on the data) against torch's, values and gradients."""
    g = torch.Generator().manual_seed(1)
    A = torch.randn(64, 3, 3, generator=g, dtype=torch.float64)
    A[:, 2] = 0.0  # affine: the last row of a generator combination is zero
    A = (A * norm / torch.linalg.matrix_norm(A, ord=2).reshape(-1, 1, 1)).requires_grad_(True)
    ref = torch.linalg.matrix_exp(A)
    got = lie.expm_taylor(A)
    scale = ref.detach().abs().amax()
    assert float((got - ref).detach().abs().amax() / scale) < 1e-6
    got32 = lie.expm_taylor(A.detach().float()).double()
    assert float((got32 - ref.detach()).abs().amax() / scale) < 5e-6
    w = torch.randn(64, 3, 3, generator=g, dtype=torch.float64)
    (g_ref,) = torch.autograd.grad((ref * w).sum(), A)
    (g_got,) = torch.autograd.grad((got * w).sum(), A)
    assert float((g_got - g_ref).abs().amax() / g_ref.abs().amax()) < 1e-6
    torch.testing.assert_close(lie.expm_taylor(A.detach()[0]), ref.detach()[0], rtol=1e-6, atol=1e-9)  # one matrix


def test_rotation_alone_takes_its_closed_form_off_the_cpu(monkeypatch):
    """exp(theta G_rot) as cos and sin: matrix_exp's values and gradients; the CPU keeps matrix_exp itself."""
    eta = torch.tensor([0.0, 0.0, 2.9, 0.0, 0.0, 0.0], dtype=torch.float64, requires_grad=True)
    eps = lie.stochastic_eps(9, (2,), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ref = lie.transforms(eta, eps)
    assert torch.equal(lie.transforms(eta, eps, active=(2,)), ref)  # on the CPU: the same computation
    monkeypatch.setattr(lie, "on_host", lambda t: False)  # as on an accelerator
    got = lie.transforms(eta, eps, active=(2,))
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-14)
    w = torch.randn(9, 3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (g_ref,) = torch.autograd.grad((ref * w).sum(), eta)
    (g_got,) = torch.autograd.grad((got * w).sum(), eta)
    torch.testing.assert_close(g_got, g_ref)
    assert lie.rotation_matrices(torch.zeros(2, 4)).shape == (2, 4, 3, 3)


def test_generators_are_fresh_copies():
    G = lie.generators()
    G.zero_()
    assert lie.generators().abs().sum() == 8


@pytest.mark.parametrize("sampling", ["stochastic", "deterministic"])
def test_isotropic_scale_ties_y_to_x(sampling):
    """One eta and one draw for both axes: every transform is ``diag(f, f, 1)``, f in [exp(-eta), exp(eta)]."""
    from pyroinv.model.invariance import Invariance

    inv = Invariance("isotropic-scale", init=0.4)
    assert inv.active == (3,) and [p.numel() for p in inv.parameters()] == [1]
    torch.testing.assert_close(inv.eta, torch.tensor([0, 0, 0, 0.4, 0.4, 0]))
    T = inv.sample_transforms(9, sampling)
    torch.testing.assert_close(T[:, 0, 0], T[:, 1, 1])
    assert (T[:, 0, 0] - 1).abs().max() > 0.05 and T[:, 0, 0].max() <= math.exp(0.4) + 1e-6
    assert (T[:, 0, 1] == 0).all() and (T[:, :2, 2] == 0).all()
    T[:, 0, 0].sum().backward()  # both axes' gradients reach the one parameter
    assert next(inv.parameters()).grad is not None
    assert lie.describe(inv.eta, inv.active) == "scale ×1.492 x, ×1.492 y"
    eps = torch.arange(12.0).reshape(2, 6)
    assert lie.apply_ties(eps, "scale") is eps
    assert lie.apply_ties(eps, "isotropic-scale")[:, 4].tolist() == [3.0, 9.0]


def test_similarity_is_translation_rotation_and_one_isotropic_scale():
    from pyroinv.model.invariance import Invariance

    inv = Invariance("similarity", init=[0.1, 0.2, 0.5, 0.3])
    torch.testing.assert_close(inv.eta, torch.tensor([0.1, 0.2, 0.5, 0.3, 0.3, 0.0]))
    A = inv.sample_transforms(16)[:, :2, :2]
    # a similarity: A = f R, so A^T A = f^2 I
    ata = A.transpose(1, 2) @ A
    torch.testing.assert_close(ata[:, 0, 1], torch.zeros(16), atol=1e-5, rtol=0)
    torch.testing.assert_close(ata[:, 0, 0], ata[:, 1, 1])
