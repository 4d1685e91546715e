"""The run folder: its metadata, the one results writer, and loading runs written before ``meta.json``."""
import json

import pytest
import torch

from pyroinv.run.checkpoint import load_checkpoint, save_checkpoint
from pyroinv.errors import ConfigError
from pyroinv.run.experiment import run_experiment
from pyroinv.run.folder import META, RunFolder, RunResults, load_run

from .test_experiment import tiny_config

COMMON = ("dataset", "invariance", "network", "inference", "test_accuracy", "test_nll", "elbo_per_datapoint",
          "train_loglik_per_datapoint", "eta", "eta_human", "learned_invariance", "steps", "train_size", "test_size",
          "train_wall_time_s", "eval_wall_time_s", "device", "versions")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache_dir, mnist):
    out = tmp_path_factory.mktemp("folder") / "ml"
    run_experiment(tiny_config(inference="ml", epochs=1), out, cache_dir=cache_dir, progress=False, quiet=True)
    return out


def test_meta_records_what_the_data_decided(trained):
    meta = json.loads((trained / META).read_text())
    assert meta == {"input_shape": [1, 28, 28], "num_classes": 10, "num_data": 120}


def test_results_have_the_common_fields_in_order(trained):
    assert tuple(json.loads((trained / "results.json").read_text()))[:len(COMMON)] == COMMON


def test_load_run_reads_shape_and_classes_from_meta(trained):
    cfg, model, guide, step = load_run(trained)
    assert model.features.input_shape == (1, 28, 28) and guide.W2_hat.shape == (10, 17) and step == 4
    with pytest.raises(ConfigError, match=r"inputs \(3, 28, 28\) but the run was trained on \(1, 28, 28\)"):
        load_run(trained, input_shape=(3, 28, 28))


def test_load_run_of_a_folder_written_before_meta(trained, tmp_path):
    """Older folders record the input shape as a buffer in the checkpoint and the classes in the guide's shapes."""
    old = tmp_path / "old"
    old.mkdir()
    for name in ("config.json", "checkpoint.pt"):
        (old / name).write_bytes((trained / name).read_bytes())
    state = load_checkpoint(old / "checkpoint.pt")
    state["model"]["features._input_shape"] = torch.tensor([1, 28, 28])
    save_checkpoint(old / "checkpoint.pt", state)
    _, model, guide, _ = load_run(old)
    new_model = load_run(trained)[1]
    assert torch.equal(model.features.W1, new_model.features.W1) and guide.W2_hat.shape == (10, 17)


def test_extra_results_cannot_overwrite_common_fields(tmp_path):
    res = RunResults("d", "none", "sgpr", "sgpr", 0.5, None, None, None, [0.0] * 6, {}, "no invariance", 1, 2, 3,
                     0.1, 0.1, "cpu", extra={"test_accuracy": 1.0})
    with pytest.raises(ValueError, match="test_accuracy"):
        RunFolder(tmp_path).write_results(res)


def test_a_folder_without_a_run_is_named(tmp_path):
    with pytest.raises(ConfigError, match="is not a run folder"):
        load_run(tmp_path)
