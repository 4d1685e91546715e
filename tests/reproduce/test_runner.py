"""The runner: cells run as subprocesses, finished ones are skipped, interrupted ones resumed."""
import json

import pytest

from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.reproduce import grids
from pyroinv.reproduce.grids import network
from pyroinv.reproduce.runner import Job, Runner, check_folder
from pyroinv.run.experiment import run_experiment
from tests.run.test_experiment import TINY

#: TINY's sizes as protocol settings (without its --dataset, --init-eta and --log-every)
TINY_SETTINGS = {"train_size": 120, "test_size": 60, "hidden": 16, "samples": 4, "epochs": 2, "batch_size": 32,
                 "eval_draws": 4}
assert all(f"--{k.replace('_', '-')}" in TINY for k in TINY_SETTINGS)


@pytest.fixture
def tiny_protocol(monkeypatch):
    monkeypatch.setitem(grids.PROTOCOLS, "tiny", {"relu": TINY_SETTINGS, "rff": TINY_SETTINGS})


def test_runner_runs_skips_and_resumes(tiny_protocol, tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("PYROINV_CACHE", cache_dir)
    jobs = [Job(network("relu", "mnist-rot", fixed=90), 0, "tiny", tmp_path),
            Job(network("relu", "mnist", init=5), 1, "tiny", tmp_path)]
    lines = []
    codes = Runner(jobs=2).run(jobs, report=lines.append)
    assert list(codes.values()) == [0, 0] and all(j.state() == "done" for j in jobs)
    res = json.loads((jobs[0].out / "results.json").read_text())
    assert res["dataset"] == "mnist-rot" and res["learned_invariance"] == "rotation ±90.0°"
    assert json.loads((jobs[1].out / "config.json").read_text())["seed"] == 1
    assert any("relu-mnist-rot-rotation-vi-fixed90-s0: rotation ±90.0°" in s for s in lines)

    lines.clear()
    assert Runner().run(jobs, report=lines.append) == {}
    assert lines[0].startswith("2 of 2 cells already finished")

    # an interrupted cell (checkpoint, no results) is continued with --resume
    partial = Job(network("relu", "mnist-rot", init=5), 0, "tiny", tmp_path)
    cfg = Config.from_dict(json.loads((jobs[1].out / "config.json").read_text()))
    cfg.dataset, cfg.seed = "mnist-rot", 0
    run_experiment(cfg, partial.out, cache_dir=cache_dir, progress=False, max_steps=3)
    assert partial.state() == "partial"
    assert Runner().run([partial], report=lines.append) == {partial: 0}
    assert partial.state() == "done"
    assert "resum" in partial.out.with_name(partial.out.name + ".log").read_text().lower()


def test_a_folder_with_other_settings_is_refused(tmp_path):
    job = Job(network("relu", "mnist"), 0, "cpu", tmp_path)
    job.out.mkdir(parents=True)
    (job.out / "config.json").write_text(json.dumps({"hidden": 3}))
    with pytest.raises(ConfigError, match="holds a run with other settings"):
        check_folder(job)


def test_driver_command_line(tmp_path):
    import subprocess
    import sys

    from tests.run.test_experiment import ROOT

    script = str(ROOT / "scripts" / "reproduce.py")
    bad = subprocess.run([sys.executable, script, "table9"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "invalid choice: 'table9'" in bad.stderr
    zero = subprocess.run([sys.executable, script, "figure6", "--jobs", "0"], capture_output=True, text=True, timeout=120)
    assert zero.returncode == 2 and "--jobs" in zero.stderr and zero.stderr.count("\n") == 1
    dry = subprocess.run([sys.executable, script, "figure6", "--dry-run", "--seeds", "0", "1", "--runs-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    lines = dry.stdout.splitlines()
    assert dry.returncode == 0 and len(lines) == 6 and all(line.startswith("[todo] python scripts/svi_train.py") for line in lines)
    assert not any(tmp_path.iterdir())  # a dry run writes nothing
