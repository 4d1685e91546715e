"""One writer per run folder: a second trainer stops before writing, stale locks are taken over, a child works
under the lock its parent hands down, and a refused run leaves nothing behind."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from pyroinv.run import lock
from pyroinv.files import read_jsonl
from pyroinv.run.experiment import run_experiment
from pyroinv.run.lock import FolderLocked, RunLock

from .test_experiment import ROOT, TINY, run_script, tiny_config


def _dead_pid() -> int:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return dead.pid


@pytest.mark.slow
def test_a_second_trainer_on_the_same_folder_stops_with_one_line_naming_the_holder(tmp_path, cache_dir, mnist):
    out = tmp_path / "run"
    longer = [*TINY, "--train-size", "2000", "--epochs", "50", "--log-every", "10", "--out", str(out)]
    env = {**os.environ, "PYROINV_CACHE": str(cache_dir), "PYROINV_OFFLINE": "1", "MPLBACKEND": "Agg"}
    first = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "svi_train.py"), *longer], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not (out / "metrics.jsonl").exists() and time.time() < deadline:
            time.sleep(0.1)
        assert first.poll() is None, first.stderr.read()
        before = {name: (out / name).read_bytes() for name in ("config.json", "meta.json")}
        second = run_script(longer, cache_dir)
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        first.send_signal(signal.SIGTERM)  # it writes a checkpoint and stops
        first.wait(timeout=120)
    assert second.returncode == 2
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {out} is being trained by pid {first.pid} on host "
                                                   f"{socket.gethostname()} since "), second.stderr
    assert "wait, or use another --out" in lines[0]
    assert first.returncode == 128 + signal.SIGTERM, first.stderr.read()
    steps = [r["step"] for r in read_jsonl(out / "metrics.jsonl")]
    assert steps and steps == sorted(set(steps)), "two runs' metrics were interleaved"
    assert all(before[name] == (out / name).read_bytes() for name in before)
    assert not (out / lock.LOCK).exists()


def test_a_stale_lock_is_taken_over_and_another_hosts_lock_is_respected(tmp_path):
    (tmp_path / lock.LOCK).write_text(json.dumps({"host": socket.gethostname(), "pids": [_dead_pid()]}))
    assert lock.acquire(tmp_path)
    record = json.loads((tmp_path / lock.LOCK).read_text())
    assert record["pids"] == [os.getpid()] and record["host"] == socket.gethostname() and record["token"]
    (tmp_path / lock.LOCK).write_text(json.dumps({"host": "another-host", "pids": [_dead_pid()], "since": 0}))
    assert not lock.acquire(tmp_path)
    with pytest.raises(FolderLocked, match=r"is being trained by pid \d+ on host another-host since \d\d:\d\d; wait"):
        RunLock(tmp_path).__enter__()


def test_a_child_works_under_the_lock_its_parent_hands_down(tmp_path, monkeypatch):
    assert lock.acquire(tmp_path, token="parent-token")
    monkeypatch.setenv(lock.TOKEN_ENV, "another-token")
    with pytest.raises(FolderLocked):
        RunLock(tmp_path).__enter__()
    monkeypatch.setenv(lock.TOKEN_ENV, "parent-token")
    with RunLock(tmp_path) as held:
        assert not held.owned  # the parent releases it
    assert (tmp_path / lock.LOCK).exists()
    lock.release(tmp_path)


@pytest.mark.slow
def test_a_run_refused_for_a_lock_writes_nothing_and_a_finished_run_releases_it(tmp_path, cache_dir, mnist):
    out = tmp_path / "new" / "run"
    out.mkdir(parents=True)
    (out / lock.LOCK).write_text(json.dumps({"host": "another-host", "pids": [1], "since": time.time()}))
    with pytest.raises(FolderLocked):
        run_experiment(tiny_config(), out, cache_dir=cache_dir, progress=False, quiet=True)
    assert [p.name for p in out.iterdir()] == [lock.LOCK]
    lock.release(out)
    fresh = tmp_path / "fresh" / "a" / "b"
    bad = tiny_config(dataset=str(tmp_path / "missing.npz"))
    with pytest.raises(Exception):
        run_experiment(bad, fresh, cache_dir=cache_dir, progress=False, quiet=True)
    assert not (tmp_path / "fresh").exists()  # the folders the lock created are gone again
    run_experiment(tiny_config(), out, cache_dir=cache_dir, progress=False, quiet=True)
    assert (out / "results.json").exists() and not (out / lock.LOCK).exists()
