"""Atomic, safe checkpoints and small JSON helpers for run folders.

Checkpoints hold only tensors, numbers, strings and containers and are read back
with ``torch.load(weights_only=True)``. Every write goes to a temporary file in the
same folder that is then renamed over the target, so a kill in the middle of a
write leaves the previous file intact.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from ..errors import PyroinvError, one_line


def _atomic_write(path: Path, write, previous: Path | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if previous is not None and path.exists():
            # the last good file stays beside the new one; a hard link keeps ``path`` in place until the
            # replace below, so a reader never finds it missing (a rename where links are not supported)
            previous.unlink(missing_ok=True)
            try:
                os.link(path, previous)
            except OSError:
                os.replace(path, previous)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: what every checkpoint of a training run holds
REQUIRED = ("step", "model", "guide", "optimizer", "scheduler", "torch_rng")


class CheckpointError(PyroinvError):
    """A checkpoint file that cannot be read back (truncated, damaged, or not a pyroinv checkpoint)."""


def save_checkpoint(path: Path, state: dict[str, Any], previous: Path | None = None) -> None:
    """Atomically ``torch.save`` ``state`` to ``path``; with ``previous``, the file it replaces is kept there."""
    _atomic_write(Path(path), lambda f: torch.save(state, f), None if previous is None else Path(previous))


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


def load_latest_checkpoint(latest: Path, previous: Path, map_location: str | torch.device = "cpu"
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
    raise CheckpointError("; ".join(errors) + "; no readable checkpoint is left: start the run again in a new --out"
                          if errors else f"no checkpoint in {Path(latest).parent}")


def write_json(path: Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON."""
    data = (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode()
    _atomic_write(Path(path), lambda f: f.write(data))


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def read_config(path: Path) -> dict[str, Any]:
    """A run's ``config.json`` as a dict; a damaged file is a one-line :class:`CheckpointError`."""
    path = Path(path)
    try:
        saved = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path} is damaged ({one_line(err)}); "
                              f"restore it or start a new --out") from None
    if not isinstance(saved, dict):
        raise CheckpointError(f"{path} is damaged (it holds a {type(saved).__name__}, not the run's settings); "
                              f"restore it or start a new --out")
    return saved


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Metric records of a JSON-lines file: a torn last line (a kill mid-write) or any line that is not a
    record with an integer ``step`` is skipped."""
    out = []
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
