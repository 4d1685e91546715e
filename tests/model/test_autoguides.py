"""Pyro's AutoGuides over W2: the guide interface (KL, draws, diagnostics), the per-example estimator, training."""
import math

import pyro
import pytest
import torch

from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.inference.build import build_loss, build_model
from pyroinv.model.autoguides import AutoW2Guide
from pyroinv.model.priors import IsotropicNormal

KINDS = ("autonormal", "autolowrank")


@pytest.mark.parametrize("kind", KINDS)
def test_the_kl_is_the_monte_carlo_kl_and_q_starts_at_the_prior_shape(kind):
    torch.manual_seed(0)
    g = AutoW2Guide(kind, 3, 5, alpha=2.0)
    with torch.no_grad():
        for p in g.parameters():
            p.add_(0.3 * torch.randn_like(p))  # away from the start
    prior = IsotropicNormal(torch.zeros(3, 5), 2.0)
    q = g.marginal()
    w = q.sample((200000,))
    with torch.no_grad():
        mc = (q.log_prob(w) - prior.log_prob(w.reshape(-1, 3, 5)).sum(-1)).mean()
    assert g.regulariser(prior).item() == pytest.approx(mc.item(), abs=0.02)
    fresh = AutoW2Guide(kind, 3, 5)
    assert fresh.diagnostics()["mu_norm"] == 0.0 and fresh.diagnostics()["q_scale"] == pytest.approx(1.0, abs=0.02)
    assert fresh.posterior_sample(4).shape == (4, 3, 5)


@pytest.mark.parametrize("kind", KINDS)
def test_the_local_estimator_draws_w2_per_example_in_training_and_once_in_prediction(kind):
    g = AutoW2Guide(kind, 3, 5, estimator="local")
    x, y = torch.zeros(4, 2), torch.zeros(4)
    tr = pyro.poutine.trace(g).get_trace(x, y)
    assert tr.nodes["W2"]["value"].shape == (4, 3, 5) and tr.nodes["W2"]["scale"] == 0.25
    assert pyro.poutine.trace(g).get_trace(x).nodes["W2"]["value"].shape == (3, 5)  # no labels: prediction


def test_autoguides_need_the_sampled_kl():
    with pytest.raises(ConfigError, match="--guide autonormal has no closed-form KL"):
        Config(guide="autonormal", elbo="closed-form").validate()
    with pytest.raises(ConfigError, match="--guide 'gaussian' is not one of cholesky, autonormal, autolowrank"):
        Config(guide="gaussian").validate()


@pytest.mark.parametrize("kind", KINDS)
def test_training_with_an_autoguide_raises_the_elbo(kind, cache_dir, mnist):
    from pyroinv.data import load_dataset
    from pyroinv.inference.train import Trainer

    data = load_dataset("mnist", cache_dir=cache_dir, train_size=256, test_size=20, seed=0)
    tr = Trainer(Config(dataset="mnist", guide=kind, hidden=16, samples=4, batch_size=64, epochs=30, init_eta=10.0),
                 data)
    first = [tr.train_step()["elbo_per_datapoint"] for _ in range(4)]
    for _ in range(50):
        tr.train_step()
    last = [tr.train_step()["elbo_per_datapoint"] for _ in range(4)]
    assert sum(last) / 4 > sum(first) / 4 + 0.2
    assert tr.diagnostics()["kl_per_datapoint"] > 0 and math.isfinite(tr.diagnostics()["q_scale"])
