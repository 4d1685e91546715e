"""Atomic, safe checkpoints and small JSON helpers, for run folders and saved classifiers.

Checkpoints hold only tensors, numbers, strings and containers and are read back
with ``torch.load(weights_only=True)``. Every write goes to a temporary file in the
same folder that is then renamed over the target, so a kill in the middle of a
write leaves the previous file intact; the renamed file gets the mode a plain
``open()`` would give under the process's umask (0644 under umask 022). A write
that fails (a full disk, a quota, any ``OSError``) raises :class:`RunWriteError`:
one line naming the file, the errno and what to do, with the previous file intact.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .errors import PyroinvError, one_line


class RunWriteError(PyroinvError):
    """A file of a run could not be written (full disk, quota, permissions, ...); the last checkpoint is intact."""


#: what to say for the errors a full or restricted file system gives
_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EACCES: "permission denied",
    errno.EROFS: "the file system is read-only",
}


def write_failure(path: Path, err: BaseException) -> RunWriteError:
    """The one-line :class:`RunWriteError` for ``err`` raised while writing ``path``."""
    code = getattr(err, "errno", None)
    if code in _REASONS:
        reason = f"{_REASONS[code]} ({errno.errorcode[code]})"
    elif code is not None and code in errno.errorcode:
        reason = f"{os.strerror(code)} ({errno.errorcode[code]})"
    else:
        reason = one_line(err, 160)
    return RunWriteError(
        f"cannot write {path}: {reason}; the files already written are intact: make room (or fix "
        f"the folder's permissions), then continue with --resume"
    )


def file_mode() -> int:
    """The mode ``open()`` gives a new file under this process's umask (0o666 & ~umask)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc: read the umask by setting it, and put it back at once
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: Path, previous: Path | None = None) -> Iterator[Path]:
    """``with atomic_path(p) as tmp:`` write ``tmp`` (by name, for writers that need one); on success it
    replaces ``p`` with the umask's mode (with ``previous``, the file it replaces is kept there). On any error
    the temporary file is removed and ``p`` is untouched; an ``OSError`` becomes :class:`RunWriteError`."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as err:
        raise write_failure(path, err) from None
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, file_mode())
        if previous is not None and path.exists():
            # the last good file stays beside the new one; a hard link keeps ``path`` in place until the
            # replace below, so a reader never finds it missing (a rename where links are not supported)
            previous.unlink(missing_ok=True)
            try:
                os.link(path, previous)
            except OSError:
                os.replace(path, previous)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise write_failure(path, err) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes | memoryview, previous: Path | None = None) -> None:
    """Atomically write ``data`` to ``path`` (see :func:`atomic_path`; with ``previous``, the file it replaces is
    kept there)."""
    with atomic_path(Path(path), previous) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def append_line(f, path: Path, line: str) -> None:
    """Append ``line`` to the open text file ``f`` (``path``) and flush; an ``OSError`` is a :class:`RunWriteError`.
    A torn last line is skipped by :func:`read_jsonl` and dropped when the run resumes."""
    try:
        f.write(line)
        f.flush()
    except OSError as err:
        raise write_failure(path, err) from None


#: what every checkpoint of a training run holds
REQUIRED = ("step", "model", "guide", "optimizer", "scheduler", "torch_rng")


class CheckpointError(PyroinvError):
    """A checkpoint file that cannot be read back (truncated, damaged, or not a pyroinv checkpoint)."""


def save_checkpoint(path: Path, state: dict[str, Any], previous: Path | None = None) -> None:
    """Atomically ``torch.save`` ``state`` to ``path``; with ``previous``, the file it replaces is kept there."""
    buffer = io.BytesIO()  # serialised first, so that a failing disk gives the OSError itself, not torch's wrapper
    torch.save(state, buffer)
    write_bytes(path, buffer.getbuffer(), None if previous is None else Path(previous))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """``torch.load(path, weights_only=True)``: no code can run while loading.

    A file that is not a readable checkpoint of a run raises :class:`CheckpointError` (one line)."""
    path = Path(path)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises RuntimeError, UnpicklingError, EOFError, ... for damaged files
        raise CheckpointError(f"{path} is damaged or not a pyroinv checkpoint ({one_line(err)})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not a pyroinv checkpoint (it holds a {type(state).__name__}, not a dict)")
    return state


def load_run_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """:func:`load_checkpoint` of a training run's checkpoint: it must hold every key of :data:`REQUIRED`."""
    state = load_checkpoint(path, map_location)
    missing = [k for k in REQUIRED if k not in state]
    if missing:
        raise CheckpointError(f"{path} is not a training run's checkpoint (it lacks {', '.join(missing)})")
    return state


def load_latest_checkpoint(
    latest: Path, previous: Path, map_location: str | torch.device = "cpu"
) -> tuple[dict[str, Any], Path]:
    """The state in ``latest``, or, when that file is missing or damaged, in ``previous``; and which file it was.

    Raises :class:`CheckpointError` naming both files when neither can be read."""
    errors = []
    for path in (Path(latest), Path(previous)):
        if not path.exists():
            continue
        try:
            return load_run_checkpoint(path, map_location), path
        except CheckpointError as err:
            errors.append(str(err))
    raise CheckpointError(
        "; ".join(errors) + "; no readable checkpoint is left: start the run again in a new --out"
        if errors
        else f"no checkpoint in {Path(latest).parent}"
    )


def write_json(path: Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON."""
    write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def read_config(path: Path) -> dict[str, Any]:
    """A run's ``config.json`` as a dict; a damaged file is a one-line :class:`CheckpointError`."""
    path = Path(path)
    try:
        saved = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path} is damaged ({one_line(err)}); restore it or start a new --out") from None
    if not isinstance(saved, dict):
        raise CheckpointError(
            f"{path} is damaged (it holds a {type(saved).__name__}, not the run's settings); "
            f"restore it or start a new --out"
        )
    return saved


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Metric records of a JSON-lines file: a torn last line (a kill mid-write) or any line that is not a
    record with an integer ``step`` is skipped."""
    out: list[dict[str, Any]] = []
    if not Path(path).exists():
        return out
    for line in Path(path).read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
            out.append(record)
    return out
