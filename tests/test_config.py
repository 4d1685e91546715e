"""Config validates every choice once, against the choices the owning module declares."""
import pytest

from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.model.methods import METHODS
from pyroinv.model.bnn import AVERAGES
from pyroinv.model.estimators import ELBOS, ESTIMATORS
from pyroinv.model.invariance import CONSTRAINTS
from pyroinv.model.lie import PRESETS, SAMPLINGS
from pyroinv.model.registry import NETWORKS

OWNED = {"inference": tuple(METHODS), "average": AVERAGES, "elbo": ELBOS, "estimator": ESTIMATORS,
         "eta_constraint": CONSTRAINTS, "sampling": SAMPLINGS, "network": tuple(NETWORKS), "invariance": tuple(PRESETS)}


@pytest.mark.parametrize("name", list(OWNED))
def test_each_choice_accepts_its_owners_values_and_names_the_flag_otherwise(name):
    for value in OWNED[name]:
        Config(**{name: value}).validate()
    with pytest.raises(ConfigError) as err:
        Config(**{name: "nonsense"}).validate()
    flag = "--" + name.replace("_", "-")
    assert str(err.value) == f"{flag} 'nonsense' is not one of {', '.join(OWNED[name])}"


def test_unset_w1_standardize_is_on_where_it_applies_and_an_explicit_value_is_kept():
    """Unset, weight standardisation is on for the package's relu and mlp networks on images, and off for cnn and
    rff, for coordinate inputs, under --laplace-layers all and for a user's own body; True or False is kept."""
    on = Config()
    assert on.w1_standardize is None and on.standardizes_w1() and Config(network="mlp").standardizes_w1()
    assert not Config(network="cnn").standardizes_w1() and not Config(network="rff").standardizes_w1()
    assert not on.standardizes_w1(images=False) and not on.standardizes_w1(own_body=True)
    assert not Config(inference="laplace", laplace_layers="all").standardizes_w1()
    assert not Config(w1_standardize=False).standardizes_w1()
    assert Config(w1_standardize=True).standardizes_w1(own_body=True)  # refused where it is built (build_model)


def test_a_saved_config_written_before_a_setting_existed_takes_the_value_it_ran_with():
    """config.json files written before --w1-warmup and --w1-standardize existed ran without them (0 and False, not
    today's unset defaults); a setting added with an unchanged default takes its default."""
    saved = {k: v for k, v in Config().to_dict().items() if k not in ("w1_warmup", "w1_standardize", "jacobian")}
    old = Config.from_dict(saved)
    assert (old.w1_warmup, old.w1_standardize, old.jacobian) == (0, False, False)
    assert Config(w1_warmup=0, w1_standardize=False).differences(saved) == []
    assert Config().differences(saved) == ["w1_standardize", "w1_warmup"]
    assert Config.from_dict(Config().to_dict()) == Config()  # written with them: kept as written
