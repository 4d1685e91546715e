"""The benchmark's paths compute the same model and its script runs."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pyroinv.benchmark import PATHS, step_function

ROOT = Path(__file__).resolve().parents[1]


def test_naive_and_pyroinv_paths_give_the_same_loss():
    torch.manual_seed(0)
    losses = {p: step_function(p, hidden=32, samples=4, batch=8)() for p in ("naive", "pyroinv")}
    assert losses["naive"] == pytest.approx(losses["pyroinv"], rel=1e-4)


@pytest.mark.parametrize("path", PATHS)
def test_every_path_runs_forward_and_backward(path):
    loss = step_function(path, network="rff", hidden=16, samples=3, batch=4)()
    assert torch.isfinite(torch.tensor(loss))


def test_benchmark_script_quick():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--quick", "--networks", "relu"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "| relu | 16 |" in out.stdout and "naive / pyroinv" in out.stdout and "images per second" in out.stdout
