"""Shared fixtures: no test touches the network; one MNIST cache per test session."""
from __future__ import annotations

import os
import tempfile

import pytest

os.environ["PYROINV_OFFLINE"] = "1"
# the cells kept in the repository (results/) are not the tests' cells: every test starts with none kept
os.environ["PYROINV_KEPT_RESULTS"] = tempfile.mkdtemp(prefix="pyroinv-kept-")
os.environ.setdefault("MPLBACKEND", "Agg")


def _share_cores() -> None:
    """Under pytest-xdist each worker (and every script a test starts) gets its share of the cores, so that the
    workers' torch thread pools do not oversubscribe the machine."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        share = str(max(1, (os.cpu_count() or 1) // workers))
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, share)
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


_share_cores()


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> str:
    """A cache folder shared by the whole session (real MNIST is converted into it once)."""
    return str(tmp_path_factory.mktemp("pyroinv-cache"))


@pytest.fixture(scope="session")
def mnist(cache_dir):
    from pyroinv.data import load_dataset

    return load_dataset("mnist", cache_dir=cache_dir, download=False)


def _devices() -> list:
    import torch

    cuda = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))
    return ["cpu", cuda]


#: parametrize a test over the CPU and, where there is one, the CUDA device
DEVICES = _devices()


def _hypothesis_profiles() -> None:
    """Under CI the property tests replay the same cases every run (no example database, fixed seed)."""
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, database=None)
    if os.environ.get("CI"):
        settings.load_profile("ci")


_hypothesis_profiles()


@pytest.fixture(autouse=True)
def _fresh_param_store():
    """Pyro's global parameter store starts empty in every test (what a test that calls a model or guide outside
    the package's own, module-local calls would otherwise inherit from the test before it)."""
    import pyro

    pyro.clear_param_store()
    yield


@pytest.fixture(autouse=True)
def _seed_each_test(request) -> None:
    """Every test draws the same random numbers whichever worker runs it and in whatever order: torch, numpy and
    Python's generators are seeded from the test's own id."""
    import zlib

    import pyro

    pyro.set_rng_seed(zlib.crc32(request.node.nodeid.encode()))
