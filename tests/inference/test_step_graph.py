"""The recorded training step (pyroinv.inference.step_graph) is the eager step: on the CPU through a stand-in that
replays by calling the step again on the same buffers and rate tensors, on a GPU through a real CUDA graph."""
import logging

import pytest
import torch

from pyroinv.config import Config
from pyroinv.data.splits import Split
from pyroinv.inference.step_graph import ENV, CallAgain, enabled_by_environment
from pyroinv.inference.train import Trainer


def _data(n_train: int = 40) -> Split:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n_train + 8, 1, 12, 12, generator=g)
    y = torch.arange(n_train + 8) % 4
    return Split("toy", x[:n_train].numpy(), y[:n_train].numpy(), x[n_train:].numpy(), y[n_train:].numpy(),
                 num_classes=4)


def _config(**kw) -> Config:
    # 40 images in batches of 16: two full batches and one of 8 an epoch
    return Config(**{"hidden": 8, "samples": 2, "epochs": 4, "batch_size": 16, "device": "cpu", "init_eta": 20.0, **kw})


def _run(trainer: Trainer, steps: int | None = None) -> list[float]:
    losses = []
    while not trainer.done and (steps is None or len(losses) < steps):
        losses.append(trainer.train_step()["loss"])
    return losses


def _parameters(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.loss_fn.named_parameters()}


def _assert_same_run(a: Trainer, b: Trainer, losses_a: list[float], losses_b: list[float]) -> None:
    assert losses_a == pytest.approx(losses_b, rel=1e-4)
    pa, pb = _parameters(a), _parameters(b)
    assert pa.keys() == pb.keys()
    for name in pa:
        torch.testing.assert_close(pa[name], pb[name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("kw", [{}, {"inference": "ml"}, {"inference": "map", "eta_warmup": 1},
                                {"average": "probs", "estimator": "shared"}])
def test_the_replayed_step_trains_as_the_eager_step(kw):
    """Warm-up, recording, replays, the short last batch of each epoch (eager) and eta held for a warm-up: the
    parameters and every step's loss are those of the eager trainer (the rates differ in float32 rounding)."""
    eager = Trainer(_config(**kw), _data())  # each trainer seeds the RNG: build each just before its run
    losses_eager = _run(eager)
    replayed = Trainer(_config(**kw), _data(), recorder=CallAgain)
    losses_replayed = _run(replayed)
    assert len(losses_eager) == 12
    _assert_same_run(eager, replayed, losses_eager, losses_replayed)
    assert replayed.graph is None  # released when the run is done


def test_replays_happen_after_the_warm_up_and_only_for_full_batches():
    tr = Trainer(_config(), _data(), recorder=CallAgain)
    graph = tr.graph
    _run(tr, 6)
    # steps 0, 1, 3: warm-up; 2, 5: the short batch; 4: recorded and replayed
    assert graph.recorded and graph.recorder.replays == 1
    _run(tr)
    assert graph.recorder.replays == 5 == tr.graph_replays  # and 6, 7, 9, 10


def test_a_non_finite_loss_is_found_inside_a_replayed_step():
    tr = Trainer(_config(), _data(), recorder=CallAgain)
    _run(tr, 5)
    assert tr.graph.recorded and tr.first_nonfinite() is None
    with torch.no_grad():
        tr.model.features.W1.fill_(float("nan"))
    _run(tr, 2)  # step 6 is the short batch (eager), step 7 a replay: the first non-finite loss is step 6's
    step, value = tr.first_nonfinite()
    assert step == 6 and value != value


def test_a_failed_recording_leaves_the_eager_step(caplog):
    class Refuses(CallAgain):
        def record(self, fn):
            raise RuntimeError("operation not permitted when stream is capturing")

    eager = Trainer(_config(), _data())
    losses_eager = _run(eager)
    tr = Trainer(_config(), _data(), recorder=Refuses)
    with caplog.at_level(logging.WARNING, logger="pyroinv"):
        losses = _run(tr)
    assert tr.graph is None
    assert "could not be recorded as a CUDA graph (RuntimeError: operation not permitted" in caplog.text
    _assert_same_run(eager, tr, losses_eager, losses)


def test_a_resumed_run_goes_on_from_the_replayed_state():
    eager = Trainer(_config(), _data())
    losses = _run(eager)
    first = Trainer(_config(), _data(), recorder=CallAgain)
    head = _run(first, 8)
    state = first.state_dict()  # the checkpoint (with the RNG's state) before the next trainer seeds the RNG
    second = Trainer(_config(), _data(), recorder=CallAgain)
    second.load_state_dict(state)
    assert all(isinstance(g["lr"], float) for g in second.optimizer.param_groups)
    _assert_same_run(eager, second, losses, head + _run(second))


def test_where_the_step_is_recorded():
    assert Trainer(_config(), _data()).graph is None  # no CUDA: eager
    assert Trainer(_config(inference="laplace"), _data(), recorder=CallAgain).graph is None  # curvature between steps
    assert Trainer(_config(), _data(), recorder=CallAgain).graph is not None


@pytest.mark.parametrize("value, on", [("0", False), ("off", False), ("no", False), ("1", True), ("", True)])
def test_the_environment_turns_the_graph_off(monkeypatch, value, on):
    monkeypatch.setenv(ENV, value)
    assert enabled_by_environment() is on


@pytest.mark.parametrize("flag, value", [([], None), (["--cuda-graph"], True), (["--no-cuda-graph"], False)])
def test_the_training_command_passes_its_choice_on(monkeypatch, tmp_path, flag, value):
    import pyroinv.run.experiment as experiment
    from pyroinv.frontends.train import train_main

    seen = {}
    monkeypatch.setattr(experiment, "run_experiment", lambda cfg, out, **kw: seen.update(kw))
    assert train_main(["--dataset", "mnist", "--out", str(tmp_path / "run"), *flag]) == 0
    assert seen["cuda_graph"] is value


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@cuda
def test_cuda_graph_replays_the_eager_step():
    """Without randomness (maximum likelihood, the transforms on a fixed grid) the graph's run is the eager run."""
    kw = {"device": "cuda", "inference": "ml", "sampling": "deterministic"}
    eager = Trainer(_config(**kw), _data(), cuda_graph=False)
    losses_eager = _run(eager)
    replayed = Trainer(_config(**kw), _data(), cuda_graph=True)
    graph = replayed.graph
    losses_replayed = _run(replayed)
    assert graph.recorded and graph.failed is None
    _assert_same_run(eager, replayed, losses_eager, losses_replayed)


@cuda
def test_cuda_graph_draws_fresh_noise_at_every_replay_and_never_waits():
    """q's noise and the transforms are drawn anew at each replay (with the rates at zero the parameters stay, so
    two replays differ only in their draws), and a replay queues its work without a host sync."""
    tr = Trainer(_config(device="cuda", epochs=8), _data(), cuda_graph=True)
    _run(tr, 6)
    assert tr.graph.recorded
    for g in tr.optimizer.param_groups:
        g["lr"] = 0.0
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        tr.train_step(sync=False)  # step 6: a replay
        first = tr._loss.clone()
        tr.train_step(sync=False)  # step 7: a replay
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(first) and torch.isfinite(tr._loss) and float(first) != float(tr._loss)
