"""DeviceTrace_ELBO: Pyro's Trace_ELBO estimate and gradients, with nothing read back from the device."""
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer.autoguide import AutoNormal

from pyroinv.config import Config
from pyroinv.inference.build import build_loss, build_model
from pyroinv.inference.device_elbo import DeviceTrace_ELBO
from pyroinv.model.scope import local_params


def _loss_and_grads(elbo, model, guide, params, *args, **kwargs):
    pyro.set_rng_seed(3)
    with local_params():
        loss = elbo.differentiable_loss(model, guide, *args, **kwargs)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return float(loss.detach()), grads


@pytest.mark.parametrize("inference", ["vi", "ml"])
def test_the_package_model_gives_trace_elbo_s_loss_and_gradients(inference):
    cfg = Config(hidden=8, samples=3, inference=inference, device="cpu")
    model, guide = build_model(cfg, (1, 12, 12), 4)
    loss_module = build_loss(cfg, model, guide)  # the guide as training draws it (kernels' reparameterisation)
    guide = loss_module.elbo_module.guide
    x, y = torch.rand(10, 1, 12, 12), torch.arange(10) % 4
    params = [p for p in loss_module.parameters()]
    want = _loss_and_grads(pyro.infer.Trace_ELBO(), model, guide, params, x, y, num_data=100)
    got = _loss_and_grads(DeviceTrace_ELBO(), model, guide, params, x, y, num_data=100)
    assert got[0] == pytest.approx(want[0], rel=1e-5)
    for g, w in zip(got[1], want[1]):
        assert (g is None) == (w is None)
        if g is not None:
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def _toy_model(data):
    z = pyro.sample("z", dist.Normal(0.0, 1.0))
    c = pyro.sample("c", dist.Bernoulli(0.3))  # not reparameterisable: a score-function term
    with pyro.plate("data", data.shape[0]):
        pyro.sample("obs", dist.Normal(z + c, 1.0), obs=data)


def _toy_guide(data):
    loc = pyro.param("loc", torch.tensor(0.2))
    p = pyro.param("p", torch.tensor(0.6), constraint=dist.constraints.unit_interval)
    pyro.sample("z", dist.Normal(loc, 0.5))
    pyro.sample("c", dist.Bernoulli(p))


def test_a_score_function_site_gives_trace_elbo_s_value_and_surrogate_gradient():
    pyro.clear_param_store()
    data = torch.tensor([0.5, 1.5, 1.0])
    pyro.set_rng_seed(0)
    _toy_guide(data)
    params = [pyro.param("loc").unconstrained(), pyro.param("p").unconstrained()]
    for seed in range(3):
        pyro.set_rng_seed(seed)
        want = pyro.infer.Trace_ELBO().differentiable_loss(_toy_model, _toy_guide, data)
        want_grads = torch.autograd.grad(want, params)
        pyro.set_rng_seed(seed)
        got = DeviceTrace_ELBO().differentiable_loss(_toy_model, _toy_guide, data)
        got_grads = torch.autograd.grad(got, params)
        assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-6)
        for g, w in zip(got_grads, want_grads):
            torch.testing.assert_close(g, w)


def test_an_autoguide_trains_under_svi_with_it():
    pyro.clear_param_store()
    data = torch.randn(20) + 2.0

    def model(data):
        m = pyro.sample("m", dist.Normal(0.0, 10.0))
        with pyro.plate("data", data.shape[0]):
            pyro.sample("obs", dist.Normal(m, 1.0), obs=data)

    guide = AutoNormal(model)
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.1}), DeviceTrace_ELBO())
    losses = [svi.step(data) for _ in range(200)]
    assert losses[-1] < losses[0]
    assert float(guide.median()["m"]) == pytest.approx(float(data.mean()), abs=0.3)


@pytest.mark.parametrize("inference", ["vi", "ml"])
def test_training_with_it_is_training_with_trace_elbo_bit_for_bit(monkeypatch, inference):
    """Thirty trainer steps give the same parameters, to the bit, as with Pyro's own Trace_ELBO in its place (the
    reported loss differs in rounding: a float32 sum where Pyro adds float64 numbers)."""
    import pyroinv.inference.build as build
    from tests.inference.test_train import _trainer

    def trained():
        tr = _trainer(inference=inference, batch_size=8, epochs=5)
        for _ in range(30):
            tr.train_step(sync=False)
        return tr.loss_fn.state_dict(), tr.losses()["loss"], type(tr.loss_fn.elbo.elbo_module.elbo)

    ours, our_loss, our_elbo = trained()
    monkeypatch.setattr(build, "DeviceTrace_ELBO", pyro.infer.Trace_ELBO)
    theirs, their_loss, their_elbo = trained()
    assert (our_elbo, their_elbo) == (DeviceTrace_ELBO, pyro.infer.Trace_ELBO)
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert our_loss == pytest.approx(their_loss, rel=1e-6)
