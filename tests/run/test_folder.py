"""The run folder: its metadata, the one results writer, and loading runs written before ``meta.json``."""
import json

import pytest
import torch

from pyroinv.files import load_checkpoint, save_checkpoint
from pyroinv.errors import ConfigError
from pyroinv.run.experiment import run_experiment
from pyroinv.run.folder import DONE, FOREIGN, META, RESUMABLE, UNSTARTED, RunFolder, RunResults, load_run

from .test_experiment import tiny_config

COMMON = ("dataset", "invariance", "network", "inference", "test_accuracy", "test_nll", "elbo_per_datapoint",
          "train_loglik_per_datapoint", "eta", "eta_human", "learned_invariance", "steps", "train_size", "test_size",
          "train_wall_time_s", "eval_wall_time_s", "device", "device_name", "laplace_per_datapoint",
          "laplace_full_per_datapoint", "laplace_layers_per_datapoint", "prior_precisions", "valid_accuracy", "valid_nll",
          "valid_size", "inactive_units", "eval_phases_s", "graph_replays", "precision", "warnings", "versions")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache_dir, mnist):
    out = tmp_path_factory.mktemp("folder") / "ml"
    run_experiment(tiny_config(inference="ml", epochs=1), out, cache_dir=cache_dir, progress=False, quiet=True)
    return out


@pytest.mark.slow
def test_meta_records_what_the_data_decided(trained):
    meta = json.loads((trained / META).read_text())
    assert meta == {"input_shape": [1, 28, 28], "num_classes": 10, "num_data": 120}


def test_results_have_the_common_fields_in_order(trained):
    assert tuple(json.loads((trained / "results.json").read_text()))[:len(COMMON)] == COMMON


def test_results_split_the_evaluation_time_into_its_phases(trained):
    r = json.loads((trained / "results.json").read_text())
    phases = r["eval_phases_s"]
    assert set(phases) == {"test", "train_elbo", "laplace", "arviz", "units", "plots"}  # no validation set here
    assert 0 <= r["inactive_units"] < 1
    assert r["graph_replays"] == 0  # on the CPU every step is eager
    assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= r["eval_wall_time_s"] + 0.01


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


def test_state_is_one_set_of_rules_for_what_a_folder_holds(tmp_path):
    cfg = tiny_config()
    folder = RunFolder(tmp_path / "run")
    assert folder.state(cfg) == UNSTARTED  # nothing there yet
    folder.path.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg.to_dict()))
    (folder / "metrics.jsonl").write_text('{"step": 1}\n')  # killed before its first checkpoint
    assert folder.state(cfg) == UNSTARTED
    folder.check_new(cfg)  # the same run may start there again
    other = tiny_config(hidden=8)
    assert folder.state(other) == FOREIGN
    with pytest.raises(ConfigError, match=r"holds an attempt with other settings \(hidden\) that stopped before its "
                                          r"first checkpoint; delete it or choose a new --out"):
        folder.check_new(other)
    save_checkpoint(folder / "checkpoint.prev.pt", {"step": 1})  # only the one before the latest survived
    assert folder.state(cfg) == RESUMABLE and folder.state() == RESUMABLE
    with pytest.raises(ConfigError, match="already holds a run; pass --resume"):
        folder.check_new(cfg)
    (folder / "results.json").write_text("{}")
    assert folder.state(cfg) == DONE


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_starts_again_with_or_without_resume(tmp_path, cache_dir, mnist):
    out = tmp_path / "run"
    run_experiment(tiny_config(), out, cache_dir=cache_dir, progress=False, log_every=1, max_steps=2, quiet=True)
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        (out / name).unlink(missing_ok=True)
    run_experiment(tiny_config(), out, resume=True, cache_dir=cache_dir, progress=False, log_every=1, quiet=True)
    assert [r["step"] for r in RunFolder(out).metrics()] == list(range(1, 9))
    assert RunFolder(out).state() == DONE
