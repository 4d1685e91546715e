"""The small command-line tools: each runs at tiny sizes and says one line on bad input."""
import json
import os
import subprocess
import sys

import pytest

from .run.test_experiment import ROOT


def _script(name, args, cache_dir):
    env = {**os.environ, "PYROINV_CACHE": str(cache_dir), "PYROINV_OFFLINE": "1", "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.mark.slow
def test_estimator_variance_script(cache_dir, mnist):
    proc = _script("estimator_variance.py", ["--dataset", "mnist", "--hidden", "8", "--samples", "2", "--batch-size",
                                             "16", "--repeats", "4", "--json"], cache_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout)
    assert set(res["variance_ratio_shared_over_local"]) == {"mu", "diag(L)", "W1", "eta"}
    assert res["local"]["loss_mean"] > 0 and res["shared"]["loss_se"] >= 0
    bad = _script("estimator_variance.py", ["--repeats", "1"], cache_dir)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "at least 2" in bad.stderr


@pytest.mark.slow
def test_rff_kernel_script(cache_dir, mnist):
    proc = _script("rff_kernel.py", ["--sigma", "0.3", "0.1", "--train-size", "60", "--hidden", "512"], cache_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0.0442 (H 512)" in proc.stdout and "sigma 0.1: median k same class" in proc.stdout
    fit = _script("rff_kernel.py", ["--sigma", "0.1", "--train-size", "60", "--test-size", "20", "--hidden", "64",
                                    "--fit", "--iterations", "30"], cache_dir)
    assert fit.returncode == 0, fit.stderr[-2000:]
    line = next(ln for ln in fit.stdout.splitlines() if "sigma 0.1, H 64:" in ln)
    train_acc = float(line.split("train accuracy ")[1].split("%")[0])
    assert train_acc > 50.0, line  # 60 images, 65 features: the MAP layer fits most of them (chance is 10%)
    rotated = _script("rff_kernel.py", ["--sigma", "0.1", "--train-size", "60", "--test-size", "20", "--hidden", "64",
                                        "--fit", "--iterations", "30", "--rotation", "5", "--samples", "4"], cache_dir)
    assert rotated.returncode == 0 and "averaged over 4 rotations in +-5 degrees" in rotated.stdout, rotated.stderr[-2000:]
    bad = _script("rff_kernel.py", ["--dataset", "nope.npz"], cache_dir)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "does not exist" in bad.stderr


def test_run_notebooks_refuses_a_missing_file(tmp_path, cache_dir):
    proc = _script("run_notebooks.py", [str(tmp_path / "missing.ipynb")], cache_dir)
    assert proc.returncode == 2 and "is not a notebook file" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_the_gpu_script_says_what_it_cannot_do_in_one_line_and_still_packs(tmp_path):
    """scripts/gpu_grid.sh on a machine without CUDA or MPS: the CUDA tests skip, the benchmark and MPS each say in
    one line why they did not run (no option the script passes is refused), the unknown table is refused, and the
    pack is written all the same."""
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", "scripts/gpu_grid.sh", "--benchmark", "--mps", "--tables", "nosuch", "--pack",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    out = done.stdout + done.stderr
    assert "unrecognized arguments" not in out and "Traceback" not in out, out[-3000:]
    assert "skipped" in out  # the CUDA-only tests ran, and skipped
    assert out.count("CUDA is not available here") == 3  # the three benchmark calls got past their options
    assert "there is no nvidia-cuda-mps-control here; the cells share each GPU by time slices" in out
    assert "invalid choice: 'nosuch'" in out and done.returncode == 2
    assert (tmp_path / "cells.tar.gz").is_file() and "packed 0 finished cells" in (tmp_path / "gpu_grid.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("args, refused", [(["--protocol", "nosuch"], "invalid choice: 'nosuch'"),
                                           (["--", "--bogus"], "unrecognized arguments: --bogus")])
def test_the_gpu_script_passes_the_protocol_and_the_rest_to_reproduce(tmp_path, args, refused):
    """``--protocol`` and everything after ``--`` reach scripts/reproduce.py (which refuses these), and the pack
    holds that protocol's folder."""
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", "scripts/gpu_grid.sh", "--tables", "deep", "--pack", str(tmp_path), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert refused in done.stdout + done.stderr and done.returncode == 2
    assert (tmp_path / "cells.tar.gz").is_file()
