"""The Laplace evidence of the output layer: equal to laplace-torch's at fixed features, exact where it says so,
and the gradient that moves eta during training is the evidence's."""
import warnings

import pytest
import torch

from pyroinv.config import Config
from pyroinv.data.splits import Split
from pyroinv.inference import laplace as lap
from pyroinv.inference.train import Trainer


def _problem(N=300, D=12, K=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    phi = torch.randn(N, D, generator=g, dtype=torch.float64)
    y = torch.randint(0, K, (N,), generator=g)
    return phi, y, K


@pytest.mark.slow
@pytest.mark.parametrize("structure", ["full", "kron"])
def test_the_evidence_at_the_mode_is_laplace_torchs(structure):
    warnings.filterwarnings("ignore")
    from laplace import Laplace

    phi, y, K = _problem()
    alpha = 0.7
    W = lap.map_w2(phi, y, K, alpha, iters=500).double()
    linear = torch.nn.Linear(phi.shape[1], K, bias=False).double()
    with torch.no_grad():
        linear.weight.copy_(W)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(phi, y), batch_size=100)
    la = Laplace(linear, "classification", subset_of_weights="all", hessian_structure=structure,
                 prior_precision=1 / alpha)
    la.fit(loader)
    assert float(lap.log_evidence(phi, y, W, alpha, structure)) == pytest.approx(float(la.log_marginal_likelihood()),
                                                                                 rel=1e-7)


def test_the_full_ggn_is_the_sum_of_kronecker_products():
    phi, y, K = _problem(N=50, D=5, K=3)
    p = torch.softmax(torch.randn(50, K, dtype=torch.float64), -1)
    Lam = torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1)
    expected = sum(torch.kron(Lam[n], torch.outer(phi[n], phi[n])) for n in range(50))
    assert torch.allclose(lap.full_ggn(phi, p), expected, atol=1e-10)


def test_the_full_ggn_is_the_hessian_of_the_negative_log_likelihood():
    phi, y, K = _problem(N=40, D=4, K=3)
    W = torch.randn(K, 4, dtype=torch.float64)
    H = torch.autograd.functional.hessian(lambda w: -lap.log_likelihood(phi, y, w.view(K, 4)), W.flatten())
    assert torch.allclose(lap.full_ggn(phi, torch.softmax(phi @ W.T, -1)), H, atol=1e-10)


def test_a_subset_scaled_to_the_whole_is_the_whole_when_it_is_the_whole_repeated():
    phi, y, K = _problem(N=60, D=6, K=3)
    W = torch.randn(K, 6, dtype=torch.float64)
    whole = lap.log_evidence(phi.repeat(4, 1), y.repeat(4), W, 1.0, "kron")
    assert float(lap.log_evidence(phi, y, W, 1.0, "kron", num_data=240)) == pytest.approx(float(whole), rel=1e-10)


def test_the_training_gradient_is_the_first_order_gradient_of_the_half_log_determinant():
    """With the refresh at the batch's own features (the whole set as one batch), the surrogate's gradient is
    exactly that of 1/2 log det(alpha P) through the features."""
    phi, y, K = _problem(N=80, D=6, K=3)
    phi = phi.float()
    W = torch.randn(K, 6)
    eta_grad = lap.LaplaceEtaGradient.__new__(lap.LaplaceEtaGradient)
    eta_grad.num_data, eta_grad.alpha = 80, 0.5
    with torch.no_grad():
        occam = lap.kron_occam_factors(*lap.kron_factors(phi, torch.softmax(phi @ W.T, -1)), 80, 0.5)
        eta_grad.M_A, eta_grad.M_G = occam.M_A.float(), occam.M_G.float()
    x = phi.clone().double().requires_grad_(True)
    (direct,) = torch.autograd.grad(0.5 * lap.kron_logdet(*lap.kron_factors(x, torch.softmax(x @ W.double().T, -1)),
                                                          80, 0.5), x)
    x32 = phi.clone().requires_grad_(True)
    (surrogate,) = torch.autograd.grad(eta_grad.half_logdet_surrogate(None, x32, W), x32)
    assert torch.allclose(surrogate.double(), direct, rtol=1e-3, atol=1e-5)


def _data(n=96, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, 8, 8, generator=g)
    y = (x[:, 0, :4].mean((1, 2)) > x[:, 0, 4:].mean((1, 2))).long()
    return Split("toy", x.numpy(), y.numpy(), x[:32].numpy(), y[:32].numpy(), 2)


def test_training_moves_eta_by_the_evidence_and_records_it():
    cfg = Config(inference="laplace", hidden=8, samples=4, epochs=2, batch_size=32, init_eta=20.0).validate()
    trainer = Trainer(cfg, _data(), device="cpu")
    start = trainer.eta().clone()
    for _ in trainer.steps():
        pass
    assert not torch.equal(trainer.eta(), start)
    diag = trainer.diagnostics()
    assert "laplace_per_datapoint" in diag and diag["laplace_per_datapoint"] < 0


def test_a_resumed_laplace_run_is_the_uninterrupted_one():
    cfg = Config(inference="laplace", hidden=8, samples=4, epochs=3, batch_size=32, init_eta=20.0).validate()
    whole = Trainer(cfg, _data(), device="cpu")
    for _ in whole.steps():
        pass
    first = Trainer(cfg, _data(), device="cpu")
    for _ in range(4):
        first.train_step()
    state = first.state_dict()
    second = Trainer(cfg, _data(), device="cpu")
    second.load_state_dict(state)
    for _ in second.steps():
        pass
    assert torch.equal(second.eta(), whole.eta())
    assert torch.equal(second.guide.W2_hat, whole.guide.W2_hat)


def test_the_laplace_method_needs_the_logits_averaged():
    from pyroinv.errors import ConfigError

    with pytest.raises(ConfigError, match="--inference laplace needs --average logits"):
        Config(inference="laplace", average="probs").validate()


def test_evidence_at_mode_gives_both_structures_on_a_small_layer():
    torch.manual_seed(0)
    cfg = Config(inference="vi", hidden=8, samples=4, epochs=1, batch_size=32).validate()
    trainer = Trainer(cfg, _data(), device="cpu")
    ev = lap.evidence_at_mode(trainer.model, trainer.x_train, trainer.y_train, 1.0)
    assert ev["laplace_full_per_datapoint"] is not None
    # both are log p(D | eta) / N of a 2-class problem at 9 features: below 0, and close to each other
    assert ev["laplace_per_datapoint"] < 0 and abs(ev["laplace_per_datapoint"] - ev["laplace_full_per_datapoint"]) < 0.1


def test_factors_of_fewer_examples_than_features_decompose_in_double_precision(monkeypatch):
    g = torch.Generator().manual_seed(0)
    phi = torch.relu(torch.randn(312, 513, generator=g))  # 312 images, 513 features: 201 zero eigenvalues at least
    A = phi.T @ phi
    values, vectors = lap.symmetric_eigh(A)
    assert values.dtype == torch.float64 and values.min() > -1e-6 * values.max()
    calls = []
    real = torch.linalg.eigh

    def fails_once(M):
        calls.append(M)
        if len(calls) == 1:
            raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge")
        return real(M)

    monkeypatch.setattr(torch.linalg, "eigh", fails_once)
    jittered, _ = lap.symmetric_eigh(A)  # retried with a jitter far below the prior's precision
    assert len(calls) == 2 and torch.allclose(jittered, values, atol=1e-6 * float(values.max()))


def test_the_training_refresh_on_a_small_training_set_gives_a_finite_curvature():
    cfg = Config(inference="laplace", hidden=40, samples=4, epochs=1, batch_size=16, init_eta=20.0).validate()
    trainer = Trainer(cfg, _data(n=24), device="cpu")  # 24 examples, 41 features
    trainer.train_step()
    assert trainer.loss_fn.laplace.ready and torch.isfinite(trainer.loss_fn.laplace.M_A).all()
    assert trainer.loss_fn.laplace.M_A.dtype == torch.float32 and torch.isfinite(torch.tensor(trainer.loss_fn.laplace.log_evidence))


def test_mackays_precision_is_the_evidences_fixed_point_in_the_prior_precision():
    g = torch.Generator().manual_seed(1)
    a, gg = torch.rand(7, generator=g, dtype=torch.float64) * 50, torch.rand(3, generator=g, dtype=torch.float64) * 5
    sq_norm, N = 2.5, 40

    def evidence(delta):  # -delta ||theta||^2 / 2 + P/2 log delta - 1/2 sum log(lambda + delta)
        lam = torch.outer(gg, a) / N
        return -0.5 * delta * sq_norm + 0.5 * lam.numel() * torch.log(delta) - 0.5 * torch.log(lam + delta).sum()

    delta = torch.tensor(lap.mackay_precision(a, gg, N, sq_norm, 1.0, iterations=200), dtype=torch.float64,
                         requires_grad=True)
    (slope,) = torch.autograd.grad(evidence(delta), delta)
    assert abs(float(slope)) < 1e-8
    assert lap.mackay_precision(a * 0, gg, N, sq_norm, 3.0) == 3.0  # no curvature yet: unchanged


def test_importance_sampling_with_the_laplace_proposal_recovers_the_evidence():
    """On a logistic regression small enough for brute force (4 weights, 12 points), the importance-sampling
    estimate equals ``log p(D)`` from a million prior draws, where the Laplace estimate is measurably off."""
    phi, y, _ = _problem(N=12, D=2, K=2, seed=3)
    alpha = 4.0
    W, laplace = lap.laplace_log_evidence(phi, y, 2, alpha)
    gen = torch.Generator().manual_seed(0)
    prior = torch.randn(1_000_000, 2, 2, generator=gen, dtype=torch.float64) * alpha ** 0.5
    loglik = torch.log_softmax(torch.einsum("nd,mkd->mnk", phi.double(), prior), -1).gather(
        -1, y.expand(len(prior), -1).unsqueeze(-1)).sum((1, 2))
    truth = float(torch.logsumexp(loglik, 0) - torch.log(torch.tensor(len(prior), dtype=torch.float64)))
    est = lap.importance_log_evidence(phi, y, W, alpha, draws=20_000, seed=1)
    assert est["importance_per_datapoint"] * 12 == pytest.approx(truth, abs=0.01)
    assert abs(laplace - truth) > 0.03                      # the check can tell the approximation from the truth
    assert 0.2 * 20_000 < est["importance_ess"] <= 20_000
