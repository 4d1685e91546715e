"""One writer per run folder: ``RUN/.lock``.

Training or resuming a run (``svi_train.py``, :func:`pyroinv.run.experiment.run_experiment`, ``sgpr_train.py``)
and the Dask runner's cells take the same lock. The file is created with ``O_CREAT | O_EXCL`` (atomic on local
and NFS v3+ file systems) and records the holder's host, process ids, start time and a token. A lock whose
processes are all gone from this host (a process or worker that died) is stale and is taken over; a lock held
from another host is respected until that host removes it (or a person deletes the file).

A holder that starts the training process itself (the runner) hands its token down in ``$PYROINV_RUN_LOCK``: a
process that finds the folder locked with the token it was given works under its parent's lock instead of
refusing. Readers (``evaluate.py``, :func:`pyroinv.run.folder.load_run`, a finished run in ``run_or_load``)
take no lock.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from pathlib import Path

from ..errors import PyroinvError

LOCK = ".lock"
#: environment variable through which a lock holder lets the process it starts work under its lock
TOKEN_ENV = "PYROINV_RUN_LOCK"


class FolderLocked(PyroinvError):
    """Another live process is training in this run folder."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def holder(folder: Path) -> dict | None:
    """The lock's record (``host``, ``pids``, ``since``, ``token``), or ``None`` if the folder is not locked."""
    try:
        record = json.loads((Path(folder) / LOCK).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"host": "?", "pids": []}  # being written, or damaged: treat as held
    return record if isinstance(record, dict) else {"host": "?", "pids": []}


def is_stale(record: dict) -> bool:
    """Held from this host by processes that are all gone."""
    return record.get("host") == socket.gethostname() and not any(_alive(int(p)) for p in record.get("pids", []))


def describe(folder: Path, record: dict | None) -> str:
    """``runs/x is being trained by pid 1234 on host h since 10:02``."""
    record = record or {}
    pids = record.get("pids") or ["?"]
    since = record.get("since")
    when = f" since {time.strftime('%H:%M', time.localtime(since))}" if isinstance(since, (int, float)) else ""
    return f"{folder} is being trained by pid {pids[-1]} on host {record.get('host', '?')}{when}"


def _write_record(path: Path, record: dict) -> None:
    tmp = path.with_name(f"{LOCK}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)


def _try_acquire(folder: Path, token: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            record = holder(folder)
            if record is None:
                continue  # released meanwhile
            if not is_stale(record):
                return False
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump({"host": socket.gethostname(), "pids": [os.getpid()], "since": time.time(), "token": token}, f)
        return True
    return False


def acquire(folder: Path, wait: float = 0.0, token: str | None = None) -> bool:
    """Lock ``folder`` for this process; ``False`` if another live process still holds it after ``wait`` seconds
    (a training process stopped by its worker's death takes a moment to write its checkpoint and exit). A stale
    lock is replaced. ``token`` (default: a new one) is what a child process needs to work under this lock."""
    folder, token = Path(folder), token or uuid.uuid4().hex
    deadline = time.monotonic() + wait
    while not _try_acquire(folder, token):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def add_pid(folder: Path, pid: int) -> None:
    """Record ``pid`` as a holder too (the lock stays live while it runs)."""
    path = Path(folder) / LOCK
    record = holder(folder) or {"host": socket.gethostname(), "pids": []}
    if pid not in record.get("pids", []):
        record["pids"] = [*record.get("pids", []), pid]
        _write_record(path, record)


def release(folder: Path) -> None:
    (Path(folder) / LOCK).unlink(missing_ok=True)


class RunLock:
    """``with RunLock(folder):`` trains in ``folder`` as its one writer.

    Raises :class:`FolderLocked` (one line naming the holder) if another live process holds the folder, before
    anything is written. Under a lock handed down through ``$PYROINV_RUN_LOCK`` the process joins it and leaves
    its release to the parent. A folder that the lock had to create and that is still empty on an error is
    removed again, so a refused run leaves nothing behind.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.owned = False
        self._created: Path | None = None

    def __enter__(self) -> RunLock:
        if self.folder.exists() and not self.folder.is_dir():
            return self  # the run's own checks name this (a file, not a folder); nothing to lock
        record = holder(self.folder)
        inherited = os.environ.get(TOKEN_ENV)
        if record is not None and inherited and record.get("token") == inherited:
            add_pid(self.folder, os.getpid())
            return self
        missing = self.folder
        while not missing.parent.exists() and missing.parent != missing:
            missing = missing.parent
        self._created = None if self.folder.exists() else missing
        if not acquire(self.folder):
            self._remove_created()
            raise FolderLocked(
                f"{describe(self.folder, holder(self.folder))}; wait, or use another --out (if that "
                f"process is gone, delete {self.folder / LOCK})"
            )
        self.owned = True
        return self

    def _remove_created(self) -> None:
        """Remove the folders this lock created, where they are empty."""
        if self._created is None:
            return
        path = self.folder
        while True:
            try:
                path.rmdir()
            except OSError:
                return
            if path == self._created:
                return
            path = path.parent

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.owned:
            release(self.folder)
            self.owned = False
            if exc_type is not None:
                self._remove_created()
