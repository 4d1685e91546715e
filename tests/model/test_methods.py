"""The registries of methods and networks: one object per ``--inference`` and per ``--network``, and no branching
on either name elsewhere."""
import re
from pathlib import Path

import pytest
import torch

from pyroinv.model.input_features import InputAugmentedFeatures
from pyroinv.inference.build import build_model
from pyroinv.frontends.train import train_parser
from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.model.guides import ClassCholeskyGuide, PointGuide
from pyroinv.model import objectives
from pyroinv.model.methods import METHODS, method
from pyroinv.model.networks import InvariantFeatures

PACKAGE = Path(__file__).resolve().parents[2] / "pyroinv"


def test_every_method_is_a_cli_choice_and_a_valid_config():
    choices = next(a.choices for a in train_parser()._actions if a.dest == "inference")
    assert list(choices) == list(METHODS)
    for name in METHODS:
        Config(inference=name).validate()


@pytest.mark.parametrize("name", list(METHODS))
def test_build_model_takes_prior_guide_and_features_from_the_method(name):
    m = method(name)
    torch.manual_seed(0)
    model, guide = build_model(Config(inference=name, hidden=6, samples=2), (1, 8, 8), 3)
    assert model.prior_kind == m.prior
    assert isinstance(guide, ClassCholeskyGuide if m.bayesian else PointGuide)
    assert type(model.features) is (InputAugmentedFeatures if m.transforms_on == "inputs" else InvariantFeatures)
    assert (model.width_weight > 0) == m.width_reward
    assert model.estimator == ("local" if m.bayesian else "shared")
    draws = guide.posterior_sample(4)
    assert draws.shape == ((4 if m.bayesian else 1), 3, 7)


def test_only_augerino_transforms_the_inputs():
    assert method("augerino").transforms_on == "inputs" and not InputAugmentedFeatures.warps_weights
    assert all(m.transforms_on == "weights" for n, m in METHODS.items() if n != "augerino")


def test_each_objective_says_how_it_stands_to_the_evidence():
    assert [n for n, m in METHODS.items() if m.reports_elbo] == ["vi"]
    assert method("vi").objective is objectives.ELBO and objectives.ELBO.bounds_evidence
    assert method("laplace").eta_climbs is objectives.LAPLACE and method("laplace").objective is objectives.LOG_JOINT
    assert objectives.LAPLACE.approximates_evidence and not objectives.LAPLACE.bounds_evidence
    for name in ("map", "ml", "augerino"):
        assert method(name).eta_climbs is method(name).objective and not method(name).objective.approximates_evidence


def test_unknown_method_is_one_line():
    with pytest.raises(ConfigError, match="not one of vi, laplace, map, ml, augerino"):
        method("hmc")


def test_no_module_but_the_registry_branches_on_the_method_name():
    pattern = re.compile(r"inference\s*(==|!=|in\s*\()|\[\s*cfg\.inference\s*\]")
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if p.name != "methods.py" and pattern.search(p.read_text())]
    assert offenders == []


def test_no_module_but_the_registry_branches_on_the_network_name():
    pattern = re.compile(r"network\s*(==|!=|in\s*\()\s*[\"'(]|\[\s*cfg\.network\s*\]")
    allowed = {"registry.py", "config.py", "cli.py", "networks.py", "kernels.py"}  # --depth; the activation of relu/rff
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if p.name not in allowed and pattern.search(p.read_text())]
    assert offenders == []
