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
