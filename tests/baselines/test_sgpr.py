"""The SGPR baseline (pyro.contrib.gp) on a small real-MNIST subset."""
import json
import os
import subprocess
import sys

import pytest
import torch

from pyroinv.baselines.sgpr import SGPRConfig, initial_inducing, run_sgpr
from pyroinv.errors import ConfigError
from tests.run.test_experiment import ROOT


@pytest.fixture(scope="module")
def sgpr_run(tmp_path_factory, cache_dir):
    out = tmp_path_factory.mktemp("sgpr") / "run"
    cfg = SGPRConfig(dataset="mnist", inducing=40, steps=40, lr=0.02, train_size=600, test_size=300)
    return out, run_sgpr(cfg, out, cache_dir=cache_dir, report=lambda s: None)


@pytest.mark.slow
def test_sgpr_beats_chance_clearly_on_regular_mnist(sgpr_run):
    _, res = sgpr_run
    assert res["test_accuracy"] > 0.6  # chance is 0.1


def test_sgpr_writes_the_results_fields_of_the_networks(sgpr_run):
    out, res = sgpr_run
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(res))
    for key in ("dataset", "invariance", "network", "inference", "test_accuracy", "test_nll", "elbo_per_datapoint",
                "eta", "eta_human", "learned_invariance", "steps", "train_size", "test_size", "train_wall_time_s"):
        assert key in saved
    assert saved["learned_invariance"] == "no invariance" and saved["train_size"] == 600
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 40 and records[-1]["bound_per_datapoint"] > records[0]["bound_per_datapoint"]


def test_inducing_points_are_class_balanced_training_points():
    x = torch.arange(40.0).reshape(20, 2)
    y = torch.arange(20) % 4
    z = initial_inducing(x, y, 8, torch.Generator().manual_seed(0))
    rows = [int(r[0]) // 2 for r in z]
    assert sorted(torch.bincount(y[rows], minlength=4).tolist()) == [2, 2, 2, 2]
    with pytest.raises(ConfigError, match="exceeds"):
        initial_inducing(x, y, 21, torch.Generator())


def test_sgpr_script_reports_bad_input_in_one_line(tmp_path, cache_dir):
    env = {**os.environ, "PYROINV_CACHE": cache_dir, "PYROINV_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "sgpr_train.py"), "--dataset", "mnist",
                           "--train-size", "30", "--test-size", "20", "--inducing", "50", "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--inducing 50 exceeds" in proc.stderr
    assert not (tmp_path / "r").exists()
