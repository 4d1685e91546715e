"""The validation set held out of the training set (``Split.hold_out``, ``--valid-size``)."""
import numpy as np
import pytest

from pyroinv.data import load_dataset
from pyroinv.errors import ConfigError


def _rows(x: np.ndarray) -> set[bytes]:
    return {r.tobytes() for r in x.reshape(len(x), -1)}


def test_validation_is_class_balanced_disjoint_and_independent_of_the_training_size(cache_dir, mnist):
    small = load_dataset("mnist-rot", cache_dir=cache_dir, train_size=300, valid_size=200, seed=1)
    large = load_dataset("mnist-rot", cache_dir=cache_dir, train_size=1000, valid_size=200, seed=1)
    assert len(small.y_train) == 300 and len(small.y_valid) == 200
    assert np.bincount(small.y_valid).tolist() == [20] * 10
    assert not _rows(small.x_valid) & _rows(small.x_train)
    assert not _rows(large.x_valid) & _rows(large.x_train)
    np.testing.assert_array_equal(small.x_valid, large.x_valid)          # one validation set for every size
    assert len(small.meta["angle_valid"]) == 200 and len(small.meta["angle_train"]) == 300
    x, y = small.tensors("valid")
    assert x.shape == (200, 1, 28, 28) and x.max() <= 1.0 and y.dtype.is_floating_point is False


def test_without_a_validation_set_the_training_subset_is_unchanged(cache_dir, mnist):
    plain = load_dataset("mnist", cache_dir=cache_dir, train_size=300, seed=0)
    assert plain.y_valid is None
    np.testing.assert_array_equal(plain.x_train, mnist.subset(train_size=300, seed=0).x_train)
    with pytest.raises(ValueError, match="no validation set.*--valid-size"):
        plain.tensors("valid")


def test_a_validation_set_as_large_as_the_training_set_is_refused_in_one_line(cache_dir, mnist):
    with pytest.raises(ConfigError, match="--valid-size 60000 must leave training examples.*smaller") as err:
        load_dataset("mnist", cache_dir=cache_dir, valid_size=60000)
    assert "\n" not in str(err.value)
