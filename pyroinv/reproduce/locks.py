"""One lock file per cell folder, so that two drivers pointed at the same runs directory never train the same
cell at once.

``RUN/.lock`` is created with ``O_CREAT | O_EXCL`` (atomic on local and NFS v3+ file systems) and holds the
host and process ids of its holder and of the training process it started. A lock whose processes are all
gone from this host (a driver or worker that died) is stale and is taken over; a lock held from another host is
respected until that host removes it.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

LOCK = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def holder(folder: Path) -> dict | None:
    """The lock's record (``host``, ``pids``), or ``None`` if the folder is not locked."""
    try:
        return json.loads((folder / LOCK).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"host": "?", "pids": []}  # being written, or damaged: treat as held


def is_stale(record: dict) -> bool:
    """Held from this host by processes that are all gone."""
    return record.get("host") == socket.gethostname() and not any(_alive(int(p)) for p in record.get("pids", []))


def acquire(folder: Path, wait: float = 0.0) -> bool:
    """Lock ``folder`` for this process; ``False`` if another live process still holds it after ``wait`` seconds
    (a training process stopped by its worker's death takes a moment to write its checkpoint and exit). A stale
    lock is replaced."""
    deadline = time.monotonic() + wait
    while not _try_acquire(folder):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _try_acquire(folder: Path) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            record = holder(folder)
            if record is None:
                continue  # released meanwhile
            if not is_stale(record):
                return False
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump({"host": socket.gethostname(), "pids": [os.getpid()]}, f)
        return True
    return False


def add_pid(folder: Path, pid: int) -> None:
    """Record the training process as a holder too (the lock stays live while it runs)."""
    path = folder / LOCK
    record = holder(folder) or {"host": socket.gethostname(), "pids": []}
    record["pids"] = [*record.get("pids", []), pid]
    tmp = path.with_name(LOCK + ".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)


def release(folder: Path) -> None:
    (folder / LOCK).unlink(missing_ok=True)
