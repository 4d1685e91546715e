"""Where converted and transformed data sets are cached, and how they are stored.

Arrays are stored as uncompressed ``.npz`` files and read back with
``allow_pickle=False``, so a cache file can never run code. Writes go to a
temporary file that is renamed into place, so an interrupted write never leaves
a half-written cache entry behind.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

CACHE_ENV = "PYROINV_CACHE"
DATA_ROOT_ENV = "PYROINV_DATA_ROOT"
OFFLINE_ENV = "PYROINV_OFFLINE"


def default_cache_dir() -> Path:
    """``$PYROINV_CACHE`` if set, else ``~/.cache/pyroinv``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pyroinv"


def resolve_cache_dir(cache_dir: str | os.PathLike | None) -> Path:
    path = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_data_root() -> Path | None:
    """``$PYROINV_DATA_ROOT`` if set (a folder with the user's own copies of the data sets)."""
    env = os.environ.get(DATA_ROOT_ENV)
    return Path(env).expanduser() if env else None


def downloads_allowed(download: bool | None) -> bool:
    """Downloads are tried unless ``download=False`` or ``$PYROINV_OFFLINE`` is set to a true value."""
    if download is not None:
        return download
    return os.environ.get(OFFLINE_ENV, "").strip().lower() not in {"1", "true", "yes", "on"}


def save_arrays(path: Path, **arrays: np.ndarray) -> None:
    """Atomically write ``arrays`` to ``path`` (an ``.npz`` file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """Read an ``.npz`` written by :func:`save_arrays` (no pickle allowed)."""
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}
