"""The memory estimate of a run: close to measured peaks, and a run that cannot fit stops in one line."""
import json
import subprocess
import sys

import pytest
import torch

from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.inference import memory
from tests.run.test_experiment import ROOT, TINY, run_script


@pytest.mark.slow
@pytest.mark.parametrize("network, hidden, samples, batch, inference", [
    ("relu", 1024, 32, 128, "vi"),  # the paper's step (the warp's adjoint on the inputs)
    ("relu", 256, 16, 512, "vi"),   # B > H: the weight images are warped
])
def test_the_estimate_is_within_a_quarter_of_the_measured_peak(network, hidden, samples, batch, inference):
    """Measured as ``scripts/benchmark.py --memory`` does: a fresh process, three training steps."""
    args = [f"--hidden={hidden}", f"--samples={samples}", "--threads=1", "--single", "--kind=memory",
            f"--network={network}", f"--batch={batch}", f"--inference={inference}"]
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "benchmark.py"), *args], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert abs(r["estimated_mb"] - r["measured_mb"]) <= 0.25 * r["measured_mb"], r


def test_the_estimate_grows_with_each_size_as_its_terms_say():
    base = Config(hidden=512, samples=16, batch_size=128)
    e = memory.estimate(base, (1, 28, 28), 10, 20000, 2000)
    assert e.data == 4 * 22000 * 784
    assert e.state == 4 * 4 * (10 * 513 * 513 + 2 * 10 * 513 + 512 * 784 + 512 + 512)  # W1, b1 and the gain g1
    twice_s = memory.estimate(Config(hidden=512, samples=32, batch_size=128), (1, 28, 28), 10, 20000, 2000)
    assert twice_s.step > e.step and twice_s.state == e.state
    ml = memory.estimate(Config(hidden=512, samples=16, batch_size=128, inference="ml"), (1, 28, 28), 10, 20000, 2000)
    assert ml.state == 4 * 4 * (10 * 513 + 512 * 784 + 512 + 512)  # a point estimate of W2: no q to hold


def test_a_run_that_cannot_fit_stops_before_training_in_one_line(monkeypatch):
    monkeypatch.setattr(memory, "available", lambda device: 2 * memory.GIB)
    with pytest.raises(ConfigError, match=r"^training needs about \d+\.\d GiB .* but the CPU has 2\.0 GiB available; "
                                          r"reduce --samples, --batch-size or --hidden"):
        memory.check_fits(Config(hidden=4096, samples=64, batch_size=512), (1, 28, 28), 10, 60000, 10000,
                          torch.device("cpu"))
    memory.check_fits(Config(hidden=64), (1, 28, 28), 10, 1000, 100, torch.device("cpu"))


@pytest.mark.slow
def test_the_command_line_refuses_a_run_larger_than_the_machine(tmp_path, cache_dir, mnist):
    out = tmp_path / "huge"
    done = run_script([*TINY, "--hidden", "60000", "--samples", "512", "--batch-size", "60", "--out", str(out)],
                      cache_dir)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: training needs about ") and "available" in lines[0]
    assert not out.exists()


def test_available_memory_is_read_on_this_machine():
    have = memory.available(torch.device("cpu"))
    assert have is not None and 0 < have < 2 ** 50
