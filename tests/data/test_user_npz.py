import numpy as np
import pytest

from pyroinv.data import load_dataset, load_npz
from pyroinv.errors import DataError


def good(**overrides):
    rng = np.random.default_rng(0)
    a = {
        "x_train": rng.integers(0, 256, (20, 8, 8), dtype=np.uint8),
        "y_train": np.arange(20) % 3,
        "x_test": rng.integers(0, 256, (6, 8, 8), dtype=np.uint8),
        "y_test": np.arange(6) % 3,
    }
    a.update(overrides)
    return {k: v for k, v in a.items() if v is not None}


def write(tmp_path, arrays):
    path = tmp_path / "data.npz"
    np.savez(path, **arrays)
    return path


def test_valid_images_coords_and_floats(tmp_path):
    s = load_npz(write(tmp_path, good()))
    assert s.x_train.shape == (20, 1, 8, 8) and s.num_classes == 3 and s.is_image
    s = load_npz(write(tmp_path, good(x_train=np.random.rand(20, 3, 8, 8), x_test=np.random.rand(6, 3, 8, 8))))
    assert s.x_train.dtype == np.float32 and s.input_shape == (3, 8, 8)
    s = load_dataset(str(write(tmp_path, good(x_train=np.random.randn(20, 2), x_test=np.random.randn(6, 2)))))
    assert not s.is_image and s.input_shape == (2,)
    x, y = s.tensors("train")
    assert x.shape == (20, 2) and y.dtype.is_floating_point is False


BAD = [
    ("missing key", good(y_test=None), "missing key.*y_test"),
    ("wrong shape", good(x_train=np.zeros((20, 8, 8, 1, 1))), "x_train has shape"),
    ("1-D images", good(x_train=np.zeros(20)), "x_train has shape"),
    ("label out of range", good(y_train=np.arange(20) % 3 - 1), "y_train has label -1"),
    ("test label unseen", good(y_test=np.array([0, 1, 2, 3, 0, 1])), "y_test has label 3"),
    ("float labels", good(y_train=(np.arange(20) % 3).astype(float)), "y_train has dtype float64.*integers"),
    ("NaN pixels", good(x_train=np.full((20, 8, 8), np.nan)), "x_train contains NaN"),
    ("inf coords", good(x_train=np.full((20, 2), np.inf), x_test=np.zeros((6, 2))), "x_train contains NaN or infinite"),
    ("float out of range", good(x_test=np.full((6, 8, 8), 255.0)), r"x_test has float pixels in \[255"),
    ("train/test disagree", good(x_test=np.zeros((6, 9, 9), np.uint8)), "train and test must match"),
    ("length mismatch", good(y_train=np.arange(19) % 3), "x_train has 20 examples but y_train has 19"),
    ("one class", good(y_train=np.zeros(20, int), y_test=np.zeros(6, int)), "single class"),
]


@pytest.mark.parametrize("case,arrays,pattern", BAD, ids=[b[0] for b in BAD])
def test_malformed_npz_one_line_error(tmp_path, case, arrays, pattern):
    with pytest.raises(DataError, match=pattern) as err:
        load_npz(write(tmp_path, arrays))
    assert "\n" not in str(err.value)


def test_not_an_npz(tmp_path):
    p = tmp_path / "x.npz"
    p.write_text("hello")
    with pytest.raises(DataError, match="not a readable .npz"):
        load_npz(p)
    with pytest.raises(DataError, match="does not exist"):
        load_npz(tmp_path / "missing.npz")
