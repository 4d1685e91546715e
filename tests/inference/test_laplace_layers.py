"""The Laplace evidence over every fully connected layer: the layer-by-layer pass is the network's, its Kronecker
factors are the exact GGN where they must be, the training gradient is the first-order one, and the method
trains, resumes and refuses what it does not cover in one line."""
import pytest
import torch

from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.inference import laplace as lap
from pyroinv.inference import laplace_layers as ll
from pyroinv.inference.build import build_model
from pyroinv.inference.train import Trainer

from .test_laplace import _data


def _config(**kw) -> Config:
    base = dict(network="relu", hidden=6, samples=4, inference="laplace", laplace_layers="all", invariance="affine",
                init_eta=[1.0, 1.0, 30.0, 0.1, 0.1, 0.1], blur_sigma=0.6, w1_init_scale=1.0)
    return Config(**{**base, **kw}).validate()


def _model(cfg: Config, shape=(1, 8, 8), classes=3):
    torch.manual_seed(0)
    model, _ = build_model(cfg, shape, classes)
    return model


@pytest.mark.parametrize("network", ["relu", "mlp"])
@pytest.mark.parametrize("jacobian", [False, True])
def test_the_layer_by_layer_pass_is_the_networks(network, jacobian):
    model = _model(_config(network=network, jacobian=jacobian, **({"depth": 2} if network == "mlp" else {})))
    x = torch.rand(5, 1, 8, 8)
    T = model.sample_transforms()
    inputs, pres, phi = ll.layer_pass(model.features, x, T)
    assert len(pres) == (2 if network == "mlp" else 1)
    assert torch.allclose(phi, model.features(x, T).mean(0), atol=1e-5)


def test_the_ggn_factor_root_factors_the_softmax_hessian():
    p = torch.softmax(torch.randn(6, 5, dtype=torch.float64), -1)
    L = ll.ggn_factor_root(p)
    assert torch.allclose(L @ L.transpose(1, 2), torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1), atol=1e-12)


@pytest.mark.parametrize("network", ["relu", "mlp"])
def test_for_one_example_and_one_transform_the_kronecker_factors_are_the_exact_ggn(network):
    """With N = 1 and S = 1 the Jacobian of the logits in a layer is one outer product, so G (x) A is exact."""
    model = _model(_config(network=network, samples=1, **({"depth": 2} if network == "mlp" else {}))).double()
    x = torch.rand(1, 1, 8, 8, dtype=torch.float64)
    T = model.sample_transforms()
    W2 = torch.randn(3, 7, dtype=torch.float64)
    factors, phi = ll.kron_layer_factors(model.features, x, T, W2)
    logits = (ll.layer_pass(model.features, x, T)[2] @ W2.T)[0]
    p = torch.softmax(logits.detach(), -1)
    Lam = torch.diag(p) - torch.outer(p, p)
    for (W, b), (A, G) in zip(ll.covered_layers(model.features), factors):
        J = torch.stack([torch.cat([gw, gb.unsqueeze(1)], 1).flatten()
                         for gw, gb in (torch.autograd.grad(logits[c], (W, b), retain_graph=True) for c in range(3))])
        assert torch.allclose(torch.kron(G, A), J.T @ Lam @ J, atol=1e-10)


def test_the_training_gradient_is_the_first_order_gradient_of_every_layers_half_log_determinant():
    """At the refresh (the whole set as one batch, the same deterministic transforms), the surrogate's gradient in
    eta is that of 1/2 sum_l log det(P_l / delta_l) through both factors of every layer (the ReLU masks give G_l
    none of their own), plus W2's term."""
    cfg = _config(network="mlp", depth=2, sampling="deterministic", samples=5, invariance="rotation", init_eta=40.0)
    model = _model(cfg).double()
    g = torch.Generator().manual_seed(3)
    x, y = torch.rand(40, 1, 8, 8, generator=g, dtype=torch.float64), torch.randint(0, 3, (40,), generator=g)
    W2 = torch.randn(3, 7, generator=g, dtype=torch.float64)
    occam = ll.LayersLaplace(model, x, y, alpha=0.7)
    occam.refresh(W2)
    occam.M_A_layers = [M.double() for M in occam.M_A_layers]
    occam.M_G_layers = [M.double() for M in occam.M_G_layers]
    occam.M_A, occam.M_G = occam.M_A.double(), occam.M_G.double()
    eta = list(model.invariance.parameters())
    (surrogate,) = torch.autograd.grad(occam.half_logdet_surrogate(x, None, W2), eta)

    factors, phi = ll.kron_layer_factors(model.features, x, model.sample_transforms(), W2, differentiable=True)
    direct = 0.5 * lap.kron_logdet(*lap.kron_factors(phi, torch.softmax(phi @ W2.T, -1)), 40, 0.7)
    for (A, G), delta in zip(factors, occam.precisions):
        direct = direct + 0.5 * lap.kron_logdet(A, G, 40, 1 / delta)
    (expected,) = torch.autograd.grad(direct, eta, retain_graph=True)
    assert expected.abs().min() > 1e-3 and torch.allclose(surrogate, expected, rtol=1e-6, atol=1e-9)
    # without the G factors' term the gradient differs: it is not a negligible part
    (a_only,) = torch.autograd.grad(sum(0.5 * lap.kron_logdet(A, G.detach(), 40, 1 / d) for (A, G), d in
                                        zip(factors, occam.precisions)) + 0.5 * lap.kron_logdet(
        *lap.kron_factors(phi, torch.softmax(phi @ W2.T, -1)), 40, 0.7), eta)
    assert not torch.allclose(a_only, expected, rtol=1e-3)


@pytest.mark.slow
def test_training_learns_the_prior_precisions_moves_eta_and_resumes_exactly():
    cfg = _config(network="mlp", depth=2, hidden=8, epochs=3, min_steps=ll.REFRESH_STEPS + 3, batch_size=32)
    whole = Trainer(cfg, _data(), device="cpu")
    start = whole.eta().clone()
    for _ in whole.steps():
        pass
    assert not torch.equal(whole.eta(), start)
    diag = whole.diagnostics()
    assert diag["laplace_layers_per_datapoint"] < 0
    assert all(diag[f"prior_precision_{l}"] > 0 for l in (1, 2))
    assert whole.loss_fn.laplace.precisions != [1.0, 1.0]  # learned at the refreshes after W2 left zero

    first = Trainer(cfg, _data(), device="cpu")
    for _ in range(5):
        first.train_step()
    state = first.state_dict()  # before the next Trainer reseeds the generators
    second = Trainer(cfg, _data(), device="cpu")
    second.load_state_dict(state)
    for _ in second.steps():
        pass
    assert torch.equal(second.eta(), whole.eta())
    assert second.loss_fn.laplace.precisions == whole.loss_fn.laplace.precisions


def test_the_body_prior_enters_the_training_loss():
    cfg = _config(hidden=8, epochs=1, batch_size=32)
    trainer = Trainer(cfg, _data(), device="cpu")
    trainer.loss_fn.laplace.precisions = [2.0]
    W1, b1 = trainer.model.features.W1, trainer.model.features.b1
    expected = float(W1.detach().pow(2).sum() + b1.detach().pow(2).sum())
    assert float(trainer.loss_fn.laplace.weight_penalty().detach()) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("kw, match", [
    (dict(inference="vi"), "--laplace-layers all applies to --inference laplace"),
    (dict(laplace_layers="some"), "--laplace-layers 'some' is not one of last, all"),
    (dict(network="cnn"), "covers fully connected ReLU layers \\(--network relu, mlp\\), not --network cnn"),
    (dict(network="rff"), "not --network rff"),
])
def test_settings_it_does_not_take_are_refused_in_one_line(kw, match):
    with pytest.raises(ConfigError, match=match):
        _config(**kw)


@pytest.mark.parametrize("kw, shape, match", [
    (dict(laplace_layers="last", network="cnn"), (1, 8, 8), "covers fully connected ReLU layers with a learned W1"),
    (dict(laplace_layers="last", network="rff"), (1, 8, 8), "covers fully connected ReLU layers with a learned W1"),
    (dict(invariance="rotation", init_eta=20.0), (2,), "needs image inputs"),
])
def test_feature_maps_it_does_not_cover_are_refused_in_one_line(kw, shape, match):
    model = _model(_config(**kw), shape=shape)
    with pytest.raises(ConfigError, match=match):
        ll.covered_layers(model.features)
