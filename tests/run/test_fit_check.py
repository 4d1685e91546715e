"""The warning of a run that fits its training data no better than chance."""
import math

import pytest

from pyroinv.run.fit_check import CHANCE_FRACTION, chance_fit_warning


def test_a_fit_well_above_chance_gets_no_warning():
    assert chance_fit_warning(-0.25, 10, "rotation ±172.9°") is None
    assert chance_fit_warning(-(CHANCE_FRACTION * math.log(10)) + 1e-6, 10, None) is None


@pytest.mark.parametrize("loglik", [-2.4877, -math.log(10), -CHANCE_FRACTION * math.log(10)])
def test_a_fit_at_chance_names_the_numbers_and_the_learned_invariance(loglik):
    msg = chance_fit_warning(loglik, 10, "translation ±18.0 px y")
    assert msg is not None and "no better than chance" in msg
    assert f"training NLL {-loglik:.3f}" in msg and "log 10 = 2.303" in msg
    assert "translation ±18.0 px y" in msg and "--eta-warmup" in msg
    assert "\n" not in msg


def test_without_a_learned_invariance_the_advice_is_to_train_longer():
    msg = chance_fit_warning(-0.69, 2, None)
    assert msg is not None and "log 2 = 0.693" in msg and "--epochs" in msg and "--eta-warmup" not in msg


@pytest.mark.parametrize("loglik, classes", [(None, 10), (float("nan"), 10), (-5.0, 1)])
def test_nothing_to_judge_gives_no_warning(loglik, classes):
    assert chance_fit_warning(loglik, classes, "rotation ±10.0°") is None
