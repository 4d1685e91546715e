"""The NUTS check: its potential is the model's log joint, the Laplace evidence is right, and a tiny run ends."""
import math

import pyro
import pytest
import torch

from pyroinv.config import Config
from pyroinv.data import load_dataset
from pyroinv.run.nuts_check import averaged_features, check_eta, laplace_log_evidence, log_joint, nuts_table
from pyroinv.inference.train import Trainer


def _cfg(**kw):
    return Config(**{**dict(dataset="mnist-rot", network="rff", hidden=8, samples=4, sampling="deterministic",
                            fixed_eta=90.0, train_size=60, test_size=40, epochs=2, batch_size=30), **kw}).validate()


def test_the_potential_is_the_models_log_joint(cache_dir, mnist):
    data = load_dataset("mnist-rot", cache_dir=cache_dir, train_size=60, test_size=40, seed=0)
    tr = Trainer(_cfg(estimator="shared"), data)
    W2 = torch.randn(10, 9)
    x, y = tr.x_train, tr.y_train
    model = pyro.poutine.condition(tr.model, data={"W2": W2})
    with pyro.settings.context(module_local_params=True):
        trace = pyro.poutine.trace(model).get_trace(x, y, num_data=x.shape[0])
    assert float(log_joint(W2, averaged_features(tr, x), y, 1.0)) == pytest.approx(float(trace.log_prob_sum()), rel=1e-5)


def test_the_laplace_evidence_matches_importance_sampling_from_its_own_gaussian():
    g = torch.Generator().manual_seed(0)
    phi = torch.randn(400, 3, generator=g)
    y = (phi[:, 0] + 0.5 * torch.randn(400, generator=g) > 0).long()
    W, log_z = laplace_log_evidence(phi, y, 2, 1.0)
    # IS with the Laplace Gaussian N(W*, H^-1) as proposal: consistent for log Z whatever the proposal
    p = torch.softmax(phi.double() @ W.double().T, -1)
    A = torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1)
    H = torch.einsum("nab,nd,ne->adbe", A, phi.double(), phi.double()).reshape(6, 6) + torch.eye(6, dtype=torch.float64)
    q = torch.distributions.MultivariateNormal(W.double().reshape(-1), precision_matrix=H)
    w = q.sample((20000,))
    log_w = log_joint(w.reshape(-1, 2, 3), phi.double(), y, 1.0) - q.log_prob(w)
    assert log_z == pytest.approx(float(torch.logsumexp(log_w, 0) - math.log(20000)), abs=0.02)


def test_a_tiny_check_runs_and_orders_its_bounds(cache_dir, mnist):
    data = load_dataset("mnist-rot", cache_dir=cache_dir, train_size=60, test_size=40, seed=0)
    row = check_eta(_cfg(epochs=5), data, 90.0, draws=200, nuts_samples=20, nuts_warmup=20)
    assert row.elbo_n <= row.is_log_z_n + 0.05  # importance sampling with q is above the ELBO (up to MC error)
    assert 0.0 <= row.nuts_accuracy <= 1.0 and math.isfinite(row.laplace_log_z_n) and row.nuts_seconds > 0
    assert "| 90° |" in nuts_table([row])
