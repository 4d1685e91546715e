"""build_model says a module's own complaint in the flags that set it: the modules name their own parameters."""
import pytest

from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.inference.build import build_model
from pyroinv.model.invariance import Invariance


def test_an_invariance_error_names_its_own_parameter_and_build_model_names_the_flags():
    with pytest.raises(ConfigError, match=r"^a softplus-constrained eta needs a positive initial value, got init="):
        Invariance("rotation", init=-0.1, constraint="softplus")
    cfg = Config(eta_constraint="softplus", init_eta=-5.0).validate()
    with pytest.raises(ConfigError, match=r"^--init-eta \[-5.0\] with --eta-constraint softplus: a softplus-"):
        build_model(cfg, (1, 28, 28), 10)


def test_a_feature_maps_error_is_said_of_the_network_flag():
    cfg = Config(network="cnn", hidden=4).validate()
    with pytest.raises(ConfigError, match=r"^--network cnn needs images \(C, H, W\), but the inputs have shape \(2,\)"):
        build_model(cfg, (2,), 10)
