"""The cell runner on a real Dask LocalCluster: cells spread over workers, finished cells are skipped, a killed
worker's cell resumes with the same results, locked and refused folders, and the driver's command line."""
import json
import os
import re
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
from pyroinv.files import read_jsonl
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_cell_locked_by_another_driver_is_not_trained_twice(tiny_protocol, tmp_path, mnist):
    job = Job(network("relu", "mnist", init=5), 0, "tiny", tmp_path)
    assert locks.acquire(job.out)  # this (live) process holds the cell, as another driver would
    lines = []
    with DaskRunner(workers=1, lock_wait=0.5) as runner:
        assert runner.run([job], report=lines.append)[job]["state"] == "locked"
        assert job.state() == "todo" and "another driver is training it" in lines[-1]
        locks.release(job.out)
        assert runner.run([job], report=lines.append)[job]["state"] == "trained"


@pytest.mark.slow
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


@pytest.mark.slow
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
    *lines, total, checked = dry.stdout.splitlines()
    assert dry.returncode == 0 and len(lines) == 18 and total.startswith("18 cell(s) to run")
    assert checked.startswith(("checked on the", "too few kept cells"))
    assert all(re.match(r"\[todo(, about [^]]+)?\] python scripts/svi_train.py", line) for line in lines)
    assert all(line.endswith("-s0") for line in lines[:9]) and all(line.endswith("-s1") for line in lines[9:])  # seed 0 first
    written = next(line for line in lines if "as-written-s0" in line)
    assert ("--estimator shared" in written and "--mean-lr 0.001" in written and "--eta-constraint none" in written
            and "--w1-init-scale 1.0" in written and "--inference vi" in written)
    assert not any(tmp_path.iterdir())  # a dry run writes nothing


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_scratch_runs_directory_never_rewrites_the_published_tables(tmp_path):
    script = str(ROOT / "scripts" / "reproduce.py")
    tables = ROOT / "docs" / "results" / "tables"  # the published tables' pages and their figures
    published = {p: p.read_bytes() for p in sorted(tables.rglob("*")) if p.is_file()}
    assert (tables / "headline.md") in published and (tables / "claims.md") in published
    done = subprocess.run([sys.executable, script, "headline", "--report-only", "--runs-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert {p: p.read_bytes() for p in sorted(tables.rglob("*")) if p.is_file()} == published  # nothing new either
    report = tmp_path / "tables"
    assert f"into {report}" in done.stdout
    assert "<!-- reproduce:headline:cpu begin -->" in (report / "headline.md").read_text()
    both = subprocess.run([sys.executable, script, "headline", "--report-only", "--runs-dir", str(tmp_path),
                           "--write-docs", "--tables-dir", str(tmp_path / "x")], capture_output=True, text=True,
                          timeout=120)
    assert both.returncode == 2 and both.stderr.count("\n") == 1


def _interval(job: Job) -> tuple[float, float]:
    """When the cell's training process wrote its first file (config.json) and its last (results.json)."""
    return (job.out / "config.json").stat().st_mtime, (job.out / "results.json").stat().st_mtime


@pytest.mark.slow
def test_cells_per_gpu_trains_that_many_cells_at_once_and_the_sweep_measures_them(tiny_protocol, tmp_path, mnist):
    from pyroinv.frontends.sweep import SWEEP_PROTOCOL, sweep, table

    with DaskRunner(cells_per_gpu=2) as runner:  # no CUDA here: one GPU's worth of workers, the same code path
        assert runner.workers == 2 and runner.slots() == 2
    lines = []
    rows = sweep([2], tmp_path, epochs=1, report=lines.append, base="tiny")
    jobs = [Job(grids.tables()["tableC2"].rows["learned (5° init)"]["mnist-rot"], s, SWEEP_PROTOCOL, tmp_path / "k2")
            for s in (0, 1)]
    (a0, a1), (b0, b1) = (_interval(j) for j in jobs)
    assert a0 < b1 and b0 < a1  # the two cells trained at the same time
    assert [r["cells_at_once"] for r in rows] == [2] and rows[0]["cells_per_hour"] > 0
    assert lines[0].startswith("sweep: K=2: ") and "| 2 |" in table(rows)


@pytest.mark.slow
def test_a_time_limit_starts_only_cells_that_can_finish_and_stops_the_rest(tiny_protocol, monkeypatch, tmp_path, mnist):
    monkeypatch.setitem(grids.PROTOCOLS, "tiny-endless", {"relu": {**TINY_SETTINGS, "epochs": 100000}})
    jobs = [Job(network("relu", "mnist-rot", fixed=a), 0, "tiny", tmp_path) for a in (45, 90)]
    lines = []
    with DaskRunner(workers=1) as runner:
        assert runner.run(jobs, report=lines.append, minutes=0.5, cell_minutes=5) == {}
        assert "2 cell(s) not started" in lines[-1] and not any(j.out.exists() for j in jobs)
        # a cell whose estimate from the kept cells is longer than the time left is passed over for one that fits
        outcomes = runner.run(jobs, report=lines.append, minutes=2, estimates={jobs[0]: 600.0})
        assert list(outcomes) == [jobs[1]] and jobs[1].state() == "done" and not jobs[0].out.exists()
        assert "1 cell(s) not started (the shortest takes about 10:00)" in lines[-1]
        jobs = [jobs[0], Job(network("relu", "mnist-rot", fixed=135), 0, "tiny", tmp_path)]

        endless = Job(network("relu", "mnist-rot", fixed=90), 0, "tiny-endless", tmp_path)
        t0 = time.perf_counter()
        assert runner.run([endless, *jobs], report=lines.append, minutes=0.25) == {}
        assert time.perf_counter() - t0 < 60
        assert lines[-1].startswith("time limit of 0.25 min reached: stopped 1 running cell(s) (relu-mnist-rot")
        assert "2 not started" in lines[-1] and endless.state() != "done"


def test_the_grid_runner_without_dask_names_the_extra_that_installs_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if dask.distributed were not installed
    with pytest.raises(ConfigError, match=r'pip install "pyroinv\[grid\]"'):
        DaskRunner(1).__enter__()
