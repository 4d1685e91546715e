"""Property-based tests (hypothesis) of the input contract.

Whatever the user hands over, a run either finishes with finite results, or stops with one line on stderr
(``error: ...``), exit status 2, no traceback, and nothing that was already written lost or changed.
Generated cases are kept small so the suite stays fast.
"""
from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pyroinv import files as checkpoint
from pyroinv.run import lock
from pyroinv.files import read_json
from pyroinv.frontends.train import train_main, train_parser
from pyroinv.data import validate_arrays
from pyroinv.errors import DataError

SMALL = ["--hidden", "4", "--samples", "2", "--epochs", "1", "--batch-size", "8", "--eval-draws", "2",
         "--log-every", "1", "--no-progress"]


def _run(argv: list[str]) -> tuple[int, str]:
    """``svi_train.py`` in this process: exit status and stderr (argparse's exits included)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = train_main(argv)
        except SystemExit as e:
            rc = int(e.code or 0)
    return rc, err.getvalue()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _assert_contract(rc: int, err: str, out: Path, before: dict[str, bytes], root: Path) -> None:
    assert "Traceback" not in err, err
    if rc == 0:
        results = read_json(out / "results.json")
        assert math.isfinite(results["test_accuracy"]) and math.isfinite(results["test_nll"])
        if results["elbo_per_datapoint"] is not None:
            assert math.isfinite(results["elbo_per_datapoint"])
        return
    assert rc == 2, (rc, err)
    lines = [line for line in err.strip().splitlines() if line]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err  # a fault met after loading follows the data's log line
    after = _snapshot(root)
    assert all(after.get(k) == v for k, v in before.items()), "a file written before was lost or changed"


# --------------------------------------------------------------------------------------------------------------
# .npz files: shapes, dtypes, value ranges, label sets, NaN and infinities, empty splits, one-pixel images,
# channels-last against channels-first

MUTATIONS = ["nan", "inf", "wide-floats", "negative-floats", "channels-last", "skipping-labels", "negative-label",
             "float-labels", "2-D-labels", "single-class", "empty-train", "empty-test", "drop-x_test", "drop-y_train",
             "test-shape-mismatch", "label-count-mismatch", "one-pixel", "5-D", "bool-images", "int32-images",
             "test-label-beyond", "object-labels"]


@st.composite
def npz_contents(draw) -> dict[str, np.ndarray]:
    """A valid data set (images N×H×W or N×C×H×W, uint8 or float in [0, 1], or 2-D points; dense labels),
    then, half of the time, one thing done wrong."""
    k = draw(st.integers(2, 4))
    n_train, n_test = draw(st.integers(k, 10)), draw(st.integers(1, 5))
    layout = draw(st.sampled_from(["NHW", "NCHW", "N2"]))
    h, w, c = draw(st.integers(2, 6)), draw(st.integers(2, 6)), draw(st.sampled_from([1, 3]))
    if draw(st.booleans()):
        w = h  # square images are the common case
    dtype = draw(st.sampled_from([np.uint8, np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))

    def inputs(n: int) -> np.ndarray:
        if layout == "N2":
            return rng.normal(size=(n, 2)).astype(np.float32)
        shape = (n, h, w) if layout == "NHW" else (n, c, h, w)
        return rng.integers(0, 256, shape).astype(np.uint8) if dtype == np.uint8 else rng.random(shape).astype(dtype)

    a = {"x_train": inputs(n_train), "y_train": np.arange(n_train) % k,
         "x_test": inputs(n_test), "y_test": np.arange(n_test) % k}
    mutation = draw(st.sampled_from([None] * len(MUTATIONS) + MUTATIONS))
    x = a["x_train"]
    if mutation in ("nan", "inf") and x.dtype != np.uint8:
        x.flat[rng.integers(x.size)] = np.nan if mutation == "nan" else np.inf
    elif mutation == "wide-floats":
        a["x_train"] = x.astype(np.float32) * 300
    elif mutation == "negative-floats":
        a["x_train"] = x.astype(np.float32) - 2
    elif mutation == "channels-last" and x.ndim == 4:
        a["x_train"], a["x_test"] = x.transpose(0, 2, 3, 1), a["x_test"].transpose(0, 2, 3, 1)
    elif mutation == "skipping-labels":
        a["y_train"] = np.where(a["y_train"] == k - 1, 99, a["y_train"])
    elif mutation == "negative-label":
        a["y_train"] = a["y_train"] - 1
    elif mutation == "float-labels":
        a["y_train"] = a["y_train"].astype(np.float32)
    elif mutation == "2-D-labels":
        a["y_test"] = a["y_test"].reshape(-1, 1)
    elif mutation == "single-class":
        a["y_train"] = np.zeros(n_train, dtype=np.int64)
    elif mutation == "empty-train":
        a["x_train"], a["y_train"] = x[:0], a["y_train"][:0]
    elif mutation == "empty-test":
        a["x_test"], a["y_test"] = a["x_test"][:0], a["y_test"][:0]
    elif mutation in ("drop-x_test", "drop-y_train"):
        del a[mutation[5:]]
    elif mutation == "test-shape-mismatch" and layout != "N2":
        a["x_test"] = inputs(n_test)[..., :1]
    elif mutation == "label-count-mismatch":
        a["y_train"] = a["y_train"][:-1]
    elif mutation == "one-pixel" and layout != "N2":
        a["x_train"], a["x_test"] = x[..., :1, :1], a["x_test"][..., :1, :1]
    elif mutation == "5-D":
        a["x_train"] = x.reshape(*x.shape, 1)
    elif mutation == "bool-images":
        a["x_train"] = x > 0.5 if x.dtype != np.uint8 else x > 127
    elif mutation == "int32-images" and layout != "N2":
        a["x_train"] = x.astype(np.int32)
    elif mutation == "test-label-beyond":
        a["y_test"] = a["y_test"] + k
    elif mutation == "object-labels":
        a["y_train"] = np.array([str(v) for v in a["y_train"]])
    return a


@settings(max_examples=300, deadline=None)
@given(npz_contents())
def test_any_npz_is_accepted_whole_or_refused_in_one_line(arrays):
    try:
        split = validate_arrays(arrays)
    except DataError as err:
        assert "\n" not in str(err) and str(err)
        return
    # accepted: the split keeps the loader's promises
    K = split.num_classes
    assert K >= 2 and set(np.unique(split.y_train)) == set(range(K))
    assert split.y_test.min(initial=0) >= 0 and split.y_test.max(initial=0) < K
    x = split.x_train
    assert len(x) == len(split.y_train) > 0 and len(split.x_test) == len(split.y_test) > 0
    if split.is_image:
        assert x.ndim == 4 and x.shape[1:] == split.x_test.shape[1:]
        assert x.dtype == np.uint8 or (x.dtype == np.float32 and np.isfinite(x).all() and 0 <= x.min()
                                       and x.max() <= 1)
    else:
        assert x.shape[1:] == (2,) and np.isfinite(x).all()


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(npz_contents(), st.sampled_from(["none", "rotation", "translation", "scale", "affine"]))
def test_any_npz_on_the_command_line_trains_or_is_one_line(arrays, invariance):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "mine.npz"
        np.savez(path, **arrays)
        before = _snapshot(root)
        out = root / "run"
        rc, err = _run(["--dataset", str(path), "--invariance", invariance, *SMALL, "--out", str(out)])
        event("trained" if rc == 0 else "refused: " + err.split(";")[0].split(" has ")[-1][:40])
        _assert_contract(rc, err, out, before, root)
        if rc == 2:
            assert not (out / "checkpoint.pt").exists()


# --------------------------------------------------------------------------------------------------------------
# command lines: numbers at and past their bounds, flags that do not apply together

NUMBER_FLAGS = ["--hidden", "--samples", "--epochs", "--batch-size", "--eval-draws", "--lr", "--mean-lr", "--eta-lr",
                "--alpha", "--guide-init-scale", "--w1-init-scale", "--blur-sigma", "--rff-sigma", "--train-size",
                "--test-size", "--init-eta", "--fixed-eta", "--width-weight", "--log-every", "--seed"]
NUMBERS = st.sampled_from(["0", "-1", "1", "2", "0.5", "1e-12", "1e12", "nan", "inf", "-inf", "3.5", "999999999999",
                           "", "x", "1e400", "180", "-180", "1000"])
CHOICES = st.sampled_from([[], ["--inference", "ml"], ["--inference", "map"], ["--inference", "augerino"],
                           ["--network", "rff"], ["--invariance", "none"], ["--invariance", "affine"],
                           ["--eta-constraint", "softplus"], ["--eta-constraint", "none"], ["--estimator", "shared"],
                           ["--average", "logits"], ["--elbo", "closed-form"], ["--sampling", "deterministic"],
                           ["--device", "cuda"], ["--resume"], ["--width-weight", "0.1"]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NUMBER_FLAGS), NUMBERS), max_size=3), st.lists(CHOICES, max_size=2))
def test_any_command_line_parses_to_a_valid_config_or_one_line(numbers, choices):
    """Parsing and validation only (no data, no training): the front door of every run."""
    from pyroinv.frontends.train import config_from_args
    from pyroinv.errors import PyroinvError

    argv = [a for flag, value in numbers for a in (flag, value)] + [a for c in choices for a in c]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            cfg = config_from_args(train_parser().parse_args(argv))
        except SystemExit as e:
            assert e.code == 2
            lines = err.getvalue().strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), err.getvalue()
            return
        except PyroinvError as e:
            assert "\n" not in str(e)
            return
    for name in ("hidden", "samples", "epochs", "batch_size", "eval_draws"):
        assert getattr(cfg, name) >= 1
    for name in ("lr", "alpha", "guide_init_scale", "w1_init_scale"):
        assert math.isfinite(getattr(cfg, name)) and getattr(cfg, name) > 0


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, cache_dir, mnist):
    """One tiny run on real MNIST, stopped after its second epoch's checkpoint so it can be resumed."""
    from pyroinv.config import Config
    from pyroinv.run.experiment import run_experiment

    out = tmp_path_factory.mktemp("props") / "run"
    cfg = Config(dataset="mnist", train_size=40, test_size=20, hidden=4, samples=2, epochs=3, batch_size=8,
                 eval_draws=2, device="cpu")
    run_experiment(cfg, out, cache_dir=cache_dir, progress=False, log_every=1, max_steps=11, quiet=True)
    return out


ALTERATIONS = ["none", "truncate-latest", "truncate-both", "garbage-latest", "delete-latest", "delete-both",
               "delete-config", "garbage-config", "empty-config", "delete-metrics", "garbage-metrics",
               "other-flag", "other-folder-file", "locked-by-another-host", "stale-lock", "disk-full"]


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(st.sampled_from(ALTERATIONS), st.floats(0.0, 0.99))
def test_resume_against_altered_run_folders(finished_run, cache_dir, alteration, cut):
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        out = root / "run"
        shutil.copytree(finished_run, out)
        latest, prev = out / "checkpoint.pt", out / "checkpoint.prev.pt"
        extra: list[str] = []
        if alteration.startswith("truncate"):
            for p in ([latest] if alteration == "truncate-latest" else [latest, prev]):
                p.write_bytes(p.read_bytes()[: int(cut * p.stat().st_size)])
        elif alteration == "garbage-latest":
            latest.write_bytes(bytes(range(256)) * 4)
        elif alteration == "delete-latest":
            latest.unlink()
        elif alteration == "delete-both":
            latest.unlink()
            prev.unlink()
        elif alteration == "delete-config":
            (out / "config.json").unlink()
        elif alteration == "garbage-config":
            (out / "config.json").write_text("{not json")
        elif alteration == "empty-config":
            (out / "config.json").write_text("[]")
        elif alteration == "delete-metrics":
            (out / "metrics.jsonl").unlink()
        elif alteration == "garbage-metrics":
            (out / "metrics.jsonl").write_text("\x00\x01garbage\n{\"step\": \"x\"}\n")
        elif alteration == "other-flag":
            extra = ["--hidden", "8"]
        elif alteration == "other-folder-file":
            out = root / "a-file"
            out.write_text("not a folder")
        elif alteration in ("locked-by-another-host", "stale-lock"):
            dead = subprocess.Popen([sys.executable, "-c", "pass"])
            dead.wait()
            host = "another-host" if alteration == "locked-by-another-host" else socket.gethostname()
            (out / lock.LOCK).write_text(json.dumps({"host": host, "pids": [dead.pid], "since": 0}))
        before = _snapshot(root)
        faults = contextlib.ExitStack()
        if alteration == "disk-full":  # every write of the run fails as on a full disk
            faults.enter_context(mock.patch.object(checkpoint.os, "replace",
                                                   side_effect=OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
        with faults:
            rc, err = _run(["--out", str(out), "--resume", "--cache-dir", cache_dir, *extra])
        event(f"{alteration}: {'finished' if rc == 0 else 'refused'}")
        _assert_contract(rc, err, out, before, root)
