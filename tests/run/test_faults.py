"""Faults a run folder meets outside training proper: a full disk (a real small file system where this machine lets
the tests mount one, injected errors everywhere), the user's umask, signals during the final evaluation (with the
warnings a user cannot act on kept out of the output)."""
import errno
import json
import importlib.util
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pyroinv.frontends.train import train_main
from pyroinv import files as checkpoint
from pyroinv.run import experiment
from pyroinv.files import RunWriteError, load_checkpoint, read_jsonl
from pyroinv.run.experiment import run_experiment

from .test_experiment import ROOT, TINY, run_script, tiny_config


@pytest.fixture
def small_disk(tmp_path):
    """``small_disk("3m")``: a folder on a tmpfs of that size (skips where mounting is not allowed);
    ``small_disk.grow(folder)`` makes room on it (remounted at 64 MiB), as a user freeing space would."""
    mounted = []

    def mount(size: str):
        folder = tmp_path / f"disk-{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a small file system here ({done.stderr.strip()[:80]})")
        mounted.append(folder)
        return folder

    def grow(folder) -> None:
        subprocess.run(["mount", "-o", "remount,size=64m", str(folder)], check=True)

    mount.grow = grow
    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.slow
def test_a_full_disk_during_training_is_one_line_and_resume_continues_once_there_is_room(small_disk, cache_dir,
                                                                                            mnist):
    out = small_disk("3m") / "run"
    args = [*TINY, "--train-size", "1000", "--hidden", "256", "--log-every", "10", "--no-progress", "--out", str(out)]
    full = run_script(args, cache_dir)
    assert full.returncode == 2
    line = _one_error_line(full.stderr)
    assert line.startswith(f"error: cannot write {out}/") and "the disk is full (ENOSPC)" in line and "--resume" in line
    assert not (out / "results.json").exists() and not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    small_disk.grow(out.parent)
    resumed = train_main([*args, "--resume", "--cache-dir", str(cache_dir)])
    assert resumed == 0 and json.loads((out / "results.json").read_text())["steps"] == 64


@pytest.mark.slow
def test_a_full_disk_after_training_keeps_the_final_checkpoint(small_disk, cache_dir, mnist):
    out = small_disk("700k") / "run"  # room for the checkpoints and metrics, not for every plot
    args = [*TINY, "--no-progress", "--out", str(out)]
    full = run_script(args, cache_dir)
    assert full.returncode == 2
    assert "the disk is full (ENOSPC)" in _one_error_line(full.stderr)
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 8 and not (out / "results.json").exists()
    small_disk.grow(out.parent)
    assert train_main([*args, "--resume", "--cache-dir", str(cache_dir)]) == 0
    assert {p.name for p in out.iterdir()} >= {"results.json", "posterior.nc", "filters.png"}


@pytest.mark.slow
@pytest.mark.parametrize("target, code, reason", [
    ("checkpoint.pt", errno.ENOSPC, "the disk is full (ENOSPC)"),
    ("posterior.nc", errno.EDQUOT, "the disk quota is exceeded (EDQUOT)"),
    ("eta.png", errno.EIO, "Input/output error (EIO)"),
    ("results.json", errno.ENOSPC, "the disk is full (ENOSPC)"),
])
def test_an_injected_write_error_names_the_file_and_keeps_what_was_written(tmp_path, cache_dir, mnist, monkeypatch,
                                                                          target, code, reason):
    replace, calls = os.replace, []

    def failing_replace(src, dst):
        if str(dst).endswith("/" + target):
            calls.append(dst)
            if target != "checkpoint.pt" or len(calls) == 2:  # the second checkpoint: the first one is kept
                raise OSError(code, os.strerror(code))
        return replace(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", failing_replace)
    out = tmp_path / "run"
    with pytest.raises(RunWriteError) as err:
        run_experiment(tiny_config(), out, cache_dir=cache_dir, progress=False, quiet=True)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"cannot write {out / target}: {reason};")
    assert not (out / "results.json").exists() and not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    assert load_checkpoint(out / "checkpoint.pt")["step"] == (4 if target == "checkpoint.pt" else 8)
    monkeypatch.undo()
    run_experiment(tiny_config(), out, resume=True, cache_dir=cache_dir, progress=False, quiet=True)
    assert json.loads((out / "results.json").read_text())["steps"] == 8


def test_a_failing_metrics_line_is_one_line_and_the_torn_record_is_dropped_on_resume(tmp_path, cache_dir, mnist,
                                                                                  monkeypatch):
    class FillingFile:
        """The metrics file of a disk that fills after five records (step 4 checkpointed): the sixth is written in part."""

        def __init__(self, f):
            self.f, self.lines = f, 0

        def write(self, text):
            self.lines += 1
            if self.lines > 5:
                self.f.write(text[:7])
                self.f.flush()
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.f.write(text)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(experiment, "open", lambda *a, **k: FillingFile(open(*a, **k)), raising=False)
    out = tmp_path / "run"
    with pytest.raises(RunWriteError, match=rf"^cannot write {out / 'metrics.jsonl'}: the disk is full \(ENOSPC\);"):
        run_experiment(tiny_config(), out, cache_dir=cache_dir, progress=False, log_every=1, quiet=True)
    monkeypatch.undo()
    run_experiment(tiny_config(), out, resume=True, cache_dir=cache_dir, progress=False, log_every=1, quiet=True)
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == list(range(1, 9))


@pytest.mark.slow
@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_run_files_get_the_mode_the_umask_gives(tmp_path, cache_dir, mnist, umask):
    previous = os.umask(umask)
    try:
        out = tmp_path / "run"
        run_experiment(tiny_config(), out, cache_dir=cache_dir, progress=False, quiet=True)
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert {"config.json", "meta.json", "metrics.jsonl", "results.json", "checkpoint.pt", "checkpoint.prev.pt",
            "posterior.nc", "eta.png"} <= set(modes)
    assert modes == {name: 0o666 & ~umask for name in modes}, modes


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, cache_dir, mnist):
    """The results of TINY (as the command line saves it: device auto) run without interruption."""
    out = tmp_path_factory.mktemp("whole") / "run"
    run_experiment(tiny_config(device="auto"), out, cache_dir=cache_dir, progress=False, quiet=True)
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("sig, where", [(signal.SIGINT, "run.plots.plot_filter_banks"),
                                        (signal.SIGTERM, "inference.arviz_export.save_inference_data")])
def test_a_signal_during_the_final_evaluation_leaves_a_folder_resume_finishes(tmp_path, cache_dir, uninterrupted, sig,
                                                                             where):
    package, module, name = where.split(".")
    out = tmp_path / "cut"
    child = textwrap.dedent(f"""
        import os, signal, sys
        from pyroinv.{package} import {module} as target
        from pyroinv.frontends.train import train_main
        original = target.{name}
        def stopped(*args, **kwargs):
            os.kill(os.getpid(), {int(sig)})
            return original(*args, **kwargs)
        target.{name} = stopped
        sys.exit(train_main({[*TINY, "--no-progress", "--out", str(out)]!r}))
    """)
    # a machine arviz has not seen today: arviz < 1 then warns of its coming refactor on import, which the run hides
    fresh = {"XDG_CACHE_HOME": str(tmp_path / "xdg-cache")}
    env = {**os.environ, **fresh, "PYROINV_CACHE": str(cache_dir), "PYROINV_OFFLINE": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-c", child], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 128 + sig, proc.stderr
    assert "Traceback" not in proc.stderr
    # the arviz releases that warn once a day of the refactor (0.23 on) note the day in their cache: the warning was due
    daily = "daily_warning" in Path(importlib.util.find_spec("arviz").origin).read_text()
    assert "Warning" not in proc.stderr and (not daily or (tmp_path / "xdg-cache" / "arviz").exists()), proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (f"stopped by signal {signal.Signals(sig).name} during the final evaluation, plots and ArviZ "
                    f"export; the trained checkpoint is kept, finish the run with --resume")
    assert not (out / "results.json").exists() and not (out / ".lock").exists()
    got = run_experiment(tiny_config(device="auto"), out, resume=True, cache_dir=cache_dir, progress=False, quiet=True)
    assert {k: got[k] for k in ("test_accuracy", "test_nll", "eta", "steps")} == \
        {k: uninterrupted[k] for k in ("test_accuracy", "test_nll", "eta", "steps")}


