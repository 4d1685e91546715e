"""Data sets by name: ``mnist``, ``mnist-rot``, ..., ``cifar10-trans``, or a path to an ``.npz``.

Names are ``BASE`` or ``BASE-VARIANT`` with BASE in {mnist, cifar10} and VARIANT one
of :data:`pyroinv.data.variants.VARIANTS` (``mnist-regular`` is ``mnist``). Any
name ending in ``.npz`` is a user file (see :mod:`pyroinv.data.user_npz`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..errors import ConfigError, DataError
from .cache import resolve_cache_dir
from .cifar import load_cifar10
from .mnist import load_mnist
from .splits import Split
from .user_npz import load_npz
from .variants import VARIANTS, make_variant

BASES: dict[str, Callable[..., Split]] = {"mnist": load_mnist, "cifar10": load_cifar10}
#: the classes of every base (and so of each of its variants)
BASE_CLASSES: dict[str, int] = {"mnist": 10, "cifar10": 10}
#: the training examples of every base (and so of each of its variants, which transform the images one for one)
BASE_TRAIN: dict[str, int] = {"mnist": 60000, "cifar10": 50000}
DATASET_NAMES: list[str] = [b if v == "regular" else f"{b}-{v}" for b in BASES for v in VARIANTS]


def parse_name(name: str) -> tuple[str, str]:
    """Split a data set name into (base, variant); raise a one-line error for unknown names."""
    for base in BASES:
        if name == base:
            return base, "regular"
        if name.startswith(base + "-") and name[len(base) + 1 :] in VARIANTS:
            return base, name[len(base) + 1 :]
    raise DataError(f"unknown data set {name!r}; choose one of {', '.join(DATASET_NAMES)}, or a path to an .npz file")


def num_classes(name: str) -> int:
    """The number of classes of a named data set (not of a user's ``.npz``: load it to know), without loading it."""
    return BASE_CLASSES[parse_name(name)[0]]


def num_train(name: str) -> int:
    """The training examples of a named data set (not of a user's ``.npz``: load it to know), without loading it."""
    return BASE_TRAIN[parse_name(name)[0]]


def load_dataset(
    name: str,
    data_root: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    download: bool | None = None,
    train_size: int | None = None,
    test_size: int | None = None,
    seed: int = 0,
    valid_size: int | None = None,
) -> Split:
    """Load a data set by name, build (or read from the cache) its variant, take a subset.

    Args:
        name: e.g. ``"mnist-rot"`` or ``"my_data.npz"``.
        data_root: folder with the user's own copies of MNIST (IDX) or CIFAR-10 (python batches).
        cache_dir: where conversions and variants are cached (default ``$PYROINV_CACHE`` or
            ``~/.cache/pyroinv``).
        download: allow torchvision's download (default: unless ``$PYROINV_OFFLINE`` is set).
        train_size, test_size: class-balanced subsets drawn with ``seed``.
        valid_size: a class-balanced validation set held out of the training set first (``Split.hold_out``); the
            training subset is drawn from the rest.
    """
    if str(name).endswith(".npz"):
        split = load_npz(name)
    else:
        base, variant = parse_name(name)
        cache = resolve_cache_dir(cache_dir)
        split = make_variant(BASES[base](data_root=data_root, cache_dir=cache, download=download), variant, cache)
    if valid_size:
        try:
            split = split.hold_out(valid_size, seed)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    return split.subset(train_size=train_size, test_size=test_size, seed=seed)


def describe(split: Split, train_size: int | None = None, test_size: int | None = None) -> str:
    """One line: name, sizes, input shape and classes; a size asked for beyond what the data hold is
    named (the whole split is used then)."""
    notes = [
        f"--{flag}-size {asked} is more than the {have} {flag} examples: all are used"
        for flag, asked, have in (("train", train_size, len(split.y_train)), ("test", test_size, len(split.y_test)))
        if asked is not None and asked > have
    ]
    valid = f" / {len(split.y_valid)} validation" if split.y_valid is not None else ""
    return (
        f"{split.name}: {len(split.y_train)} train{valid} / {len(split.y_test)} test, "
        f"inputs {split.input_shape}, {split.num_classes} classes" + "".join(f" ({n})" for n in notes)
    )


__all__ = [
    "BASE_CLASSES",
    "BASE_TRAIN",
    "DATASET_NAMES",
    "describe",
    "load_dataset",
    "num_classes",
    "num_train",
    "parse_name",
]
