"""pyroinv.InvariantClassifier as a user holds it: their tensors, arrays, Dataset or DataLoader, their body with and
without a leading fully connected layer, save and load, checkpoints, and one-line errors for bad input."""
import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

import pyroinv
from pyroinv.data import load_dataset
from pyroinv.errors import ConfigError, DataError
from pyroinv.model.body import BodyFeatures

TINY = dict(samples=4, batch_size=64)


@pytest.fixture(scope="module")
def rot(cache_dir, mnist):
    split = load_dataset("mnist-rot", cache_dir=cache_dir, train_size=256, test_size=100, seed=0)
    return split.tensors("train") + split.tensors("test")


def mlp_body(hidden: int = 24) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 16), nn.ReLU())


def cnn_body() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 5, padding=2), nn.ReLU(), nn.MaxPool2d(4), nn.Flatten(),
                         nn.Linear(4 * 7 * 7, 16), nn.ReLU())


@pytest.mark.parametrize("form", ["tensors", "numpy", "dataset", "loader"])
def test_fit_takes_tensors_arrays_a_dataset_and_a_loader_alike(rot, form):
    x, y, x_test, _ = rot
    args = {"tensors": (x, y), "numpy": (x.numpy(), y.numpy()), "dataset": (TensorDataset(x, y),),
            "loader": (DataLoader(TensorDataset(x, y), batch_size=50, shuffle=True),)}[form]
    clf = pyroinv.InvariantClassifier(num_classes=10, hidden=16, **TINY).fit(*args, epochs=1)
    assert clf.trainer.num_data == 256 and clf.num_classes == 10
    probs = clf.predict_proba(x_test)
    assert probs.shape == (100, 10) and torch.allclose(probs.sum(1), torch.ones(100), atol=1e-5)
    assert clf.predict(x_test).shape == (100,)
    assert set(clf.invariance) == {"rotation_deg"} and clf.invariance["rotation_deg"] > 0


def test_the_same_data_in_any_form_trains_the_same_classifier(rot):
    x, y, x_test, _ = rot
    a = pyroinv.InvariantClassifier(hidden=16, **TINY).fit(x, y, epochs=1)
    b = pyroinv.InvariantClassifier(hidden=16, **TINY).fit(DataLoader(TensorDataset(x, y), batch_size=32), epochs=1)
    assert a.invariance == b.invariance
    assert torch.equal(a.model.features.W1, b.model.features.W1)


def test_the_paper_network_through_the_class_is_the_run_of_its_config(rot):
    """The class on the paper's network gives the Trainer of the same Config the same numbers (one path)."""
    from pyroinv.config import Config
    from pyroinv.data.splits import Split
    from pyroinv.inference.train import Trainer

    x, y, _, _ = rot
    clf = pyroinv.InvariantClassifier(hidden=16, seed=3, **TINY).fit(x, y, epochs=2)
    split = Split("data", x.numpy(), y.numpy(), x.numpy()[:0], y.numpy()[:0], num_classes=10)
    trainer = Trainer(Config(hidden=16, seed=3, epochs=2, **TINY), split)
    for _ in trainer.steps():
        pass
    assert torch.equal(trainer.model.invariance.eta, clf.model.invariance.eta)


def test_a_body_with_a_leading_linear_layer_takes_the_transforms_on_its_weights(rot):
    x, y, _, _ = rot
    body = mlp_body()
    pyroinv.InvariantClassifier(body, **TINY).fit(x, y, epochs=1)
    clf = pyroinv.InvariantClassifier(body, **TINY).fit(x, y, epochs=1)  # a body may be fitted again
    features = clf.model.features
    assert isinstance(features, BodyFeatures) and features.path == "weights"
    assert features.first.W1 is body[1].weight  # the user's own layer is trained, not a copy
    assert clf.model.features.num_features == 17


def test_the_weight_path_and_the_input_path_of_a_body_are_one_function():
    """``<w o T, x> = <w, x o T^-1>``: the weights warped by T give the features of the inputs resampled by T^-1, up to
    bilinear interpolation (on smooth images, 5% of the features' scale; the same T on both is far off). T and T^-1
    are equally likely under p_eta (eps ~ U[-1, 1]), so the averaged network is the same function."""
    import math

    import torch.nn.functional as F
    from pyroinv.model.invariance import Invariance

    torch.manual_seed(0)
    body = mlp_body()
    inv = Invariance("rotation", init=math.radians(60), learn=False, image_size=28)
    weights = BodyFeatures(body, (1, 28, 28), inv, path="weights", blur_sigma=0.0)
    inputs = BodyFeatures(body, (1, 28, 28), inv, path="inputs")
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 28), torch.linspace(-1, 1, 28), indexing="ij")
    x = F.interpolate(torch.randn(5, 1, 7, 7), size=(28, 28), mode="bicubic") * (1 - xx ** 2 - yy ** 2).clamp(min=0)
    T = inv.sample_transforms(3)
    a, b = weights(x, T), inputs(x, torch.linalg.inv(T))
    scale = a.abs().max()
    assert (a - b).abs().max() < 0.05 * scale
    assert (a - inputs(x, T)).abs().max() > 0.2 * scale  # the test can tell a wrong direction


def test_a_body_without_a_leading_linear_layer_transforms_its_inputs(rot):
    x, y, x_test, _ = rot
    clf = pyroinv.InvariantClassifier(cnn_body(), **TINY).fit(x, y, epochs=1)
    assert clf.model.features.path == "inputs"
    assert clf.predict(x_test).shape == (100,)
    with pytest.raises(ConfigError, match="transforms_on='weights' needs a body that starts with nn.Flatten"):
        pyroinv.InvariantClassifier(cnn_body(), transforms_on="weights", **TINY).fit(x, y, epochs=1)
    with pytest.raises(ConfigError, match="--w1-standardize applies to the package's relu and mlp networks, not your"):
        pyroinv.InvariantClassifier(cnn_body(), w1_standardize=True, **TINY).fit(x, y, epochs=1)


@pytest.mark.slow
def test_a_fitted_classifier_learns_the_rotation_of_rotated_digits(cache_dir, mnist):
    """Not only runs: 1,000 fully rotated digits, the paper's network at small size, learn a wide rotation and
    predict far above chance."""
    split = load_dataset("mnist-rot", cache_dir=cache_dir, train_size=1000, test_size=500, seed=0)
    (x, y), (xt, yt) = split.tensors("train"), split.tensors("test")
    clf = pyroinv.InvariantClassifier(hidden=128, samples=8, init_eta=10.0).fit(x, y, epochs=15)
    assert clf.invariance["rotation_deg"] > 60
    assert clf.evaluate(xt, yt)["accuracy"] > 0.4  # chance: 0.1


def test_save_and_load_give_the_same_predictions(rot, tmp_path):
    x, y, x_test, _ = rot
    clf = pyroinv.InvariantClassifier(mlp_body(), **TINY).fit(x, y, epochs=1)
    clf.save(tmp_path / "clf.pt")
    again = pyroinv.InvariantClassifier.load(tmp_path / "clf.pt", body=mlp_body())
    assert again.invariance == clf.invariance and again.config == clf.config
    torch.manual_seed(1)
    a = clf.predict_proba(x_test)
    torch.manual_seed(1)
    b = again.predict_proba(x_test)
    assert torch.allclose(a, b)
    with pytest.raises(ConfigError, match="fitted with your own body .*pass body="):
        pyroinv.InvariantClassifier.load(tmp_path / "clf.pt")
    with pytest.raises(ConfigError, match="does not match the one saved"):
        pyroinv.InvariantClassifier.load(tmp_path / "clf.pt", body=mlp_body(hidden=8))
    paper = pyroinv.InvariantClassifier(hidden=16, **TINY).fit(x, y, epochs=1)
    paper.save(tmp_path / "paper.pt")
    assert pyroinv.InvariantClassifier.load(tmp_path / "paper.pt").invariance == paper.invariance


def test_a_checkpoint_resumes_a_stopped_fit_to_the_same_end(rot, tmp_path):
    x, y, _, _ = rot
    whole = pyroinv.InvariantClassifier(hidden=16, **TINY).fit(x, y, epochs=2)
    path = tmp_path / "fit.ckpt"
    cut = pyroinv.InvariantClassifier(hidden=16, **TINY).fit(x, y, epochs=2, checkpoint=path, max_steps=3)
    assert cut.trainer.step == 3 and path.exists()
    resumed = pyroinv.InvariantClassifier(hidden=16, **TINY).fit(x, y, epochs=2, checkpoint=path)
    assert resumed.trainer.step == whole.trainer.step
    assert torch.equal(resumed.model.invariance.eta, whole.model.invariance.eta)
    with pytest.raises(ConfigError, match="holds a fit with other settings or data .*hidden"):
        pyroinv.InvariantClassifier(hidden=8, **TINY).fit(x, y, epochs=2, checkpoint=path)


def test_a_validation_set_is_scored_and_every_method_fits(rot):
    x, y, x_test, y_test = rot
    for inference in ("vi", "laplace", "map", "ml", "augerino"):
        clf = pyroinv.InvariantClassifier(cnn_body(), inference=inference, **TINY)
        clf.fit(x, y, epochs=1, valid=(x_test, y_test))
        assert set(clf.valid_metrics) == {"accuracy", "nll"}, inference
    assert len(clf.history) >= 1 and "eta_human" in clf.history[-1]


def test_inference_data_and_the_pyro_model_and_guide(rot):
    import pyro
    from pyro.infer import Predictive

    x, y, x_test, y_test = rot
    clf = pyroinv.InvariantClassifier(hidden=16, export_draws=20, **TINY).fit(x, y, epochs=1)
    idata = clf.to_inference_data(x_test, y_test)
    assert idata.posterior.sizes["draw"] == 20 and "log_likelihood" in idata.groups()
    with pyro.settings.context(module_local_params=True):
        pred = Predictive(clf.model, guide=clf.guide, num_samples=3, return_sites=["y"])(x_test)
    assert pred["y"].shape == (3, 100)
    assert clf.guide.median().shape == (10, 17)


def test_hidden_units_read_a_users_body_and_q(rot):
    """hidden_units counts the body's last layer on the given inputs and reads q of W2 against the prior; a unit
    whose features are zeroed by hand is counted off."""
    x, y, x_test, _ = rot
    clf = pyroinv.InvariantClassifier(mlp_body(), **TINY).fit(x, y, epochs=1)
    units = clf.hidden_units(x_test, draws=64)
    assert set(units) >= {"inactive_units", "units_for_99pct_power", "live_mean_rms", "live_sd_rms"}
    assert 0.0 <= units["inactive_units"] < 1.0 and 0.0 < units["units_for_99pct_power"] <= 1.0
    assert 0.5 < units["live_sd_rms"] < 1.5  # q starts at the prior and one epoch moves it little
    last = [m for m in clf.model.features.modules() if isinstance(m, nn.Linear)][-1]
    with torch.no_grad():
        last.weight[:4] = 0.0
        last.bias[:4] = 1.0  # ReLU(1) = 1 on every input: 4 of the 16 units on
        on = clf.hidden_units(x_test)["inactive_units"]
        last.bias[:4] = -1.0  # ReLU(-1) = 0 on every input: the same 4 off
        off = clf.hidden_units(x_test)["inactive_units"]
    assert off - on == pytest.approx(4 / 16)
    with pytest.raises(ConfigError, match="at least 2 draws"):
        clf.hidden_units(x_test, draws=1)


@pytest.mark.parametrize("make, message", [
    (lambda x, y: (x[:, 0, :, :20], y), "needs square images but these are 28 x 20"),
    (lambda x, y: (x, y[:-1]), "x has 256 examples but 255 labels"),
    (lambda x, y: (x, y.float()), "labels must be integers"),
    (lambda x, y: (x * 255, y), "scale them to \\[0, 1\\] or store uint8"),
    (lambda x, y: (x.permute(0, 2, 3, 1), y), "looks channels-last"),
    (lambda x, y: (x.reshape(256, -1), y), "expected images"),
    (lambda x, y: ([1, 2, 3], y), "give a torch tensor, a numpy array"),
    (lambda x, y: (x, y + 1), "never appear"),
])
def test_bad_input_is_one_line_naming_the_fix(rot, make, message):
    x, y, _, _ = rot
    with pytest.raises((DataError, ConfigError), match=message) as err:
        pyroinv.InvariantClassifier(hidden=16, **TINY).fit(*make(x, y), epochs=1)
    assert "\n" not in str(err.value)


def test_bad_settings_and_bodies_are_one_line(rot):
    x, y, x_test, _ = rot
    with pytest.raises(ConfigError, match="unknown setting 'hiden'"):
        pyroinv.InvariantClassifier(hiden=3)
    with pytest.raises(ConfigError, match="train_size is a setting of the command line's data sets"):
        pyroinv.InvariantClassifier(train_size=3)
    with pytest.raises(ConfigError, match="--inference 'bayes' is not one of"):
        pyroinv.InvariantClassifier(inference="bayes")
    with pytest.raises(ConfigError, match="body must be a torch.nn.Module"):
        pyroinv.InvariantClassifier("cnn")
    with pytest.raises(ConfigError, match="the body cannot take inputs of shape \\(B, 1, 28, 28\\)"):
        pyroinv.InvariantClassifier(nn.Linear(10, 3), **TINY).fit(x, y, epochs=1)
    with pytest.raises(ConfigError, match="the body must return features \\(B, F\\)"):
        pyroinv.InvariantClassifier(nn.Conv2d(1, 2, 3), **TINY).fit(x, y, epochs=1)
    with pytest.raises(ConfigError, match="needs a fitted classifier"):
        pyroinv.InvariantClassifier().predict(x_test)
    clf = pyroinv.InvariantClassifier(hidden=16, **TINY).fit(x, y, epochs=1)
    with pytest.raises(DataError, match="fitted on \\(1, 28, 28\\)"):
        clf.predict(np.zeros((2, 1, 14, 14), dtype=np.float32))
