"""The container for a train/test split (and an optional validation set held out of the training set), and
class-balanced seeded subsets."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch


@dataclass
class Split:
    """Train and test arrays of one data set.

    Images are stored as uint8 ``(N, C, H, W)`` (pixels 0..255) or float32 in [0, 1];
    2-D coordinate data as float32 ``(N, 2)``. Labels are int64 in ``0..num_classes-1``.
    ``meta`` holds per-example transformation parameters of a variant (e.g. ``angle_train``).
    ``x_valid`` / ``y_valid``: a validation set held out of the training set (:meth:`hold_out`), else ``None``.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    meta: dict[str, np.ndarray] = field(default_factory=dict)
    x_valid: np.ndarray | None = None
    y_valid: np.ndarray | None = None

    @property
    def is_image(self) -> bool:
        return self.x_train.ndim == 4

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    def tensors(self, split: str = "train", device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """Float inputs (images scaled to [0, 1]) and int64 labels as tensors; ``split``: train, valid or test."""
        x, y = {
            "train": (self.x_train, self.y_train),
            "valid": (self.x_valid, self.y_valid),
            "test": (self.x_test, self.y_test),
        }[split]
        if y is None:
            raise ValueError(f"{self.name} has no validation set; hold one out with --valid-size")
        xt = torch.as_tensor(x)
        xt = xt.float() / 255.0 if xt.dtype == torch.uint8 else xt.float()
        return xt.to(device), torch.as_tensor(y, dtype=torch.long).to(device)

    def hold_out(self, valid_size: int, seed: int = 0) -> Split:
        """``valid_size`` class-balanced training examples moved to a validation set, the rest kept for training.

        The validation images depend on ``seed`` and ``valid_size`` only, not on a later ``subset``'s training
        size, so runs at several training sizes are chosen between on the same validation set."""
        if self.y_valid is not None:
            raise ValueError(f"{self.name} already holds a validation set")
        if not 0 < valid_size < len(self.y_train):
            raise ValueError(
                f"--valid-size {valid_size} must leave training examples: {self.name} has "
                f"{len(self.y_train)}; give a smaller --valid-size"
            )
        valid = balanced_indices(self.y_train, valid_size, self.num_classes, seed + 2)
        keep = np.setdiff1d(np.arange(len(self.y_train)), valid)
        meta = {k: (v[keep] if k.endswith("_train") else v) for k, v in self.meta.items()}
        meta.update({k[: -len("_train")] + "_valid": v[valid] for k, v in self.meta.items() if k.endswith("_train")})
        return replace(
            self,
            x_train=self.x_train[keep],
            y_train=self.y_train[keep],
            meta=meta,
            x_valid=self.x_train[valid],
            y_valid=self.y_train[valid],
        )

    def subset(self, train_size: int | None = None, test_size: int | None = None, seed: int = 0) -> Split:
        """A class-balanced, seeded subset of the training (and optionally test) set."""
        out = self
        if train_size is not None and train_size < len(self.y_train):
            idx = balanced_indices(self.y_train, train_size, self.num_classes, seed)
            out = replace(
                out,
                x_train=self.x_train[idx],
                y_train=self.y_train[idx],
                meta={k: (v[idx] if k.endswith("_train") else v) for k, v in out.meta.items()},
            )
        if test_size is not None and test_size < len(self.y_test):
            idx = balanced_indices(self.y_test, test_size, self.num_classes, seed + 1)
            out = replace(
                out,
                x_test=out.x_test[idx],
                y_test=out.y_test[idx],
                meta={k: (v[idx] if k.endswith("_test") else v) for k, v in out.meta.items()},
            )
        return out


def balanced_indices(labels: np.ndarray, size: int, num_classes: int, seed: int) -> np.ndarray:
    """``size`` indices with (as nearly as possible) equal counts per class, sorted.

    Each class gets ``size // num_classes`` examples and the first ``size % num_classes``
    classes one more; a class with too few examples gives all it has and the rest is
    filled at random from the others. Deterministic for a given ``seed``.
    """
    if size <= 0:
        raise ValueError(f"subset size must be positive, got {size}")
    rng = np.random.default_rng(seed)
    per_class = [size // num_classes + (1 if c < size % num_classes else 0) for c in range(num_classes)]
    chosen: list[np.ndarray] = []
    for c, k in enumerate(per_class):
        pool = np.flatnonzero(labels == c)
        chosen.append(rng.permutation(pool)[: min(k, len(pool))])
    idx = np.concatenate(chosen)
    if len(idx) < size:
        rest = np.setdiff1d(np.arange(len(labels)), idx)
        idx = np.concatenate([idx, rng.permutation(rest)[: size - len(idx)]])
    return np.sort(idx)
