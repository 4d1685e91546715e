"""The cell runner on a real Dask LocalCluster: cells spread over workers, finished cells are skipped, a killed
worker's cell resumes with the same results, locked and refused folders, and the driver's command line."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from pyroinv.config import Config
from pyroinv.errors import ConfigError
from pyroinv.reproduce import grids
from pyroinv.run import lock as locks
from pyroinv.reproduce.grids import network
from pyroinv.reproduce.runner import CellError, DaskRunner, Job, check_folder, parse_resources, train_cell
from pyroinv.run.checkpoint import read_jsonl
from pyroinv.run.experiment import run_experiment
from tests.run.test_experiment import ROOT, TINY

#: TINY's sizes as protocol settings (without its --dataset, --init-eta and --log-every)
TINY_SETTINGS = {"train_size": 120, "test_size": 60, "hidden": 16, "samples": 4, "epochs": 2, "batch_size": 32,
                 "eval_draws": 4}
assert all(f"--{k.replace('_', '-')}" in TINY for k in TINY_SETTINGS)


@pytest.fixture
def tiny_protocol(monkeypatch, cache_dir):
    monkeypatch.setenv("PYROINV_CACHE", cache_dir)  # inherited by the workers and their cells
    monkeypatch.setitem(grids.PROTOCOLS, "tiny", {"relu": TINY_SETTINGS, "rff": TINY_SETTINGS})
    # a longer cell, for killing its worker while it trains
    monkeypatch.setitem(grids.PROTOCOLS, "tiny-long", {"relu": {**TINY_SETTINGS, "epochs": 150}})


def test_cells_spread_over_two_workers_and_finished_cells_are_skipped(tiny_protocol, tmp_path, mnist):
    jobs = [Job(network("relu", "mnist-rot", fixed=90), 0, "tiny", tmp_path),
            Job(network("relu", "mnist", init=5), 1, "tiny", tmp_path)]
    lines = []
    with DaskRunner(workers=2) as runner:
        outcomes = runner.run(jobs, report=lines.append)
        assert {o["state"] for o in outcomes.values()} == {"trained"}
        assert len({o["worker"] for o in outcomes.values()}) == 2  # one cell on each worker
        assert all(j.state() == "done" for j in jobs)
        res = json.loads((jobs[0].out / "results.json").read_text())
        assert res["dataset"] == "mnist-rot" and res["learned_invariance"] == "rotation ±90.0°"
        assert json.loads((jobs[1].out / "config.json").read_text())["seed"] == 1
        assert "dashboard http" in lines[0]
        assert any("relu-mnist-rot-rotation-vi-fixed90-s0: rotation ±90.0°" in s and "0 failed" in s for s in lines)

        lines.clear()
        assert runner.run(jobs, report=lines.append) == {}
        assert lines[0].startswith("2 of 2 cells already finished")

        # an interrupted cell (checkpoint, no results) is continued with --resume
        partial = Job(network("relu", "mnist-rot", init=5), 0, "tiny", tmp_path)
        cfg = Config.from_dict(json.loads((jobs[1].out / "config.json").read_text()))
        cfg.dataset, cfg.seed = "mnist-rot", 0
        run_experiment(cfg, partial.out, progress=False, max_steps=3)
        assert partial.state() == "partial"
        assert runner.run([partial], report=lines.append)[partial]["state"] == "trained"
        assert partial.state() == "done" and "# resume" in partial.log.read_text()


def test_a_killed_workers_cell_resumes_with_the_results_of_an_uninterrupted_run(tiny_protocol, tmp_path, mnist):
    job = Job(network("relu", "mnist-rot", init=5), 0, "tiny-long", tmp_path / "killed")
    reference = Job(job.cell, 0, "tiny-long", tmp_path / "reference")
    with DaskRunner(workers=2) as runner:
        done: dict = {}
        thread = threading.Thread(target=lambda: done.update(runner.run([job], report=lambda s: None)))
        thread.start()
        deadline = time.time() + 240
        while not (job.out / "checkpoint.pt").exists() and time.time() < deadline:
            time.sleep(0.2)
        assert job.state() == "partial", "the cell finished or never started before its worker could be killed"
        busy = [addr for addr, keys in runner.client.processing().items() if keys]
        pids = runner.client.run(os.getpid, workers=busy)
        os.kill(pids[busy[0]], signal.SIGKILL)  # the worker dies; its training process gets SIGTERM
        thread.join(timeout=300)
        assert done[job]["state"] == "trained"
        assert runner.run([reference], report=lambda s: None)[reference]["state"] == "trained"
    log = job.log.read_text()
    assert log.count("# start") == 1 and "# resume" in log
    got, want = (json.loads((j.out / "results.json").read_text()) for j in (job, reference))
    assert got["eta"] == want["eta"] and got["test_accuracy"] == want["test_accuracy"] and got["steps"] == want["steps"]
    assert not (job.out / locks.LOCK).exists()


def test_a_cell_locked_by_another_driver_is_not_trained_twice(tiny_protocol, tmp_path, mnist):
    job = Job(network("relu", "mnist", init=5), 0, "tiny", tmp_path)
    assert locks.acquire(job.out)  # this (live) process holds the cell, as another driver would
    lines = []
    with DaskRunner(workers=1, lock_wait=0.5) as runner:
        assert runner.run([job], report=lines.append)[job]["state"] == "locked"
        assert job.state() == "todo" and "another driver is training it" in lines[-1]
        locks.release(job.out)
        assert runner.run([job], report=lines.append)[job]["state"] == "trained"


def test_an_existing_scheduler_runs_the_cells(tiny_protocol, tmp_path, mnist):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        job = Job(network("relu", "mnist", fixed=5), 0, "tiny", tmp_path)
        with DaskRunner(scheduler=cluster.scheduler_address) as runner:
            lines = []
            assert runner.run([job], report=lines.append)[job]["state"] == "trained"
            assert f"scheduler {cluster.scheduler_address}" in lines[0]


def test_a_worker_that_cannot_see_the_runs_directory_names_it(tmp_path):
    job = Job(network("relu", "mnist"), 0, "cpu", tmp_path / "not-shared")
    with pytest.raises(CellError, match=r"cannot see the runs directory .*not-shared; put it on storage"):
        train_cell(job)


def test_a_folder_with_other_settings_is_refused(tmp_path):
    job = Job(network("relu", "mnist"), 0, "cpu", tmp_path)
    job.out.mkdir(parents=True)
    (job.out / "config.json").write_text(json.dumps({"hidden": 3}))
    with pytest.raises(ConfigError, match="holds a run with other settings"):
        check_folder(job)


def test_resources_parse_or_say_what_is_wrong():
    assert parse_resources(["GPU=1", "MEMORY=8e9"]) == {"GPU": 1.0, "MEMORY": 8e9}
    for bad in ("GPU", "GPU=x", "=1", "GPU=0"):
        with pytest.raises(ConfigError, match="NAME=AMOUNT"):
            parse_resources([bad])


def test_driver_command_line(tmp_path):
    script = str(ROOT / "scripts" / "reproduce.py")
    bad = subprocess.run([sys.executable, script, "table9"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "invalid choice: 'table9'" in bad.stderr
    zero = subprocess.run([sys.executable, script, "figure6", "--jobs", "0"], capture_output=True, text=True, timeout=120)
    assert zero.returncode == 2 and "--jobs" in zero.stderr and zero.stderr.count("\n") == 1
    res = subprocess.run([sys.executable, script, "figure6", "--resources", "GPU", "--runs-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "NAME=AMOUNT" in res.stderr and res.stderr.count("\n") == 1
    dry = subprocess.run([sys.executable, script, "figure6", "--dry-run", "--seeds", "0", "1", "--runs-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    lines = dry.stdout.splitlines()
    assert dry.returncode == 0 and len(lines) == 10 and all(line.startswith("[todo] python scripts/svi_train.py") for line in lines)
    assert not any(tmp_path.iterdir())  # a dry run writes nothing


def test_a_cell_killed_before_its_first_checkpoint_starts_again_cleanly(tiny_protocol, tmp_path, mnist):
    """What a SIGKILL (the kernel's OOM killer) leaves before the first checkpoint: config, meta, a few metrics."""
    job = Job(network("relu", "mnist-rot", init=5), 0, "tiny", tmp_path)
    cfg = job.cell.config("tiny", 0)
    run_experiment(cfg, job.out, progress=False, log_every=1, max_steps=2)
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        (job.out / name).unlink(missing_ok=True)
    assert {p.name for p in job.out.iterdir()} == {"config.json", "meta.json", "metrics.jsonl"}
    assert job.state() == "todo"
    with DaskRunner(workers=1) as runner:
        assert runner.run([job], report=lambda s: None)[job]["state"] == "trained"
    assert job.state() == "done" and "# start" in job.log.read_text()
    # the killed attempt's records (steps 1 and 2) went with it; the cell logs every 10 steps and its last (8)
    assert [r["step"] for r in read_jsonl(job.out / "metrics.jsonl")] == [8]


def test_the_runner_reads_cell_states_from_the_run_folder(tmp_path):
    job = Job(network("relu", "mnist"), 0, "cpu", tmp_path)
    assert job.state() == "todo"
    job.out.mkdir(parents=True)
    (job.out / "config.json").write_text(json.dumps(job.cell.config("cpu", 0).to_dict()))
    (job.out / "checkpoint.prev.pt").write_bytes(b"the one before the latest")  # the latest was lost in a copy
    assert job.state() == "partial"
    (job.out / "results.json").write_text("{}")
    assert job.state() == "done"


def test_an_unreachable_scheduler_is_one_line_within_the_timeout(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = str(ROOT / "scripts" / "reproduce.py")
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, script, "figure6", "--scheduler", f"tcp://127.0.0.1:{port}",
                           "--connect-timeout", "3", "--runs-dir", str(tmp_path), "--no-report"],
                          capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - t0
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: no Dask scheduler answers at tcp://127.0.0.1:{port}")
    assert elapsed < 3 + 30, elapsed  # the timeout, plus starting Python and importing the package


def test_a_scratch_runs_directory_never_rewrites_the_published_tables(tmp_path):
    script = str(ROOT / "scripts" / "reproduce.py")
    published = (ROOT / "docs" / "RESULTS.md").read_bytes()
    done = subprocess.run([sys.executable, script, "headline", "--report-only", "--runs-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (ROOT / "docs" / "RESULTS.md").read_bytes() == published
    report = tmp_path / "RESULTS.md"
    assert f"into {report}" in done.stdout and "<!-- reproduce:headline:cpu begin -->" in report.read_text()
    both = subprocess.run([sys.executable, script, "headline", "--report-only", "--runs-dir", str(tmp_path),
                           "--write-docs", "--results-md", str(tmp_path / "x.md")], capture_output=True, text=True,
                          timeout=120)
    assert both.returncode == 2 and both.stderr.count("\n") == 1
