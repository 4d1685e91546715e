"""What a Pyro user writes with the package's model and guide: Pyro's own SVI and optimisers, every ELBO (the JIT
ones too), Predictive, and no Pyro setting changed by ``import pyroinv``."""
import json
import math
import subprocess
import sys
import time
import warnings

import pyro
import pytest
import torch
from pyro.infer import (SVI, JitTrace_ELBO, JitTraceMeanField_ELBO, Predictive, RenyiELBO, Trace_ELBO,
                        TraceMeanField_ELBO)

from pyroinv.config import Config
from pyroinv.data import load_dataset
from pyroinv.inference.build import build_loss, build_model

TINY = dict(hidden=16, samples=4, init_eta=10.0, train_size=128, test_size=500, dataset="mnist-rot")

#: a textbook Pyro model (Bayesian linear regression, global pyro.param store) trained with SVI before and after
#: ``import pyroinv`` in one process; prints both runs' losses, parameters, settings and parameter names
TEXTBOOK = """
import json, torch, pyro, pyro.distributions as dist
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import AutoNormal
def model(x, y=None):
    w = pyro.sample("w", dist.Normal(0., 1.).expand([3]).to_event(1))
    b = pyro.param("b", torch.tensor(0.))
    with pyro.plate("data", x.shape[0]):
        pyro.sample("y", dist.Normal(x @ w + b, 0.5), obs=y)
def train():
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    x = torch.randn(100, 3); y = x @ torch.tensor([1., -2., .5]) + 0.3 + 0.5 * torch.randn(100)
    svi = SVI(model, AutoNormal(model), pyro.optim.Adam({"lr": 0.05}), Trace_ELBO())
    losses = [svi.step(x, y) for _ in range(60)]
    return {"losses": losses, "b": pyro.param("b").item(), "settings": pyro.settings.get(),
            "names": sorted(pyro.get_param_store().keys())}
without = train()
import pyroinv  # noqa: F401,E402
print(json.dumps({"without": without, "with": train()}))
"""


@pytest.mark.slow
def test_importing_pyroinv_changes_no_pyro_setting_and_a_textbook_model_trains_the_same():
    out = subprocess.run([sys.executable, "-c", TEXTBOOK], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout.strip().splitlines()[-1])
    assert runs["with"] == runs["without"]  # the same losses, parameters, settings and parameter names
    assert runs["with"]["settings"]["module_local_params"] is False and "b" in runs["with"]["names"]
    assert runs["with"]["losses"][-1] < runs["with"]["losses"][0]


@pytest.fixture(scope="module")
def data(cache_dir, mnist):
    split = load_dataset(TINY["dataset"], cache_dir=cache_dir, train_size=TINY["train_size"],
                         test_size=TINY["test_size"], seed=0)
    return split.tensors("train", "cpu") + split.tensors("test", "cpu")


def _fresh(**kw):
    cfg = Config(**{**TINY, **kw}).validate()
    pyro.set_rng_seed(0)
    return (cfg, *build_model(cfg, (1, 28, 28), 10))


def _mean_loss(loss, n=40) -> tuple[float, float]:
    """Mean and standard error of ``n`` evaluations of a stochastic loss (no gradients)."""
    with torch.no_grad():
        values = torch.tensor([float(loss()) for _ in range(n)])
    return values.mean().item(), values.std().item() / math.sqrt(n)


ELBOS = {"Trace_ELBO": Trace_ELBO, "TraceMeanField_ELBO": TraceMeanField_ELBO, "JitTrace_ELBO": JitTrace_ELBO,
         "JitTraceMeanField_ELBO": JitTraceMeanField_ELBO}


@pytest.mark.parametrize("name", list(ELBOS))
def test_pyro_elbos_give_the_packages_elbo_and_svi_with_pyro_optim_raises_it(name, data):
    """Every ELBO gives the package's value; SVI trains under the plain and the JIT sampled ELBO (the closed-form
    ones share those code paths in the SVI step and are timed in docs/pyro.md)."""
    x, y, _, _ = data
    N = x.shape[0]
    cfg, model, guide = _fresh()
    package = build_loss(cfg, model, guide)
    ours, ours_se = _mean_loss(lambda: package(x, y, num_data=N))
    elbo = ELBOS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the JIT ELBOs' tracer warnings (Python numbers taken from shapes)
        theirs, theirs_se = _mean_loss(lambda: elbo.loss(model, guide, x, y, num_data=N))
        assert abs(ours - theirs) < 4 * math.hypot(ours_se, theirs_se) + 1e-3 * abs(ours)  # the same -ELBO
        if "MeanField" in name:
            return
        svi = SVI(model, guide, pyro.optim.ClippedAdam({"lr": 0.02}) if "Jit" in name
                  else pyro.optim.Adam({"lr": 0.02}), elbo)
        for _ in range(25):
            svi.step(x, y, num_data=N)
    after, after_se = _mean_loss(lambda: package(x, y, num_data=N))
    assert after < ours - 4 * math.hypot(ours_se, after_se)  # a few SVI steps raised the ELBO
    assert set(pyro.get_param_store().keys()) >= {"InvariantBNN.features.W1",
                                                  "InvariantBNN.features.invariance.eta_active",
                                                  "ClassCholeskyGuide.loc"}
    # the store holds the module's own
    assert model.features.W1 is pyro.get_param_store()._params["InvariantBNN.features.W1"]


def test_renyi_elbo_bounds_at_least_as_tightly_and_trains(data):
    x, y, _, _ = data
    N = x.shape[0]
    cfg, model, guide = _fresh()
    package = build_loss(cfg, model, guide)
    elbo, elbo_se = _mean_loss(lambda: package(x, y, num_data=N))
    renyi = RenyiELBO(alpha=0, num_particles=2)
    iwae, iwae_se = _mean_loss(lambda: renyi.loss(model, guide, x, y, num_data=N))
    assert iwae < elbo + 4 * math.hypot(elbo_se, iwae_se)  # alpha = 0 with 2 particles: an IWAE bound, >= the ELBO
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), renyi)
    for _ in range(25):
        svi.step(x, y, num_data=N)
    after, after_se = _mean_loss(lambda: package(x, y, num_data=N))
    assert after < elbo - 4 * math.hypot(elbo_se, after_se)


def test_predictive_draws_one_w2_per_posterior_sample_in_bounded_memory(data):
    _, _, x_test, y_test = data
    cfg, model, guide = _fresh()
    t0 = time.perf_counter()
    pred = Predictive(model, guide=guide, num_samples=16, return_sites=["y", "W2"])(x_test)
    assert time.perf_counter() - t0 < 60
    assert pred["W2"].shape == (16, 10, model.features.num_features)  # not one W2 per test image
    assert pred["y"].shape == (16, x_test.shape[0])
    # the labels it samples follow the model's predictive: the same as the package's evaluation, in distribution
    from pyroinv.inference.evaluate import posterior_predictive

    probs = posterior_predictive(model, guide, x_test, y_test, draws=16).log_probs.exp()
    agree = (pred["y"] == probs.argmax(1)).float().mean().item()
    assert agree > 0.5 * probs.max(1).values.mean().item()


def test_the_packages_training_does_not_touch_the_global_store(data, cache_dir):
    from pyroinv.inference.train import Trainer

    pyro.clear_param_store()
    _, model, guide = _fresh()
    Trace_ELBO().loss(model, guide, *data[:2], num_data=data[0].shape[0])  # a user's call: global names appear
    names = set(pyro.get_param_store().keys())
    before = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}
    split = load_dataset(TINY["dataset"], cache_dir=cache_dir, train_size=64, test_size=20, seed=0)
    Trainer(Config(**{**TINY, "train_size": 64, "test_size": 20}), split).train_step()  # the package's own call
    assert set(pyro.get_param_store().keys()) == names
    assert all(torch.equal(before[k], v.detach()) for k, v in pyro.get_param_store().items())


def test_a_users_own_loc_in_the_store_is_not_taken_by_a_loaded_run(data):
    """A user's Pyro model with ``pyro.param("loc", ...)`` trained first: the package's model and guide keep their
    own parameters under the user's SVI and Predictive (Pyro names them ``ClassCholeskyGuide.loc``, ...)."""
    x, y, x_test, _ = data
    N = x.shape[0]

    def users_model():
        loc = pyro.param("loc", torch.tensor(0.5))
        pyro.sample("z", pyro.distributions.Normal(loc, 1.0), obs=torch.tensor(1.0))

    svi = SVI(users_model, lambda: None, pyro.optim.Adam({"lr": 0.1}), Trace_ELBO())
    for _ in range(3):
        svi.step()
    users_loc = pyro.param("loc").detach().clone()
    _, model, guide = _fresh()
    own = guide.loc.detach().clone()
    pred = Predictive(model, guide=guide, num_samples=2, return_sites=["W2"])(x_test[:10])
    assert pred["W2"].shape == (2, 10, model.features.num_features)
    Trace_ELBO().loss(model, guide, x, y, num_data=N)
    assert torch.equal(pyro.param("loc").detach(), users_loc)  # the user's parameter is untouched ...
    assert torch.equal(pyro.param("ClassCholeskyGuide.loc").detach(), own)  # ... and the guide reads its own
