"""Data: real MNIST offline, CIFAR-10, user ``.npz`` files and the paper's transformed variants."""

from .registry import DATASET_NAMES, describe, load_dataset, parse_name
from .splits import Split, balanced_indices
from .user_npz import load_npz, validate_arrays
from .variants import VARIANTS, make_variant

__all__ = [
    "DATASET_NAMES",
    "VARIANTS",
    "Split",
    "balanced_indices",
    "describe",
    "load_dataset",
    "load_npz",
    "make_variant",
    "parse_name",
    "validate_arrays",
]
