import pickle

import numpy as np
import pytest

from pyroinv.data import load_dataset
from pyroinv.data.cifar import FOLDER, TEST_BATCHES, TRAIN_BATCHES
from pyroinv.errors import DataError


@pytest.fixture
def tiny_cifar(tmp_path):
    """A CIFAR-10 folder in the official python-version format, 10 images a batch."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "root" / FOLDER
    folder.mkdir(parents=True)
    for name in TRAIN_BATCHES + TEST_BATCHES:
        batch = {"data": rng.integers(0, 256, (10, 3072), dtype=np.uint8), "labels": list(range(10)),
                 "batch_label": name, "filenames": [f"{i}.png" for i in range(10)]}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    return tmp_path / "root"


def test_reads_tiny_cifar_and_builds_variants(tiny_cifar, tmp_path):
    s = load_dataset("cifar10", data_root=tiny_cifar, cache_dir=tmp_path / "c", download=False)
    assert s.x_train.shape == (50, 3, 32, 32) and s.x_test.shape == (10, 3, 32, 32)
    assert s.num_classes == 10 and s.y_train.tolist()[:10] == list(range(10))
    r = load_dataset("cifar10-rot", data_root=tiny_cifar, cache_dir=tmp_path / "c", download=False)
    assert r.name == "cifar10-rot" and r.x_train.shape == s.x_train.shape
    assert not np.array_equal(r.x_train, s.x_train)
    # the corners are rotated out of the frame: fill value 0 appears
    assert (r.x_train[:, :, 0, 0] == 0).mean() > 0.5


def test_missing_cifar_says_what_to_do(tmp_path):
    with pytest.raises(DataError, match="CIFAR-10 not found.*--data-root"):
        load_dataset("cifar10-trans", data_root=tmp_path, cache_dir=tmp_path / "c", download=False)


def test_cifar_batch_with_code_is_refused(tiny_cifar, tmp_path):
    class Evil:
        def __reduce__(self):
            return (eval, ("1+1",))

    (tiny_cifar / FOLDER / "test_batch").write_bytes(pickle.dumps({"data": Evil()}))
    with pytest.raises(pickle.UnpicklingError, match="eval"):
        load_dataset("cifar10", data_root=tiny_cifar, cache_dir=tmp_path / "c", download=False)
