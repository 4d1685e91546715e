"""Run the cells of a grid on a Dask cluster, resumably: a finished cell is never rerun.

A cell's folder is ``RUNS/PROTOCOL/NAME``; its console output goes to ``RUNS/PROTOCOL/NAME.log``.
What a folder holds is :meth:`pyroinv.run.folder.RunFolder.state`'s answer, the same rules as the command
line's: finished (``results.json``), resumable (a checkpoint, the latest or the one before it: continued with
``--resume``), unstarted (empty, or killed before its first checkpoint: started again from step 0), or
holding another run (refused).

The unit of work sent to a worker is :func:`train_cell`: "train or resume this run folder", one
``svi_train.py`` (or ``sgpr_train.py``) process under the run folder's lock (:mod:`pyroinv.run.lock`, the same
lock ``svi_train.py`` takes: the process works under its worker's lock through ``$PYROINV_RUN_LOCK``). So a worker
that dies
leaves a checkpoint, and the cell, rescheduled by Dask (``retries`` on the future, and the scheduler's own
rescheduling of a lost worker's tasks), resumes from it. :class:`DaskRunner` starts a ``LocalCluster`` sized
to the machine, or connects to a running scheduler (``--scheduler tcp://HOST:8786``); the run folders must
then be on storage every worker sees.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import ConfigError, PyroinvError, one_line
from ..run import lock as locks
from ..run.folder import DONE, FOREIGN, RESUMABLE, RunFolder
from .grids import Cell
from .kept import keep, kept_folder

#: the ``pyroinv`` command (``python -m pyroinv COMMAND``) that runs each script's cells, so that a worker needs the
#: installed package only
COMMAND = {"svi_train.py": "train", "sgpr_train.py": "sgpr"}


class CellError(PyroinvError):
    """A cell could not be trained on a worker (one line)."""


@dataclass(frozen=True)
class Job:
    cell: Cell
    seed: int
    protocol: str
    root: Path

    @property
    def out(self) -> Path:
        return self.root / self.protocol / self.cell.name(self.seed)

    @property
    def log(self) -> Path:
        return self.out.with_name(self.out.name + ".log")

    def cell_args(self) -> list[str]:
        """The script's flags for this cell (computed where the grids are defined: on the driver)."""
        return self.cell.argv(self.protocol, self.seed, str(self.out))

    def argv(self, resume: bool, cell_args: list[str] | None = None) -> list[str]:
        """The command that starts (or, with ``resume``, continues) the cell, with this Python: ``python -m pyroinv
        train ...`` (or ``sgpr``), which needs the installed package, not a checkout of the repository."""
        args = [sys.executable, "-m", "pyroinv", COMMAND[self.cell.script]]
        if resume:
            return [*args, "--out", str(self.out), "--resume", "--no-progress"]
        return [*args, *(self.cell_args() if cell_args is None else cell_args), "--no-progress"]

    def expected(self) -> Config | dict:
        """The settings of the run this cell makes, as its folder's ``config.json`` holds them
        (:meth:`RunFolder.differences` compares them)."""
        cfg = self.cell.config(self.protocol, self.seed)
        if self.cell.kind == "sgpr":
            from ..baselines.sgpr import saved_config

            return saved_config(cfg)
        return cfg

    def state(self, check_settings: bool = True) -> str:
        """``done``, ``partial`` (a checkpoint to resume) or ``todo`` (nothing, or killed before its first
        checkpoint), from :meth:`RunFolder.state`; a folder holding another run is refused (:func:`check_folder`).
        ``check_settings=False`` on a worker: the driver has compared the settings (the grids are defined there)."""
        state = RunFolder(self.out).state(self.expected() if check_settings else None)
        if state == FOREIGN:
            check_folder(self)
        if state != DONE and self.kept() is not None:
            return "done"  # finished on another machine; its outputs are kept in the repository
        return {DONE: "done", RESUMABLE: "partial"}.get(state, "todo")

    def kept(self) -> Path | None:
        """The folder of this cell's outputs kept in the repository (:mod:`.kept`), if it holds the same run."""
        folder = RunFolder(kept_folder(self.protocol, self.out.name))
        if not folder.is_finished():  # (a worker, which has not the grids' settings, asks only of finished folders)
            return None
        return folder.path if not folder.differences(self.expected()) else None


def results(job: Job) -> dict | None:
    """The cell's ``results.json``: from its run folder, else from the outputs kept in the repository."""
    for folder in (job.out, job.kept()):
        if folder is not None and (folder / "results.json").exists():
            return json.loads((folder / "results.json").read_text())
    return None


def check_folder(job: Job) -> None:
    """Refuse a cell folder whose saved configuration is not the cell's."""
    diff = RunFolder(job.out).differences(job.expected())
    if diff:
        raise ConfigError(
            f"{job.out} holds a run with other settings ({', '.join(diff)}); move it away or pass another --runs-dir"
        )


# ----------------------------------------------------------------------------------------------- worker side

#: the training processes this (worker) process has started, so that :func:`stop_cells` can reach them
_CHILDREN: set[subprocess.Popen] = set()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to send SIGTERM when the worker that started it dies (the training
    process then writes its checkpoint and exits), so a killed worker leaves no orphan training."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the child outlives a killed worker, as with any pool
        pass


def _distributed() -> tuple[Any, Any]:
    """Dask's ``Client`` and ``LocalCluster``, or a one-line error naming the extra that installs them."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError(
            'the Dask grid runner needs dask.distributed, which pyroinv installs with its "grid" '
            'extra: pip install "pyroinv[grid]" (or run the grid without --dask)'
        ) from None
    return Client, LocalCluster


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


def train_cell(
    job: Job, cell_args: list[str] | None = None, threads: int = 1, cells_per_gpu: int = 0, lock_wait: float = 30.0
) -> dict:
    """Train or resume ``job``'s folder in a subprocess (on whichever worker runs this); ``cell_args``: the
    script's flags as the driver computed them (:meth:`Job.cell_args`); ``lock_wait``: seconds to wait for a
    locked folder (e.g. the previous try's process still writing its checkpoint) before reporting it locked.

    Returns ``{"state": "done" | "trained" | "locked", "worker": ...}``; raises :class:`CellError` if the runs
    directory is not visible here or the training process failed (Dask then retries, which resumes from the
    checkpoint). ``cells_per_gpu``: on a local cluster whose workers are numbered 0, 1, ..., give the process GPU
    ``number // cells_per_gpu`` (so that many cells share each GPU); 0: leave ``CUDA_VISIBLE_DEVICES`` alone.
    """
    where = _worker_name()
    if not job.root.is_dir():
        raise CellError(
            f"worker {where} on {socket.gethostname()} cannot see the runs directory {job.root}; put "
            f"it on storage every worker shares (--runs-dir)"
        )
    if job.state(check_settings=False) == "done":
        return {"state": "done", "worker": where}
    token = uuid.uuid4().hex
    if not locks.acquire(job.out, wait=lock_wait, token=token):
        return {"state": "locked", "worker": where, "holder": locks.holder(job.out)}
    try:
        state = job.state(check_settings=False)
        if state == "done":  # finished by another driver while this one waited for the lock
            return {"state": "done", "worker": where}
        env = {
            **os.environ,
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            locks.TOKEN_ENV: token,
        }  # the training process works under this lock instead of refusing it
        if cells_per_gpu and where.isdigit() and "CUDA_VISIBLE_DEVICES" not in os.environ:
            env["CUDA_VISIBLE_DEVICES"] = str(int(where) // cells_per_gpu)
        argv = job.argv(resume=state == "partial", cell_args=cell_args)
        with open(job.log, "a") as log:
            log.write(f"# {'resume' if state == 'partial' else 'start'} on {where}: {' '.join(argv)}\n")
            log.flush()
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent)
            _CHILDREN.add(proc)
            locks.add_pid(job.out, proc.pid)
            try:
                code = proc.wait()
            finally:
                _CHILDREN.discard(proc)
    finally:
        locks.release(job.out)
    if code != 0:
        raise CellError(f"{job.out.name} exited with status {code} on {where}; see {job.log}")
    return {"state": "trained", "worker": where}


def stop_cells() -> int:
    """SIGTERM every training process of this worker (each checkpoints and exits); returns how many."""
    for proc in list(_CHILDREN):
        proc.send_signal(signal.SIGTERM)
    return len(_CHILDREN)


# ----------------------------------------------------------------------------------------------- driver side


def parse_resources(items: list[str] | None) -> dict[str, float]:
    """``["GPU=1"]`` -> ``{"GPU": 1.0}`` (one-line error otherwise)."""
    out: dict[str, float] = {}
    for item in items or []:
        name, _, value = item.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            raise ConfigError(f"--resources {item!r} is not NAME=AMOUNT, e.g. GPU=1") from None
        if not name or out[name] <= 0:
            raise ConfigError(f"--resources {item!r} is not NAME=AMOUNT with a positive amount, e.g. GPU=1")
    return out


def cuda_devices() -> int:
    """How many CUDA devices this machine has (0 without CUDA), without initialising CUDA in this process."""
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # a broken driver counts as none
        return 0


def prepare_data(jobs: list[Job]) -> list[str]:
    """Build (or find in the cache) every data set the jobs train on, once, before any cell starts: cells running
    at the same time on this machine then read the cached variant instead of each building it."""
    from ..data import load_dataset

    names = sorted({str(j.cell.setting("dataset")) for j in jobs})
    for name in names:
        if not name.endswith(".npz"):
            load_dataset(name)
    return names


class _Schedule:
    """One :meth:`DaskRunner.run`: the cells queued, submitted (no more at once than the runner's slots, and under a
    time limit only those expected to finish), collected as they finish, and stopped at the limit."""

    def __init__(
        self,
        runner: DaskRunner,
        todo: list[Job],
        report: Callable[[str], None],
        minutes: float | None,
        cell_minutes: float | None,
        estimates: dict[Job, float] | None,
    ) -> None:
        self.runner, self.todo, self.report, self.minutes = runner, todo, report, minutes
        self.cell_minutes, self.estimates = cell_minutes, estimates or {}
        self.queue = list(todo)
        self.futures: dict = {}
        self.started: dict = {}
        self.pending: set = set()
        self.outcomes: dict[Job, dict] = {}
        self.durations: list[float] = []
        self.t0, self.failed, self.finished = time.perf_counter(), 0, 0
        self.deadline = None if minutes is None else self.t0 + 60 * minutes
        self.slots = len(self.queue) if self.deadline is None else runner.slots()

    def need(self, job: Job) -> float:
        """Seconds the cell is expected to take: the longest finished in this call (before one has, ``cell_minutes``),
        or the cell's own estimate from the kept cells where that is longer."""
        here = max(self.durations) if self.durations else 60 * (self.cell_minutes or 0)
        return max(here, self.estimates.get(job, 0.0))

    def submit(self, job: Job):
        r = self.runner
        future = r.client.submit(
            train_cell,
            job,
            job.cell_args(),
            r.threads,
            r.cells_per_gpu,
            r.lock_wait,
            key=f"cell-{job.protocol}-{job.out.name}-{uuid.uuid4().hex[:8]}",
            retries=r.retries,
            resources=r.resources or None,
            pure=False,
        )
        self.futures[future], self.started[future] = job, time.perf_counter()
        self.pending.add(future)

    def start_what_fits(self) -> None:
        """Submit queued cells while there are free slots and, under a time limit, time for them."""
        while self.queue and len(self.pending) < self.slots:
            now = time.perf_counter()
            job = next((j for j in self.queue if self.deadline is None or now + self.need(j) <= self.deadline), None)
            if job is None:
                return
            self.queue.remove(job)
            self.submit(job)

    def collect(self, future) -> None:
        """A finished cell's outcome, kept on the driver when it trained, and its progress line."""
        self.pending.discard(future)
        job = self.futures[future]
        self.finished += 1
        try:
            outcome = future.result()
        except Exception as err:  # the cell's one-line error after its retries, or a lost worker
            outcome = {"state": "failed", "error": one_line(err, 300)}
            self.failed += 1
        self.outcomes[job] = outcome
        if outcome["state"] == "trained":
            self.durations.append(time.perf_counter() - self.started[future])
            keep(job.out, job.protocol)  # on the driver, in its repository: outlives the workers' machines
        self.report(self.runner._line(job, outcome, self.finished, len(self.todo), self.failed, self.pending, self.t0))

    def drive(self, wait: Callable) -> None:
        """Run until every cell has finished, or the time limit (cells still training are stopped, checkpointed)."""
        while self.queue or self.pending:
            self.start_what_fits()
            if not self.pending:
                break
            timeout = None if self.deadline is None else max(self.deadline - time.perf_counter(), 0.0)
            try:
                done, _ = wait(list(self.pending), timeout=timeout, return_when="FIRST_COMPLETED")
            except TimeoutError:
                running = [self.futures[f].out.name for f in self.pending]
                self.runner.stop(self.pending)
                self.report(
                    f"time limit of {self.minutes:g} min reached: stopped {len(running)} running cell(s) "
                    f"({', '.join(running)}; each checkpointed), {len(self.queue)} not started"
                )
                return
            for future in done:
                self.collect(future)
        if self.queue and self.deadline is not None and not self.pending:
            self.report(
                f"time limit of {self.minutes:g} min: {len(self.queue)} cell(s) not started (the shortest takes "
                f"about {_elapsed(min(self.need(j) for j in self.queue))}); run again to go on"
            )


def _elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class DaskRunner:
    """Runs jobs on Dask: a ``LocalCluster`` of ``workers`` processes (one cell each at a time), or the scheduler
    at ``scheduler`` (default ``$DASK_SCHEDULER_ADDRESS``). Use as a context manager.

    Args:
        workers: size of the local cluster (``--jobs``).
        threads: torch threads per cell.
        scheduler: address of a running scheduler; ``None`` starts a local cluster.
        resources: what each cell asks of a worker (e.g. ``{"GPU": 1}``: workers started with that resource run
            one cell per GPU; local workers are started with it and pin the GPU of their number).
        cells_per_gpu: run this many cells at once on each GPU. A local cluster gets ``cells_per_gpu`` workers per
            GPU of the machine (at least one GPU's worth without CUDA), worker ``i`` pinned to GPU
            ``i // cells_per_gpu``; with ``scheduler``, each cell asks ``GPU = 1 / cells_per_gpu`` of a worker
            (start them with ``--resources GPU=1 --nthreads cells_per_gpu``).
        retries: how often a failed cell is tried again (each try resumes from its checkpoint).
        lock_wait: seconds a cell waits for its folder's lock before it is reported as held by another driver.
        connect_timeout: seconds to wait for ``scheduler`` to answer before a one-line :class:`ConfigError`.
    """

    def __init__(
        self,
        workers: int = 1,
        threads: int = 1,
        scheduler: str | None = None,
        resources: dict[str, float] | None = None,
        retries: int = 1,
        lock_wait: float = 30.0,
        connect_timeout: float = 20.0,
        cells_per_gpu: int = 0,
    ) -> None:
        self.workers, self.threads, self.retries, self.lock_wait = workers, threads, retries, lock_wait
        self.connect_timeout = connect_timeout
        self.scheduler = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
        self.resources = dict(resources or {})
        self.cells_per_gpu = cells_per_gpu
        if cells_per_gpu:
            if self.scheduler:
                self.resources["GPU"] = 1.0 / cells_per_gpu
            else:
                self.workers = max(cuda_devices(), 1) * cells_per_gpu
        elif self.resources.get("GPU") and not self.scheduler:
            self.cells_per_gpu = 1  # local workers started with a GPU each: pin the GPU of their number
        self.client: Any = None  # a distributed.Client once entered
        self._cluster: Any = None

    def __enter__(self) -> DaskRunner:
        Client, LocalCluster = _distributed()

        if self.scheduler:
            try:
                self.client = Client(self.scheduler, timeout=f"{self.connect_timeout}s")
            except (OSError, TimeoutError) as err:
                raise ConfigError(
                    f"no Dask scheduler answers at {self.scheduler} ({one_line(err)}); start one "
                    f"(dask scheduler) or drop --scheduler"
                ) from None
        else:
            self._cluster = LocalCluster(
                n_workers=self.workers,
                threads_per_worker=1,
                processes=True,
                resources=self.resources or None,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            )
            self.client = Client(self._cluster)
        return self

    def __exit__(self, *exc) -> None:
        if self.client is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()

    def stop(self, futures) -> None:
        """Cancel what has not started and SIGTERM the cells that have (they checkpoint)."""
        self.client.cancel(list(futures))
        try:
            self.client.run(stop_cells)
        except Exception:  # workers already gone
            pass

    @staticmethod
    def _line(job: Job, outcome: dict, i: int, total: int, failed: int, pending: set, t0: float) -> str:
        """``[3/8] CELL: rotation ±90.0°, test acc. 97.10% (3 done, 2 in progress, 0 failed, 4:10)``."""
        r = results(job)
        if outcome["state"] == "locked":
            what = f"skipped: another driver is training it ({(outcome.get('holder') or {}).get('host')})"
        elif r:
            what = f"{r['learned_invariance']}, test acc. {100 * r['test_accuracy']:.2f}%"
        else:
            what = f"failed: {outcome.get('error')}; see {job.log}"
        return (
            f"[{i}/{total}] {job.out.name}: {what} ({i - failed} done, {len(pending)} in progress, {failed} failed, "
            f"{_elapsed(time.perf_counter() - t0)})"
        )

    def slots(self) -> int:
        """How many cells run at once: the local workers, or the threads of the scheduler's workers."""
        if not self.scheduler:
            return self.workers
        return max(sum(w.get("nthreads", 1) for w in self.client.scheduler_info()["workers"].values()), 1)

    def run(
        self,
        jobs: list[Job],
        report: Callable[[str], None] = print,
        minutes: float | None = None,
        cell_minutes: float | None = None,
        estimates: dict[Job, float] | None = None,
    ) -> dict[Job, dict]:
        """Train every job not finished; returns each submitted job's outcome (``state``, ``worker``, ``error``).

        ``minutes``: a time limit. Cells are started in order, no more at once than :meth:`slots`, and a cell
        is started only while the time left exceeds its expected duration: the longest cell finished in this call
        (before one has finished, ``cell_minutes``, else nothing), or the cell's own estimate in seconds from the
        kept cells (``estimates``, :mod:`pyroinv.reproduce.estimate`) where that is longer; a cell that would not
        finish is passed over for the next one that would. At the limit the cells still training are stopped (each
        writes its checkpoint) and the rest are left for the next call.
        """
        from distributed import wait

        todo = self._prepare(jobs, report)
        schedule = _Schedule(self, todo, report, minutes, cell_minutes, estimates)
        try:
            schedule.drive(wait)
        except KeyboardInterrupt:
            self.stop(schedule.futures)
            raise
        return schedule.outcomes

    def _prepare(self, jobs: list[Job], report: Callable[[str], None]) -> list[Job]:
        """The jobs not finished, their folders checked and made; the finished ones kept; the data prepared."""
        for job in jobs:
            check_folder(job)
        todo = [j for j in jobs if j.state() != "done"]
        for job in jobs:  # finished before: kept now (a no-op for a cell kept already and not run here)
            if job not in todo:
                keep(job.out, job.protocol)
        for root in {j.root for j in todo}:
            root.mkdir(parents=True, exist_ok=True)
        where = f"scheduler {self.scheduler}" if self.scheduler else f"a local cluster of {self.workers} worker(s)"
        report(
            f"{len(jobs) - len(todo)} of {len(jobs)} cells already finished; running {len(todo)} on {where}; "
            f"dashboard {self.client.dashboard_link}"
        )
        if not self.scheduler and todo:
            prepare_data(todo)  # once on this machine, not once per cell
        return todo
