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
