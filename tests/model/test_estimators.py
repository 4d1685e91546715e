"""The ``local`` (per-example draw) and ``shared`` (per-batch draw) estimators of the same ELBO."""
from __future__ import annotations

import math

import pyro
import pytest
import torch

from pyroinv.inference.build import build_elbo, build_model
from pyroinv.config import Config
from pyroinv.inference.estimator_check import compare_estimators
from pyroinv.model.estimators import DRAWS_PLATE, num_draws
from pyroinv.model.kernels import scaled_noise as _scale
from pyroinv.model.bnn import mc_log_predictive


def _cfg(**kw) -> Config:
    base = dict(hidden=24, samples=4, init_eta=40.0, device="cpu", w1_init_scale=0.3)
    return Config(**{**base, **kw}).validate()


def _batch(n: int = 24, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 12, 12, generator=g), torch.randint(0, 4, (n,), generator=g)


@pytest.mark.slow
@pytest.mark.parametrize("average", ["probs", "logits"])
@pytest.mark.parametrize("elbo", ["trace", "closed-form"])
def test_both_estimators_have_the_same_mean(average, elbo):
    x, y = _batch()
    res = compare_estimators(_cfg(average=average, elbo=elbo), x, y, num_data=600, num_classes=4, repeats=400,
                             mu_scale=0.5)
    a, b = res["local"], res["shared"]
    se = math.hypot(a["loss_se"], b["loss_se"])
    assert abs(a["loss_mean"] - b["loss_mean"]) < 4 * se, res
    # and the comparison is not vacuous: the Monte-Carlo error is small against the loss itself
    assert se < 0.02 * abs(a["loss_mean"])


@pytest.mark.parametrize("average", ["probs", "logits"])
def test_local_estimator_has_lower_gradient_variance(average):
    x, y = _batch(32)
    res = compare_estimators(_cfg(average=average), x, y, num_data=600, num_classes=4, repeats=64)
    ratio = res["variance_ratio_shared_over_local"]
    assert ratio["mu"] > 2 and ratio["eta"] > 1 and ratio["W1"] > 1, ratio


def test_local_draws_one_W2_per_example_in_a_scaled_plate():
    x, y = _batch(6)
    model, guide = build_model(_cfg(), (1, 12, 12), 4)
    tr = pyro.poutine.trace(guide).get_trace(x, y, num_data=60)
    site = tr.nodes["W2"]
    assert site["value"].shape == (6, 4, 25)
    assert site["scale"] == pytest.approx(1 / 6)
    assert DRAWS_PLATE in {f.name for f in site["cond_indep_stack"]}
    # the draws differ from example to example
    assert (site["value"][0] - site["value"][1]).abs().max() > 0.1
    # the model's likelihood uses draw b for example b
    model_tr = pyro.poutine.trace(pyro.poutine.replay(model, trace=tr)).get_trace(x, y, num_data=60)
    W2 = site["value"]
    T = model.sample_transforms()
    feats = model.features(x, T)
    for b in range(3):
        one = mc_log_predictive(feats[:, b:b + 1], W2[b])
        both = mc_log_predictive(feats, W2, paired=True)[b:b + 1]
        torch.testing.assert_close(one, both)
    assert model_tr.nodes["y"]["fn"].batch_shape == (6,)


def test_shared_estimator_draws_once_and_point_guides_ignore_the_estimator():
    x, y = _batch(6)
    _, guide = build_model(_cfg(estimator="shared"), (1, 12, 12), 4)
    assert pyro.poutine.trace(guide).get_trace(x, y, num_data=60).nodes["W2"]["value"].shape == (4, 25)
    model, guide = build_model(_cfg(inference="ml"), (1, 12, 12), 4)
    assert model.estimator == "shared"
    loss = build_elbo(_cfg(inference="ml"))(model, guide)(x, y, num_data=60)
    assert torch.isfinite(loss)
    assert num_draws("local", 7) == 7 and num_draws("shared", 7) == 1
    with pytest.raises(ValueError, match="unknown estimator"):
        num_draws("per-pixel", 3)


def test_closed_form_kl_of_the_per_example_draws_is_the_kl():
    """Under TraceMeanField_ELBO the W2 site's term is KL(q || p) exactly, whatever the number of draws."""
    x, y = _batch(5)
    cfg = _cfg(elbo="closed-form")
    model, guide = build_model(cfg, (1, 12, 12), 4)
    with torch.no_grad():
        guide.loc = torch.randn(4, 25)
    kl = torch.distributions.kl_divergence(guide.distribution(), model.prior()).sum()
    # the likelihood term alone, under the same draws: replay the guide trace through the model
    elbo = build_elbo(cfg)
    torch.manual_seed(3)
    loss = elbo.differentiable_loss(model, guide, x, y, num_data=50)
    torch.manual_seed(3)
    guide_tr = pyro.poutine.trace(guide).get_trace(x, y, num_data=50)
    model_tr = pyro.poutine.trace(pyro.poutine.replay(model, trace=guide_tr)).get_trace(x, y, num_data=50)
    model_tr.compute_log_prob()
    loglik = model_tr.nodes["y"]["log_prob_sum"]  # already scaled by N / M = 50 / 5
    torch.testing.assert_close(loss, kl - loglik, rtol=1e-5, atol=1e-3)


def test_many_draws_per_class_are_the_same_product():
    L = torch.randn(3, 5, 5).tril()
    eps = torch.randn(7, 3, 5)
    torch.testing.assert_close(_scale(L, eps), (L @ eps.unsqueeze(-1)).squeeze(-1))
    torch.testing.assert_close(_scale(L, eps[0]), (L @ eps[0].unsqueeze(-1)).squeeze(-1))


def test_logit_average_is_the_softmax_of_the_mean_feature():
    f = torch.randn(6, 3, 9)
    W2 = torch.randn(4, 9)
    expected = torch.log_softmax(f.mean(0) @ W2.T, -1)
    torch.testing.assert_close(mc_log_predictive(f, W2, "logits"), expected)
    W2s = torch.randn(2, 4, 9)  # L draws: probabilities averaged over the draws
    expected = torch.logsumexp(torch.log_softmax(f.mean(0) @ W2s.transpose(1, 2), -1), 0) - math.log(2)
    torch.testing.assert_close(mc_log_predictive(f, W2s, "logits"), expected)
    with pytest.raises(ValueError, match="unknown average"):
        mc_log_predictive(f, W2, "median")
