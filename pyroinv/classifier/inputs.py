"""What :class:`~pyroinv.classifier.InvariantClassifier` accepts as data, checked and turned into arrays.

Inputs are torch tensors or numpy arrays ``(N, C, H, W)`` or ``(N, H, W)`` (images: uint8 0..255 or float in [0, 1])
or ``(N, 2)`` (2-D points), with integer labels ``(N,)`` in ``0..K-1``; or a ``torch.utils.data.Dataset`` or
``DataLoader`` of ``(input, label)`` pairs, read once into memory (the classifier draws its own minibatches). The
rules are those of a user's ``.npz`` (:mod:`pyroinv.data.user_npz`), so every problem is one
:class:`~pyroinv.errors.DataError` line naming what was found and the fix.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from ..data.splits import Split
from ..data.user_npz import check_classes, check_inputs, check_labels
from ..errors import DataError


def _numpy(value: Any, key: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value
    raise DataError(f"{key} is a {type(value).__name__}; give a torch tensor, a numpy array, a Dataset or a DataLoader")


def _read_pairs(data: Dataset | DataLoader, key: str) -> tuple[np.ndarray, np.ndarray]:
    """All ``(input, label)`` pairs of a Dataset or DataLoader, stacked."""
    loader = data if isinstance(data, DataLoader) else DataLoader(data, batch_size=1024)
    xs, ys = [], []
    for batch in loader:
        if not (isinstance(batch, (tuple, list)) and len(batch) >= 2 and isinstance(batch[0], torch.Tensor)):
            raise DataError(
                f"{key} must yield (input tensor, label) pairs, got {type(batch).__name__}; for a "
                f"torchvision data set pass transform=torchvision.transforms.ToTensor()"
            )
        xs.append(batch[0].detach().cpu())
        ys.append(torch.as_tensor(batch[1]).detach().cpu())
    if not xs:
        raise DataError(f"{key} is empty; it needs at least one example")
    return torch.cat(xs).numpy(), torch.cat(ys).numpy()


def arrays(x: Any, y: Any = None, key: str = "x") -> tuple[np.ndarray, np.ndarray | None]:
    """``(inputs, labels)`` as checked arrays: images uint8 or float32 ``(N, C, H, W)``, points float32 ``(N, 2)``;
    labels int64 (``None`` where a plain array came without them)."""
    if isinstance(x, (Dataset, DataLoader)) and not isinstance(x, (torch.Tensor, np.ndarray)):
        if y is not None:
            raise DataError(f"{key} is a {type(x).__name__}, which holds its own labels; drop the labels argument")
        x, y = _read_pairs(x, key)
    xa = check_inputs(key, _numpy(x, key))
    if y is None:
        return xa, None
    ya = check_labels(f"{key}'s labels", _numpy(y, f"{key}'s labels"))
    if len(ya) != len(xa):
        raise DataError(f"{key} has {len(xa)} examples but {len(ya)} labels; they must match")
    return xa, ya


def training_split(x: Any, y: Any = None, valid: Any = None, num_classes: int | None = None) -> Split:
    """The training set (and a validation set: a pair ``(x_valid, y_valid)``, a Dataset or a DataLoader) as a
    :class:`~pyroinv.data.splits.Split` with an empty test set."""
    xa, ya = arrays(x, y, "x")
    if ya is None:
        raise DataError("fit needs labels: fit(x, y), or a Dataset or DataLoader of (input, label) pairs")
    K = check_classes("y", ya, num_classes)
    xv = yv = None
    if valid is not None:
        xv, yv = (
            arrays(*cast("tuple[Any, Any]", valid), key="valid")
            if isinstance(valid, (tuple, list))
            else arrays(valid, key="valid")
        )
        if yv is None:
            raise DataError("valid needs labels: valid=(x_valid, y_valid), or a Dataset or DataLoader")
        if xv.shape[1:] != xa.shape[1:]:
            raise DataError(f"valid's examples have shape {xv.shape[1:]} but x's {xa.shape[1:]}; they must match")
        if yv.max() >= K:
            raise DataError(f"valid has label {int(yv.max())} but the training labels are 0..{K - 1}")
    empty_x, empty_y = np.zeros((0, *xa.shape[1:]), dtype=xa.dtype), np.zeros(0, dtype=np.int64)
    return Split("data", xa, ya, empty_x, empty_y, num_classes=K, x_valid=xv, y_valid=yv)


def input_tensor(x: Any, input_shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Inputs to predict on, as float tensors on ``device`` (images scaled to [0, 1]); their shape must be the
    training inputs'."""
    return as_tensor(arrays(x, key="x")[0], input_shape, device)


def as_tensor(xa: np.ndarray, input_shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Checked input arrays (:func:`arrays`) as float tensors on ``device``; their shape must be the training's."""
    if tuple(xa.shape[1:]) != tuple(input_shape):
        raise DataError(
            f"x has examples of shape {tuple(xa.shape[1:])} but the classifier was fitted on "
            f"{tuple(input_shape)}; give inputs of the training shape"
        )
    xt = torch.as_tensor(xa)
    return (xt.float() / 255.0 if xt.dtype == torch.uint8 else xt.float()).to(device)


__all__ = ["arrays", "as_tensor", "input_tensor", "training_split"]
