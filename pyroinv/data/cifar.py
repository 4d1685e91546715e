"""CIFAR-10 from a user's folder (the "python version" batches), or torchvision's download.

The batches are pickles; they are read with the numpy-only unpickler of
:mod:`pyroinv.data.safe_pickle` rather than :func:`pickle.load`. No package on
PyPI ships CIFAR-10, so offline it must come from ``data_root``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import DataError
from .cache import convert_once, torchvision_download
from .safe_pickle import safe_load
from .splits import Split

FOLDER = "cifar-10-batches-py"
TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_BATCHES = ["test_batch"]
CACHE_NAME = "cifar10.npz"


def load_cifar10(
    data_root: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None, download: bool | None = None
) -> Split:
    """CIFAR-10 (50,000 train / 10,000 test, uint8 ``(N, 3, 32, 32)``) as a :class:`Split`.

    Looks for ``cifar-10-batches-py/`` in ``data_root`` (or ``data_root`` itself being
    that folder), then tries torchvision's download into the cache.
    """
    arrays = convert_once(
        cache_dir,
        CACHE_NAME,
        data_root,
        download,
        _from_folder,
        _from_download,
        offline=None,
        missing=lambda tried: (
            "CIFAR-10 not found; tried " + "; ".join(tried) + ". Fix: pass --data-root DIR (or set "
            f"PYROINV_DATA_ROOT) to a folder holding {FOLDER}/ from the official python-version archive."
        ),
    )
    return _split(arrays)


def _split(a: dict[str, np.ndarray]) -> Split:
    return Split("cifar10", a["x_train"], a["y_train"], a["x_test"], a["y_test"], num_classes=10)


def _read_batches(folder: Path, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for name in names:
        with open(folder / name, "rb") as f:
            batch = safe_load(f)
        data = batch.get("data", batch.get(b"data"))
        labels = batch.get("labels", batch.get(b"labels"))
        if data is None or labels is None:
            raise DataError(f"{folder / name} has no 'data'/'labels' entries; it is not a CIFAR-10 batch")
        xs.append(np.asarray(data, dtype=np.uint8).reshape(-1, 3, 32, 32))
        ys.append(np.asarray(labels, dtype=np.int64))
    return np.concatenate(xs), np.concatenate(ys)


def _from_folder(root: Path, tried: list[str]) -> dict[str, np.ndarray] | None:
    for folder in (root / FOLDER, root):
        if all((folder / n).is_file() for n in TRAIN_BATCHES + TEST_BATCHES):
            x_train, y_train = _read_batches(folder, TRAIN_BATCHES)
            x_test, y_test = _read_batches(folder, TEST_BATCHES)
            return {
                "x_train": x_train,
                "y_train": y_train,
                "x_test": x_test,
                "y_test": y_test,
                "source": np.array(f"folder:{folder}"),
            }
    tried.append(f"{root} (no {FOLDER}/ with data_batch_1..5 and test_batch)")
    return None


def _from_download(cache: Path, tried: list[str]) -> dict[str, np.ndarray] | None:
    root = torchvision_download(cache, "CIFAR10", tried)
    return None if root is None else _from_folder(root, tried)
