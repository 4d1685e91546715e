import math

import numpy as np
import pytest
import torch

from pyroinv.data import Split, load_dataset, make_variant
from pyroinv.data.variants import MAX_LOG_SCALE, MAX_SHIFT_PX, content_matrices, sample_parameters
from pyroinv.model.warp import warp_images


@pytest.fixture(scope="module")
def small(mnist) -> Split:
    return mnist.subset(train_size=300, test_size=100, seed=0)


def test_rebuild_is_byte_identical(small, tmp_path):
    a = make_variant(small, "rot-trans", tmp_path)  # written to and ...
    a = make_variant(small, "rot-trans")
    b = make_variant(small, "rot-trans")
    assert a.x_train.tobytes() == b.x_train.tobytes() and a.x_test.tobytes() == b.x_test.tobytes()


def test_cached_variant_equals_fresh_build(cache_dir, mnist):
    cached = load_dataset("mnist-rot", cache_dir=cache_dir)          # built and cached
    again = load_dataset("mnist-rot", cache_dir=cache_dir)           # read from cache
    assert cached.x_train.tobytes() == again.x_train.tobytes()
    fresh = make_variant(mnist.subset(train_size=None), "rot")       # no cache
    np.testing.assert_array_equal(fresh.x_test[:100], cached.x_test[:100])


def test_train_and_test_use_different_seeds(small):
    v = make_variant(small, "rot")
    assert not np.allclose(v.meta["angle_train"][:100], v.meta["angle_test"][:100])


@pytest.mark.parametrize("variant,key,low,high", [
    ("rot", "angle", -math.pi, math.pi),
    ("rot90", "angle", -math.pi / 2, math.pi / 2),
    ("trans", "dx", -MAX_SHIFT_PX, MAX_SHIFT_PX),
    ("trans", "dy", -MAX_SHIFT_PX, MAX_SHIFT_PX),
    ("scale", "log_scale", -MAX_LOG_SCALE, MAX_LOG_SCALE),
])
def test_parameter_ranges(variant, key, low, high):
    p = sample_parameters(variant, 20000, seed=1)[key]
    assert p.min() >= low and p.max() <= high
    # and they fill the range (uniform)
    assert p.min() < low + 0.01 * (high - low) and p.max() > high - 0.01 * (high - low)


def _corr(a, b):
    a, b = a.ravel().astype(float), b.ravel().astype(float)
    return np.corrcoef(a, b)[0, 1]


def test_stored_angles_match_the_images(small):
    v = make_variant(small, "rot")
    A = content_matrices({k: v.meta[f"{k}_train"] for k in ("angle", "dx", "dy", "log_scale")}, 28)
    # Undo: resample the rotated image with out(p) = rotated(A p) = original(p)
    back = warp_images(torch.as_tensor(v.x_train, dtype=torch.float64), A).numpy()
    back_wrong = warp_images(torch.as_tensor(v.x_train, dtype=torch.float64), torch.linalg.inv(A)).numpy()
    c_right = np.mean([_corr(back[i], small.x_train[i]) for i in range(100)])
    c_wrong = np.mean([_corr(back_wrong[i], small.x_train[i]) for i in range(100)])
    c_rot = np.mean([_corr(v.x_train[i], small.x_train[i]) for i in range(100)])
    assert c_right > 0.9 and c_right > c_rot + 0.3 and c_right > c_wrong + 0.3


def test_translation_moves_the_centre_of_mass(small):
    v = make_variant(small, "trans")
    ys, xs = np.mgrid[0:28, 0:28]

    def com(img):
        w = img[0].astype(float)
        return (w * xs).sum() / w.sum(), (w * ys).sum() / w.sum()

    # only images whose digit stays inside the frame are compared (MNIST digits sit in a 20x20 box)
    keep = np.flatnonzero((np.abs(v.meta["dx_train"]) < 2.5) & (np.abs(v.meta["dy_train"]) < 2.5))[:50]
    shifts = np.array([np.subtract(com(v.x_train[i]), com(small.x_train[i])) for i in keep])
    err = np.abs(shifts - np.stack([v.meta["dx_train"][keep], v.meta["dy_train"][keep]], axis=1))
    # bilinear resampling preserves the centre of mass exactly unless ink leaves the frame
    assert np.median(err) < 0.01 and (err < 0.3).mean() > 0.95


def test_scale_changes_ink_area(small):
    v = make_variant(small, "scale")
    s = v.meta["log_scale_train"]
    ratio = (v.x_train > 64).sum(axis=(1, 2, 3)) / np.maximum((small.x_train > 64).sum(axis=(1, 2, 3)), 1)
    big, tiny = s > 0.5, s < -0.5
    assert np.median(ratio[big]) > 2.0 and np.median(ratio[tiny]) < 0.5


def test_balanced_subset_is_seeded(mnist):
    a = mnist.subset(train_size=1003, seed=3)
    b = mnist.subset(train_size=1003, seed=3)
    c = mnist.subset(train_size=1003, seed=4)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    assert np.bincount(a.y_train).tolist() == [101, 101, 101] + [100] * 7
    assert not np.array_equal(a.x_train, c.x_train)


def test_unknown_dataset_name():
    from pyroinv.errors import DataError

    with pytest.raises(DataError, match="unknown data set 'mnist-rotated'.*mnist-rot"):
        load_dataset("mnist-rotated")
