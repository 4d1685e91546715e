"""The user's own data as an ``.npz`` file, validated on load.

Format (``numpy.savez(path, x_train=..., y_train=..., x_test=..., y_test=...)``):

* ``x_train``, ``x_test``: images ``(N, H, W)`` or ``(N, C, H, W)``, either uint8
  (0..255) or float in [0, 1]; or 2-D coordinate data ``(N, 2)`` (any finite floats).
  Train and test must have the same shape after the first axis.
* ``y_train``, ``y_test``: integer class labels ``(N,)`` in ``0..K-1`` with K >= 2.

Every problem is reported as one :class:`~pyroinv.errors.DataError` line that names
the key, what was found and what is expected.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from ..errors import DataError
from .splits import Split

REQUIRED_KEYS = ("x_train", "y_train", "x_test", "y_test")


def load_npz(path: str | os.PathLike) -> Split:
    """Load and validate a user ``.npz`` data set (see the module docstring for the format)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"data file {path} does not exist; pass a path to an .npz with keys {', '.join(REQUIRED_KEYS)}")
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except (ValueError, OSError, zipfile.BadZipFile) as err:
        raise DataError(f"{path} is not a readable .npz of plain arrays ({err}); write it with numpy.savez") from None
    return validate_arrays(arrays, name=path.stem)


def validate_arrays(arrays: dict[str, np.ndarray], name: str = "user") -> Split:
    """Check keys, shapes, dtypes, ranges and labels; return a :class:`Split`."""
    missing = [k for k in REQUIRED_KEYS if k not in arrays]
    if missing:
        raise DataError(f"{name}.npz is missing key(s) {', '.join(missing)}; it needs {', '.join(REQUIRED_KEYS)}")
    xs = {k: check_inputs(k, np.asarray(arrays[k])) for k in ("x_train", "x_test")}
    ys = {k: check_labels(k, np.asarray(arrays[k])) for k in ("y_train", "y_test")}
    if xs["x_train"].shape[1:] != xs["x_test"].shape[1:]:
        raise DataError(
            f"x_train examples have shape {xs['x_train'].shape[1:]} but x_test examples "
            f"{xs['x_test'].shape[1:]}; train and test must match"
        )
    for split in ("train", "test"):
        if len(xs[f"x_{split}"]) != len(ys[f"y_{split}"]):
            raise DataError(
                f"x_{split} has {len(xs[f'x_{split}'])} examples but y_{split} has "
                f"{len(ys[f'y_{split}'])} labels; they must match"
            )
    num_classes = check_classes("y_train", ys["y_train"])
    if ys["y_test"].max() >= num_classes:
        raise DataError(
            f"y_test has label {int(ys['y_test'].max())} but y_train's classes are 0..{num_classes - 1}; "
            "labels must be in 0..K-1 with every class present in training"
        )
    return Split(name, xs["x_train"], ys["y_train"], xs["x_test"], ys["y_test"], num_classes=num_classes)


def check_inputs(key: str, x: np.ndarray) -> np.ndarray:
    if x.ndim == 2 and x.shape[1] == 2:  # 2-D coordinate data
        if not np.issubdtype(x.dtype, np.number):
            raise DataError(f"{key} has dtype {x.dtype}; coordinates must be numbers")
        if len(x) == 0:
            raise DataError(f"{key} is empty; it needs at least one example")
        x = x.astype(np.float32)
        if not np.isfinite(x).all():
            raise DataError(f"{key} contains NaN or infinite values; remove or fill them")
        return x
    if x.ndim == 4 and x.shape[-1] in (1, 3, 4) and x.shape[1] not in (1, 3, 4):
        raise DataError(
            f"{key} has shape {x.shape}, which looks channels-last (N, H, W, C); images must be "
            f"(N, C, H, W): use x.transpose(0, 3, 1, 2)"
        )
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim != 4 or min(x.shape[-2:]) < 2:
        raise DataError(f"{key} has shape {x.shape}; expected images (N, H, W) or (N, C, H, W), or coordinates (N, 2)")
    if len(x) == 0:
        raise DataError(f"{key} is empty; it needs at least one example")
    if x.dtype == np.uint8:
        return x
    if not np.issubdtype(x.dtype, np.floating):
        raise DataError(f"{key} has dtype {x.dtype}; images must be uint8 (0..255) or float in [0, 1]")
    if not np.isfinite(x).all():
        raise DataError(f"{key} contains NaN or infinite pixels; remove or fill them")
    if x.min() < 0 or x.max() > 1:
        raise DataError(
            f"{key} has float pixels in [{x.min():.3g}, {x.max():.3g}]; scale them to [0, 1] or store uint8"
        )
    return x.astype(np.float32)


def check_labels(key: str, y: np.ndarray) -> np.ndarray:
    if y.ndim != 1:
        raise DataError(f"{key} has shape {y.shape}; labels must be a 1-D array of class indices")
    if not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{key} has dtype {y.dtype}; labels must be integers 0..K-1 (use y.astype(int))")
    if len(y) and y.min() < 0:
        raise DataError(f"{key} has label {int(y.min())}; labels must be in 0..K-1")
    return y.astype(np.int64)


def check_classes(key: str, y: np.ndarray, num_classes: int | None = None) -> int:
    """``K``, the number of classes of training labels ``y`` (checked by :func:`check_labels`): at least 2, every one
    of ``0..K-1`` present; ``num_classes``, when given, must hold every label."""
    if len(y) == 0:
        raise DataError(f"{key} is empty; it needs at least one example of every class")
    if num_classes is not None:
        if y.max() >= num_classes:
            raise DataError(
                f"{key} has label {int(y.max())} but num_classes is {num_classes}; labels must be in "
                f"0..{num_classes - 1}, or pass num_classes={int(y.max()) + 1}"
            )
        return num_classes
    num_classes = int(y.max()) + 1
    present = np.unique(y)
    if len(present) < 2:
        raise DataError(f"{key} holds a single class; classification needs at least 2 classes")
    if len(present) < num_classes:
        missing = np.setdiff1d(np.arange(num_classes), present)
        shown = ", ".join(str(int(c)) for c in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise DataError(
            f"{key}'s labels go up to {num_classes - 1} but {len(missing)} of the classes 0..{num_classes - 1} "
            f"never appear ({shown}); relabel to 0..K-1, e.g. y = numpy.unique(y, return_inverse=True)[1]"
        )
    return num_classes
