"""Where converted and transformed data sets are cached, and how they are stored.

Arrays are stored as uncompressed ``.npz`` files and read back with
``allow_pickle=False``, so a cache file can never run code. Writes go to a
temporary file that is renamed into place, so an interrupted write never leaves
a half-written cache entry behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .. import settings

CACHE_ENV = "PYROINV_CACHE"
DATA_ROOT_ENV = "PYROINV_DATA_ROOT"
OFFLINE_ENV = "PYROINV_OFFLINE"


def default_cache_dir() -> Path:
    """``$PYROINV_CACHE`` if set, else ``~/.cache/pyroinv``."""
    env = settings.get("cache_dir")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pyroinv"


def resolve_cache_dir(cache_dir: str | os.PathLike | None) -> Path:
    path = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_data_root() -> Path | None:
    """``$PYROINV_DATA_ROOT`` if set (a folder with the user's own copies of the data sets)."""
    env = settings.get("data_root")
    return Path(env).expanduser() if env else None


def downloads_allowed(download: bool | None) -> bool:
    """Downloads are tried unless ``download=False`` or ``$PYROINV_OFFLINE`` is set to a true value."""
    if download is not None:
        return download
    return not settings.get("offline")


def save_arrays(path: Path, **arrays: np.ndarray) -> None:
    """Atomically write ``arrays`` to ``path`` (an ``.npz`` file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub: a ** dict might hold allow_pickle
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    """Read an ``.npz`` written by :func:`save_arrays` (no pickle allowed)."""
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


Source = Callable[[list[str]], "dict[str, np.ndarray] | None"]


def convert_once(
    cache_dir: str | os.PathLike | None,
    cache_name: str,
    data_root: str | os.PathLike | None,
    download: bool | None,
    from_root: Callable[[Path, list[str]], dict[str, np.ndarray] | None],
    from_download: Callable[[Path, list[str]], dict[str, np.ndarray] | None],
    offline: Source | None,
    missing: Callable[[list[str]], str],
    check: Callable[[dict[str, np.ndarray]], None] | None = None,
) -> dict[str, np.ndarray]:
    """Arrays from the cache, else from the first source that works (then cached).

    Sources, in order: ``from_root(data_root)`` (the user's folder, ``data_root`` or
    ``$PYROINV_DATA_ROOT``), ``from_download(cache)`` unless offline, then ``offline``.
    Each source appends a note to ``tried`` when it fails; if none works a
    :class:`~pyroinv.errors.DataError` with ``missing(tried)`` is raised.
    """
    from ..errors import DataError

    cache = resolve_cache_dir(cache_dir)
    cached = cache / cache_name
    if cached.exists():
        return load_arrays(cached)
    tried: list[str] = []
    root = Path(data_root).expanduser() if data_root is not None else default_data_root()
    arrays = from_root(root, tried) if root is not None else None
    if arrays is None:
        if downloads_allowed(download):
            arrays = from_download(cache, tried)
        else:
            tried.append("torchvision download (skipped: offline)")
    if arrays is None and offline is not None:
        arrays = offline(tried)
    if arrays is None:
        raise DataError(missing(tried))
    if check is not None:
        check(arrays)
    save_arrays(cached, **arrays)
    return arrays


def torchvision_download(cache: Path, dataset: str, tried: list[str]) -> Path | None:
    """Download ``torchvision.datasets.<dataset>`` into ``cache/torchvision``; its root, or None (noted in
    ``tried``)."""
    import torchvision

    root = cache / "torchvision"
    try:
        getattr(torchvision.datasets, dataset)(str(root), train=True, download=True)
    except Exception as err:  # no network, a mirror down, a corrupt archive: try the next source
        tried.append(f"torchvision download ({type(err).__name__})")
        return None
    return root
