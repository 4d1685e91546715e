"""The Augerino-style baseline: transforms on the inputs, point W2, CE minus a width reward."""
import math

import pyro
import torch

from pyroinv.inference.build import build_elbo, build_model
from pyroinv.config import Config
from pyroinv.model.invariance import Invariance
from pyroinv.model.input_features import InputAugmentedFeatures
from pyroinv.run.experiment import run_experiment
from pyroinv.model.warp import warp_images
from tests.run.test_experiment import tiny_config


def _features(shape, **kw):
    return InputAugmentedFeatures(shape, Invariance("rotation", init=0.7), hidden=8, **kw)


def test_input_augmentation_transforms_the_inputs_not_the_weights():
    torch.manual_seed(0)
    f = _features((1, 12, 12))
    x = torch.rand(3, 1, 12, 12)
    T = f.invariance.sample_transforms(5)
    out = f(x, T)
    for s in range(5):
        xs = warp_images(x, T[s].expand(3, 3, 3))
        ref = torch.relu(xs.reshape(3, -1) @ f.W1.T + f.b1)
        assert torch.allclose(out[s, :, :-1], ref, atol=1e-6)
    assert torch.all(out[..., -1] == 1)


def test_input_augmentation_of_points_applies_the_affine_map():
    f = _features((2,))
    x = torch.randn(4, 2)
    T = f.invariance.sample_transforms(3)
    out = f(x, T)
    pts = torch.einsum("sij,bj->sbi", T[:, :2, :2], x) + T[:, :2, 2].unsqueeze(1)
    assert torch.allclose(out[..., :-1], torch.relu(pts @ f.W1.T + f.b1), atol=1e-6)


def test_width_reward_enters_the_loss_with_the_stated_weight():
    """Loss(augerino, lambda) = Loss(lambda = 0) - N * lambda * ||eta||."""
    x, y = torch.rand(6, 1, 10, 10), torch.randint(0, 3, (6,))
    losses = {}
    for w in (0.0, 0.5):
        torch.manual_seed(0)
        pyro.clear_param_store()
        cfg = Config(inference="augerino", width_weight=w, hidden=8, samples=2, init_eta=30.0)
        model, guide = build_model(cfg, (1, 10, 10), 3)
        torch.manual_seed(1)
        losses[w] = build_elbo(cfg).loss(model, guide, x, y, num_data=100)
    assert math.isclose(losses[0.0] - losses[0.5], 100 * 0.5 * math.radians(30.0), rel_tol=1e-4)


def test_augerino_run_trains_and_writes_the_usual_results(tmp_path, cache_dir):
    cfg = tiny_config(inference="augerino", width_weight=0.1, lr=0.05)
    res = run_experiment(cfg, tmp_path / "aug", cache_dir=cache_dir, progress=False)
    for key in ("test_accuracy", "test_nll", "eta_human", "learned_invariance", "train_wall_time_s"):
        assert key in res
    assert res["inference"] == "augerino" and res["elbo_per_datapoint"] is None
    assert res["eta_human"]["rotation_deg"] != 10.0  # eta was trained
    assert (tmp_path / "aug" / "posterior.nc").exists() and not (tmp_path / "aug" / "filters.png").exists()
