"""The benchmark's paths compute the same model and its script runs."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pyroinv.inference.benchmark import COMPILED, PATHS, eval_function, step_function
from tests.conftest import DEVICES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("device", DEVICES)
def test_naive_and_pyroinv_paths_give_the_same_loss(device):
    torch.manual_seed(0)
    losses = {p: step_function(p, hidden=32, samples=4, batch=8, device=device)() for p in ("naive", "pyroinv")}
    assert losses["naive"] == pytest.approx(losses["pyroinv"], rel=1e-4)


@pytest.mark.slow
def test_compiled_step_gives_the_same_loss_as_pyroinv():
    losses = {p: step_function(p, hidden=16, samples=3, batch=4)() for p in ("pyroinv", COMPILED)}
    assert losses[COMPILED] == pytest.approx(losses["pyroinv"], rel=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", PATHS)
def test_every_path_runs_forward_and_backward(path, device):
    loss = step_function(path, network="rff", hidden=16, samples=3, batch=4, device=device)()
    assert torch.isfinite(torch.tensor(loss))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", ["naive", "pyroinv"])
def test_evaluation_closures_run_without_autograd(path, device, monkeypatch):
    """Timed as pyroinv.inference.evaluate runs: no autograd, so the inference path of the features."""
    import pyroinv.model.kernels as kernels

    inference = kernels.features_no_grad
    calls = []
    monkeypatch.setattr(kernels, "features_no_grad", lambda *a: calls.append(torch.is_grad_enabled()) or inference(*a))
    eval_function(path, hidden=16, samples=3, n_test=30, batch=8, device=device)()
    assert calls and not any(calls)


@pytest.mark.slow
def test_benchmark_script_quick():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--quick", "--networks", "relu",
                          "--profile"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "| relu | 16 |" in out.stdout and "naive / pyroinv" in out.stdout and "images per second" in out.stdout
    assert "| relu | 50 |" in out.stdout  # the evaluation row
    # the profile's table (which operators fill its top rows depends on the machine's load)
    assert "pyroinv, relu, batch 16, 3 steps (" in out.stdout and "Self CPU time total" in out.stdout
    # the whole step, waited for and queued as training runs it, and its profile with the work a step launches
    row = next(line for line in out.stdout.splitlines() if line.startswith("| relu | 16 | ") and "%" in line)
    queued, ratio, graphed, graph_ratio = row.strip("| ").split(" | ")[-4:]
    assert float(queued.removesuffix(" s")) > 0 and ratio.endswith("x")
    assert graphed == graph_ratio == "–"  # the CUDA graph's columns: CUDA only
    launched = re.search(r"whole training step \(queued\), relu, batch 16, 3 steps \((\d+) operators a step\)",
                         out.stdout)
    assert launched and int(launched.group(1)) > 50


def test_benchmark_refuses_cuda_without_cuda(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--quick", "--device", "cuda"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "CUDA is not available" in out.stderr


@pytest.mark.slow
def test_benchmark_times_the_cnn_s_whole_step_and_refuses_its_path_table():
    script = [sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--quick", "--networks", "cnn"]
    out = subprocess.run([*script, "--guides", "cholesky"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("| cnn | 16 | "))
    assert float(row.split(" | ")[2].removesuffix(" s |").removesuffix(" s")) > 0
    refused = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--guides cholesky" in refused.stderr


@pytest.mark.slow
def test_benchmark_precision_table_quick():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark.py"), "--quick", "--networks", "relu",
                          "--precisions", "fp32", "bf16"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "native bfloat16 products: " in out.stdout
    row = next(line for line in out.stdout.splitlines() if line.startswith("| relu | 16 | "))
    cells = row.strip("| ").split(" | ")
    assert len(cells) == 2 + 6 + 1 and all(float(c) > 0 for c in cells[2:8])
    assert cells[-1].endswith("(bf16)")
