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


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Atomically ``torch.save`` ``state`` to ``path``."""
    _atomic_write(Path(path), lambda f: torch.save(state, f))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """``torch.load(path, weights_only=True)``: no code can run while loading."""
    return torch.load(Path(path), map_location=map_location, weights_only=True)


def write_json(path: Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON."""
    data = (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode()
    _atomic_write(Path(path), lambda f: f.write(data))


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file (a torn last line, from a kill mid-write, is skipped)."""
    out = []
    if not Path(path).exists():
        return out
    for line in Path(path).read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
