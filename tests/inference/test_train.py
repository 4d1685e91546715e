"""The trainer's optimiser: Adam's parameter groups and the regime diagnostics."""
import pytest
import torch

from pyroinv.config import Config
from pyroinv.data.splits import Split
from pyroinv.inference.train import Trainer


def _data() -> Split:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(40, 1, 12, 12, generator=g)
    y = torch.arange(40) % 4
    return Split("toy", x[:32].numpy(), y[:32].numpy(), x[32:].numpy(), y[32:].numpy(), num_classes=4)


def _trainer(**kw) -> Trainer:
    cfg = Config(**{"hidden": 8, "samples": 2, "epochs": 1, "batch_size": 16, "device": "cpu", **kw})
    return Trainer(cfg, _data())


@pytest.mark.parametrize("inference", ["vi", "ml"])
def test_mean_and_eta_take_their_own_rates(inference):
    tr = _trainer(inference=inference, lr=1e-3, mean_lr=0.05, eta_lr=0.02, w1_warmup=0)
    groups = tr.optimizer.param_groups
    assert [g["lr"] for g in groups] == [1e-3, 0.05, 0.02]
    mean = tr.guide.mean_parameters()[0]
    assert any(p is mean for p in groups[1]["params"])
    assert any(p is tr.model.features.W1 for p in groups[0]["params"])
    eta = next(tr.model.invariance.parameters())
    assert [p is eta for p in groups[2]["params"]] == [True]
    n = sum(p.numel() for g in groups for p in g["params"])
    assert n == sum(p.numel() for p in tr.loss_fn.parameters())  # every parameter in exactly one group
    # the cosine schedule anneals every group from its own rate
    tr.train_step()
    assert all(g["lr"] < g["initial_lr"] for g in groups)
    assert groups[1]["lr"] / groups[0]["lr"] == pytest.approx(50) and groups[2]["lr"] / groups[0]["lr"] == pytest.approx(20)


def test_one_rate_for_every_parameter_when_none():
    tr = _trainer(lr=2e-3, mean_lr=None, eta_lr=None)
    assert {g["lr"] for g in tr.optimizer.param_groups} == {2e-3}


def test_fixed_eta_has_no_group_and_diagnostics_report_the_regime():
    tr = _trainer(fixed_eta=30.0, w1_warmup=0)
    assert len(tr.optimizer.param_groups) == 2
    d = tr.diagnostics()
    assert d["q_scale"] == pytest.approx(1.0, rel=1e-5)  # the paper's L = I
    assert d["mu_norm"] == 0.0 and d["kl_per_datapoint"] == pytest.approx(0.0, abs=1e-6)
    assert 0.0 <= d["inactive_units"] <= 1.0
    d = _trainer(inference="map").diagnostics()
    assert set(d) == {"mu_norm", "inactive_units"}


def test_the_network_weights_take_their_own_rate_and_the_unit_probe_leaves_the_draws_alone():
    tr = _trainer(lr=1e-3, mean_lr=0.05, eta_lr=0.02, w1_lr=2e-4)
    groups = tr.optimizer.param_groups
    assert [g["lr"] for g in groups] == [1e-3, 0.05, 0.02, 2e-4]
    f = tr.model.features  # standardised by default: W1 is V, and g1 is each unit's gain
    assert {id(p) for p in groups[3]["params"]} == {id(f.W1), id(f.b1), id(f.g1)}
    assert not any(p is tr.model.features.W1 for p in groups[0]["params"])
    n = sum(p.numel() for g in groups for p in g["params"])
    assert n == sum(p.numel() for p in tr.loss_fn.parameters())
    before = torch.get_rng_state()
    tr.inactive_units()
    assert torch.equal(torch.get_rng_state(), before)


def test_w1_warmup_raises_the_network_weights_rate_linearly_under_the_cosine():
    """``w1_warmup=n``: the network's own weights get a group of their own whose rate is ``lr min(1, (t+1)/n)`` times
    the cosine factor; the other groups follow the plain cosine."""
    import math

    tr = _trainer(lr=1e-3, mean_lr=0.05, eta_lr=0.02, w1_warmup=4, epochs=4)  # 2 steps an epoch, 8 in all
    groups = tr.optimizer.param_groups
    assert tr.own_weights_group == 3
    assert any(p is tr.model.features.W1 for p in groups[3]["params"])
    n = sum(p.numel() for g in groups for p in g["params"])
    assert n == sum(p.numel() for p in tr.loss_fn.parameters())
    T = tr.total_steps
    for t in range(T):
        cosine = 0.5 * (1 + math.cos(math.pi * t / T))
        assert groups[0]["lr"] == pytest.approx(1e-3 * cosine)
        assert groups[1]["lr"] == pytest.approx(0.05 * cosine)
        assert groups[3]["lr"] == pytest.approx(1e-3 * cosine * min(1.0, (t + 1) / 4))
        tr.train_step()


def test_unset_w1_warmup_is_470_steps_or_an_eighth_of_the_run_and_none_without_weights():
    """Unset, the warm-up lasts ``W1_WARMUP_STEPS`` (470) steps or an eighth of the run, whichever is fewer; rff,
    with no weights of its own, gets none and no group; an explicit warm-up must be shorter than the run."""
    from pyroinv.config import W1_WARMUP_STEPS
    from pyroinv.errors import ConfigError

    assert W1_WARMUP_STEPS == 470
    assert [Config().w1_warmup_steps(t) for t in (3768, 4690, 14070, 3000, 9)] == [470, 470, 470, 375, 2]
    assert Config(w1_warmup=0).w1_warmup_steps(4690) == 0 and Config(w1_warmup=12).w1_warmup_steps(4690) == 12
    tr = _trainer(epochs=40)  # 80 steps: an eighth is 10
    assert tr.w1_warmup_steps == 10 and tr.own_weights_group == 3
    assert tr.optimizer.param_groups[3]["lr"] == pytest.approx(1e-3 * 0.1)
    rff = _trainer(network="rff", epochs=40)
    assert rff.w1_warmup_steps == 0 and rff.own_weights_group is None and len(rff.optimizer.param_groups) == 3
    with pytest.raises(ConfigError, match="--w1-warmup 8 is not shorter than the run's 8 steps"):
        _trainer(w1_warmup=8, epochs=4)


def test_w1_warmup_survives_a_checkpoint_and_needs_weights_to_warm():
    from pyroinv.errors import ConfigError

    tr = _trainer(w1_warmup=6, epochs=4)
    for _ in range(3):
        tr.train_step()
    state = tr.state_dict()
    again = _trainer(w1_warmup=6, epochs=4)
    again.load_state_dict(state)
    assert [g["lr"] for g in again.optimizer.param_groups] == pytest.approx(
        [g["lr"] for g in tr.optimizer.param_groups]
    )
    tr.train_step()
    again.train_step()
    assert [g["lr"] for g in again.optimizer.param_groups] == pytest.approx(
        [g["lr"] for g in tr.optimizer.param_groups]
    )
    with pytest.raises(ConfigError, match="--w1-warmup 3: the rff network has no weights"):
        _trainer(network="rff", w1_warmup=3)


def test_observed_site_reads_the_batch_nll_off_the_elbo_pass():
    """The logged training NLL is the model's own ``log p(y | x)`` of the batch, read inside the ELBO's pass."""
    import pyro.distributions as dist
    import pyro

    from pyroinv.inference.train import ObservedSite

    logits = torch.randn(5, 3)
    y = torch.tensor([0, 1, 2, 0, 1])

    def model():
        with pyro.plate("data", 100, subsample=torch.arange(5)):
            pyro.sample("y", dist.Categorical(logits=logits), obs=y)

    with ObservedSite("y") as site:
        pyro.infer.Trace_ELBO().loss(model, lambda: None)
    assert torch.allclose(site.log_prob(), torch.log_softmax(logits, -1)[torch.arange(5), y])


@pytest.mark.parametrize("inference", ["vi", "ml"])
def test_eta_warmup_holds_eta_at_its_start_then_lets_it_learn(inference):
    """``eta_warmup=E``: eta is untouched (no Adam step) for E epochs while the rest trains, then moves."""
    tr = _trainer(inference=inference, epochs=3, eta_warmup=1, eta_lr=0.05)
    eta = next(tr.model.invariance.parameters())
    start = eta.detach().clone()
    w1 = tr.model.features.W1.detach().clone()
    for _ in range(tr.steps_per_epoch):
        tr.train_step()
    assert torch.equal(eta.detach(), start)
    assert not torch.equal(tr.model.features.W1.detach(), w1)
    tr.train_step()
    assert not torch.equal(eta.detach(), start)


def test_eta_warmup_must_leave_epochs_to_learn():
    from pyroinv.errors import ConfigError

    with pytest.raises(ConfigError, match="--eta-warmup"):
        Config(epochs=2, eta_warmup=2).validate()
    with pytest.raises(ConfigError, match="--eta-warmup"):
        Config(eta_warmup=-1).validate()


def test_eta_warmup_counts_the_epochs_of_a_run_lengthened_by_min_steps():
    """With ``--min-steps`` a warm-up beyond ``--epochs`` is allowed, but not one as long as the whole run."""
    from pyroinv.errors import ConfigError

    trainer = _trainer(epochs=2, min_steps=7, eta_warmup=2)
    assert trainer.epochs > 2 and trainer.eta_warmup_steps == 2 * trainer.steps_per_epoch
    with pytest.raises(ConfigError, match="--eta-warmup .* whole run"):
        _trainer(epochs=2, min_steps=7, eta_warmup=trainer.epochs)


def test_min_steps_lengthens_a_run_on_a_small_training_set_by_whole_epochs():
    trainer = _trainer(epochs=2, min_steps=7)
    assert trainer.total_steps == trainer.epochs * trainer.steps_per_epoch >= 7
    assert trainer.epochs == -(-7 // trainer.steps_per_epoch)
    assert _trainer(epochs=2).total_steps == 2 * trainer.steps_per_epoch
    with pytest.raises(Exception, match="--min-steps must be a non-negative whole number"):
        Config(min_steps=-1).validate()


#: what reads a tensor's value back to the host (on a GPU each waits for the device to finish the queued work)
_HOST_READS = ("item", "__bool__", "__float__", "__int__", "tolist", "numpy", "cpu")


@pytest.mark.parametrize("inference, invariance, sampling", [
    ("vi", "rotation", "stochastic"), ("ml", "rotation", "stochastic"), ("map", "rotation", "stochastic"),
    ("vi", "affine", "stochastic"), ("ml", "rotation", "deterministic")])
def test_a_training_step_reads_nothing_back_from_the_device(monkeypatch, inference, invariance, sampling):
    """After the first step (which checks the distributions' arguments), ``train_step(sync=False)`` reads no tensor
    value on the host and copies nothing from the host: on a GPU it queues its kernels and returns. The device's
    exponentials (the rotation's closed form; :func:`pyroinv.model.lie.expm_taylor` for the affine group) are used
    here on the CPU, as on an accelerator."""
    import pyroinv.model.lie as lie

    monkeypatch.setattr(lie, "on_host", lambda t: False)
    tr = _trainer(inference=inference, invariance=invariance, sampling=sampling, batch_size=8)  # one permutation
    first = tr.train_step(sync=False)
    calls: list[str] = []

    def names_a_device(*args, **kwargs) -> bool:  # a host list or array, or a tensor, sent to a named device
        return kwargs.get("device") is not None or any(isinstance(a, (str, torch.device)) for a in args)

    def counted(owner, name, when=lambda *args, **kwargs: True):
        fn = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if when(*args, **kwargs):
                calls.append(name)
            return fn(*args, **kwargs)
        monkeypatch.setattr(owner, name, wrapper)

    for name in _HOST_READS:
        counted(torch.Tensor, name)
    for name in ("tensor", "as_tensor"):
        counted(torch, name, names_a_device)
    counted(torch.Tensor, "to", names_a_device)
    tr.train_step(sync=False)
    tr.train_step(sync=False)
    monkeypatch.undo()
    assert calls == [], f"host reads in a training step: {sorted(set(calls))}"
    assert first["step"] == 1 and tr.step == 3 and torch.isfinite(tr._loss)


def test_argument_checks_run_on_the_first_step_only_and_the_caller_s_setting_is_kept():
    import pyro

    tr = _trainer()
    seen = []
    real = tr.loss_fn.forward

    def spy(*args, **kwargs):
        seen.append(pyro.distributions.is_validation_enabled())
        return real(*args, **kwargs)

    tr.loss_fn.forward = spy
    before = pyro.distributions.is_validation_enabled()
    for _ in range(3):
        tr.train_step(sync=False)
    assert seen == [before, False, False]
    assert pyro.distributions.is_validation_enabled() == before
    with pyro.validation_enabled(False):
        tr2 = _trainer()
        tr2.loss_fn.forward = spy
        seen.clear()
        tr2.train_step(sync=False)
        assert seen == [False]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("inference", ["vi", "ml"])
def test_a_cuda_training_step_never_synchronises(inference):
    """On a GPU, torch itself raises on any call that waits for the device (``set_sync_debug_mode("error")``):
    steps after the first queue their kernels and return."""
    cfg = Config(hidden=8, samples=2, epochs=1, batch_size=8, device="cuda", inference=inference)
    tr = Trainer(cfg, _data())
    tr.train_step(sync=False)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        tr.train_step(sync=False)
        tr.train_step(sync=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert tr.step == 3 and torch.isfinite(tr._loss)
