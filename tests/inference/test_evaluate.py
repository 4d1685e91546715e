"""The evaluation's measures of a trained network beyond its predictive."""
import pytest
import torch

from pyroinv.config import Config
from pyroinv.inference.build import build_model
from pyroinv.inference.evaluate import inactive_units


@pytest.mark.parametrize("network", ["relu", "mlp", "cnn"])
def test_inactive_units_counts_the_units_that_no_image_switches_on(network):
    torch.manual_seed(0)
    model, _ = build_model(Config(network=network, hidden=8, samples=3, inference="map", **({"depth": 2} if network == "mlp" else {})).validate(),
                           (1, 12, 12), 4)
    x = torch.rand(20, 1, 12, 12)
    last = {"relu": lambda f: f, "mlp": lambda f: f.layers[-1], "cnn": lambda f: f.fc}[network](model.features)
    bias = last.b1 if network == "relu" else last.bias
    with torch.no_grad():
        bias.fill_(1e6)  # every unit on for every input
        assert inactive_units(model, x) == 0.0
        bias[:3] = -1e6  # three units off for every input and every transform
    assert inactive_units(model, x) == pytest.approx(3 / 8)
    assert inactive_units(model, x, batch_size=7) == pytest.approx(3 / 8)  # the union over batches


def test_cosine_features_are_never_counted_inactive():
    model, _ = build_model(Config(network="rff", hidden=8, samples=2, inference="map").validate(), (1, 12, 12), 4)
    assert inactive_units(model, torch.rand(5, 1, 12, 12)) == 0.0


def test_most_confused_lists_the_largest_off_diagonal_counts_first():
    from pyroinv.inference.evaluate import most_confused

    y = torch.tensor([6, 6, 6, 9, 9, 1, 1, 2])
    pred = torch.tensor([9, 9, 6, 6, 9, 7, 1, 2])  # 6 as 9 twice, 9 as 6 once, 1 as 7 once
    log_probs = torch.nn.functional.one_hot(pred, 10).float().log_softmax(-1)
    pairs = most_confused(log_probs, y)
    assert pairs[0] == (6, 9, 2)
    assert sorted(pairs[1:]) == [(1, 7, 1), (9, 6, 1)]
    assert most_confused(log_probs, y, top=1) == [(6, 9, 2)]
    assert most_confused(torch.nn.functional.one_hot(y, 10).float(), y) == []  # no errors, no pairs


def test_units_under_q_reads_the_dead_units_weights_at_the_prior_and_the_live_ones_where_q_put_them():
    from pyroinv.inference.evaluate import units_under_q

    torch.manual_seed(0)
    cfg = Config(hidden=8, samples=3, alpha=4.0).validate()
    model, guide = build_model(cfg, (1, 12, 12), 4)
    x = torch.rand(20, 1, 12, 12)
    with torch.no_grad():
        model.features.b1.fill_(1e6)
        model.features.b1[:3] = -1e6  # three units dead
        guide.loc_unconstrained.zero_()
        guide.loc_unconstrained[:, 3:8] = 6.0  # the live units' means: 6 = 3 prior sds
        guide.diag_unconstrained.fill_(torch.log(torch.expm1(torch.tensor(2.0))).item())  # sd 2 = the prior's
    u = units_under_q(model, guide, x, draws=4000)
    assert u["inactive_units"] == pytest.approx(3 / 8)
    assert u["units_for_99pct_power"] == pytest.approx(5 / 8)  # the five live units, each about as strong
    assert u["dead_mean_rms"] == pytest.approx(0.0, abs=0.05) and u["dead_sd_rms"] == pytest.approx(1.0, abs=0.05)
    assert u["live_mean_rms"] == pytest.approx(3.0, abs=0.05) and u["live_sd_rms"] == pytest.approx(1.0, abs=0.05)


def test_units_under_q_of_a_point_estimate_has_no_spread():
    from pyroinv.inference.evaluate import units_under_q

    model, guide = build_model(Config(hidden=8, samples=2, inference="map").validate(), (1, 12, 12), 4)
    with torch.no_grad():
        model.features.b1.fill_(1e6)  # every unit on
    u = units_under_q(model, guide, torch.rand(5, 1, 12, 12))
    assert u["live_sd_rms"] == 0.0 and u["dead_mean_rms"] is None and u["dead_sd_rms"] is None


def test_the_power_share_counts_the_units_shrunk_towards_zero_that_are_still_on():
    from pyroinv.inference.evaluate import unit_activity, units_under_q

    torch.manual_seed(0)
    model, guide = build_model(Config(hidden=8, samples=2, inference="map").validate(), (1, 12, 12), 4)
    x = torch.rand(10, 1, 12, 12)
    with torch.no_grad():
        model.features.W1.zero_()
        model.features.b1.fill_(1.0)
        model.features.b1[:6] = 1e-3  # six units on everywhere, at a thousandth of the others' size
    active, power = unit_activity(model, x, batch_size=3)
    assert bool(active.all()) and torch.allclose(power[6:], torch.ones(2)) and torch.allclose(power[:6], torch.full((6,), 1e-6))
    u = units_under_q(model, guide, x)
    assert u["inactive_units"] == 0.0 and u["units_for_99pct_power"] == pytest.approx(2 / 8)
