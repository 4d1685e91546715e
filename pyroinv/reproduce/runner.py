"""Run the cells of a grid as subprocesses, resumably: a finished cell is never rerun.

A cell's folder is ``RUNS/PROTOCOL/NAME``; its console output goes to ``RUNS/PROTOCOL/NAME.log``.
Finished = ``results.json`` present (and the saved configuration equal to the cell's, else the
folder is refused as holding another run); a checkpoint without results = interrupted, continued
with ``--resume``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .grids import Cell

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@dataclass(frozen=True)
class Job:
    cell: Cell
    seed: int
    protocol: str
    root: Path

    @property
    def out(self) -> Path:
        return self.root / self.protocol / self.cell.name(self.seed)

    def argv(self, resume: bool) -> list[str]:
        args = [sys.executable, str(SCRIPTS / self.cell.script)]
        if resume:
            return [*args, "--out", str(self.out), "--resume", "--no-progress"]
        return [*args, *self.cell.argv(self.protocol, self.seed, str(self.out)), "--no-progress"]

    def differences(self, saved: dict) -> list[str]:
        """Settings in which a saved ``config.json`` differs from the run this cell would make."""
        cfg = self.cell.config(self.protocol, self.seed)
        if self.cell.kind == "sgpr":
            from ..baselines.sgpr import saved_config

            expected = saved_config(cfg)
            return sorted(k for k in set(saved) | set(expected) if saved.get(k) != expected.get(k))
        return cfg.differences(saved)

    def state(self) -> str:
        """``done``, ``partial`` (checkpoint, no results) or ``todo``."""
        if (self.out / "results.json").exists():
            return "done"
        return "partial" if (self.out / "checkpoint.pt").exists() else "todo"


def results(job: Job) -> dict | None:
    path = job.out / "results.json"
    return json.loads(path.read_text()) if path.exists() else None


class Runner:
    """Runs jobs ``jobs`` at a time, each with ``threads`` torch threads; Ctrl-C stops them cleanly."""

    def __init__(self, jobs: int = 1, threads: int = 1) -> None:
        self.jobs, self.threads = jobs, threads
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._stopping = False

    def _run(self, job: Job) -> tuple[Job, int]:
        if self._stopping:
            return job, -1
        state = job.state()
        if state == "done":
            return job, 0
        job.out.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)}
        argv = job.argv(resume=state == "partial")
        with open(job.out.with_name(job.out.name + ".log"), "a") as log:
            log.write(f"# {'resume' if state == 'partial' else 'start'}: {' '.join(argv)}\n")
            log.flush()
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    env=env)
            with self._lock:
                self._procs.add(proc)
            code = proc.wait()
            with self._lock:
                self._procs.discard(proc)
        return job, code

    def stop(self, *_args) -> None:
        """Send SIGTERM to running cells (they checkpoint) and start no new ones."""
        self._stopping = True
        with self._lock:
            for proc in self._procs:
                proc.send_signal(signal.SIGTERM)

    def run(self, jobs: list[Job], report=print) -> dict[Job, int]:
        for job in jobs:
            check_folder(job)
        todo = [j for j in jobs if j.state() != "done"]
        report(f"{len(jobs) - len(todo)} of {len(jobs)} cells already finished; running {len(todo)}, "
               f"{self.jobs} at a time")
        codes: dict[Job, int] = {}
        old = signal.signal(signal.SIGTERM, self.stop)
        try:
            with ThreadPoolExecutor(self.jobs) as pool:
                futures = [pool.submit(self._run, job) for job in todo]
                for i, future in enumerate(as_completed(futures), 1):
                    job, code = future.result()
                    codes[job] = code
                    r = results(job)
                    what = (f"{r['learned_invariance']}, test acc. {100 * r['test_accuracy']:.2f}%"
                            if r else f"failed (exit {code}), see {job.out}.log")
                    report(f"[{i}/{len(todo)}] {job.out.name}: {what}")
        except KeyboardInterrupt:
            self.stop()
            raise
        finally:
            signal.signal(signal.SIGTERM, old)
        return codes


def check_folder(job: Job) -> None:
    """Refuse a cell folder whose saved configuration is not the cell's."""
    path = job.out / "config.json"
    if path.exists():
        diff = job.differences(json.loads(path.read_text()))
        if diff:
            raise ConfigError(f"{job.out} holds a run with other settings ({', '.join(diff)}); move it away "
                              f"or pass another --runs-dir")
