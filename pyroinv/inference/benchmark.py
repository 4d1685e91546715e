"""Timing of the ways to compute the weight-space invariant network (``scripts/benchmark.py``).

Each *training step* here is the forward and backward pass of the network part of the loss,
``-sum_n log f_hat(x_n)_{y_n}`` for one batch and one draw of ``W2``, with gradients for ``eta``,
``W1`` (ReLU) and ``W2``; the guide and the optimiser cost the same on every path and are left out.

* ``naive``: warp the S x H weight images with ``grid_sample`` (the paper's description);
* ``input-aug``: warp every input S times with the inverse transforms (Augerino-style augmentation);
* ``pyroinv``: :meth:`pyroinv.model.networks.InvariantFeatures.forward` with ``path="auto"``;
* ``floor``: the matrix products and activations alone, with no warp: inputs already transformed
  (an ``(S, B, D)`` leaf), with the gradient with respect to them that learning ``eta`` needs, so
  the same three ``S B D H`` products as every other path (forward, ``dW1``, ``d input``).

``pyroinv-compiled`` (only with ``--compile``): the pyroinv step with its loss (transforms, warp, features,
Monte-Carlo log-likelihood) wrapped in ``torch.compile``; its first call, which compiles, is timed apart.

``svi``: a whole training step, :meth:`pyroinv.inference.train.Trainer.train_step` (pyroinv's path inside), timed
two ways: each step waited for (``sync=True``: the host's work and the device's add up), and steps queued back to
back as training runs them (``sync=False``, one wait at the end: on a GPU the host prepares the next step while the
device runs this one, so a step costs the larger of the two). On the CPU the two are the same work.

Evaluation throughput: images per second over a test set with a fixed set of S transforms, either
re-warping the weights for every batch (naive) or warping them once (pyroinv).
"""

from __future__ import annotations

import math
import resource
import statistics
import time
import warnings
from collections.abc import Callable

import torch

from ..data.splits import Split
from ..model import lie
from ..model.bnn import mc_log_predictive
from ..model.invariance import Invariance
from ..model.networks import InvariantFeatures
from ..model.precision import PRODUCT_DTYPES, mm, set_product_dtype
from ..model.warp import warp_images

PATHS = ("naive", "input-aug", "pyroinv", "floor")
COMPILED = "pyroinv-compiled"


def random_split(num_train: int, num_test: int = 10) -> Split:
    """``num_train`` training and ``num_test`` test images, uniform random 28x28 uint8 with labels 0-9 (seed 0):
    the timed steps' data."""
    import numpy as np

    rng = np.random.default_rng(0)
    return Split(
        "random",
        rng.integers(0, 256, (num_train, 1, 28, 28), dtype=np.uint8),
        rng.integers(0, 10, num_train),
        rng.integers(0, 256, (num_test, 1, 28, 28), dtype=np.uint8),
        rng.integers(0, 10, num_test),
        10,
    )


def _setup(network: str, hidden: int, samples: int, batch: int, device: str = "cpu", seed: int = 0):
    torch.manual_seed(seed)
    inv = Invariance("rotation", init=math.radians(30.0), image_size=28)
    feats = InvariantFeatures((1, 28, 28), inv, hidden=hidden, network=network).to(device)
    x = torch.rand(batch, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    W2 = torch.randn(10, feats.num_features, device=device, requires_grad=True)
    eps = lie.stochastic_eps(samples, inv.active, device=device)
    return feats, inv, x, y, W2, eps


def _compiled(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """``torch.compile(fn)``, without Dynamo's note that it traces through the ``lru_cache`` of
    :func:`pyroinv.model.lie` (the cached generators are constants, so tracing through the cache is exact)."""
    compiled = torch.compile(fn)

    def call() -> torch.Tensor:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*lru_cache", category=UserWarning, module=r"torch\._dynamo")
            return compiled()

    return call


def step_function(
    path: str,
    network: str = "relu",
    hidden: int = 1024,
    samples: int = 32,
    batch: int = 128,
    device: str = "cpu",
    precision: str = "fp32",
) -> Callable[[], float]:
    """A closure running one forward + backward pass on ``path``; returns the loss. ``precision``: the products'
    (:mod:`pyroinv.model.precision`; the floor's product too)."""
    feats, inv, x, y, W2, eps = _setup(network, hidden, samples, batch, device)
    set_product_dtype(feats, precision)
    dtype = PRODUCT_DTYPES[precision]

    pre_transformed = x.reshape(1, batch, -1).repeat(samples, 1, 1).requires_grad_(True)

    def features() -> torch.Tensor:
        if path == "floor":
            return feats.activation(mm(pre_transformed, feats.first_weights().T, dtype) + feats.b1)
        if path == "input-aug":
            T_inv = lie.transforms(inv.eta, -eps)  # expm(-A) = expm(A)^-1
            xs = warp_images(x.repeat(samples, 1, 1, 1), T_inv.repeat_interleave(batch, 0))
            return feats.activation(torch.matmul(xs.reshape(samples, batch, -1), feats.first_weights().T) + feats.b1)
        return feats(x, lie.transforms(inv.eta, eps), path="weights" if path == "naive" else "auto")

    def loss() -> torch.Tensor:
        return -mc_log_predictive(features(), W2).gather(1, y.unsqueeze(1)).sum()

    loss_fn = _compiled(loss) if path == COMPILED else loss

    def step() -> float:
        feats.zero_grad(set_to_none=True)
        W2.grad = None
        pre_transformed.grad = None
        value = loss_fn()
        value.backward()
        return value.item()

    return step


def svi_step_function(
    network: str = "relu",
    hidden: int = 1024,
    samples: int = 32,
    batch: int = 128,
    device: str = "cpu",
    guide: str = "cholesky",
    num_train: int | None = None,
    cuda_graph: bool = False,
    precision: str = "fp32",
) -> Callable[..., dict]:
    """One full training step of :class:`pyroinv.inference.train.Trainer` (Trace_ELBO with the model, the
    guide (the paper's Cholesky guide, or a Pyro AutoGuide) and fused Adam, the paper's defaults otherwise) on
    ``num_train`` random 28x28 images (default four batches): the trainer's ``train_step(sync=True)``; with
    ``cuda_graph``, on a CUDA device, replayed as a CUDA graph after its warm-up steps."""

    from ..config import Config
    from .train import Trainer

    data = random_split(num_train or 4 * batch)
    cfg = Config(
        network=network,
        hidden=hidden,
        samples=samples,
        batch_size=batch,
        init_eta=30.0,
        epochs=1000,
        guide=guide,
        precision=precision,
    )
    return Trainer(cfg, data, device=device, cuda_graph=cuda_graph).train_step


#: Pyro's ELBOs timed under Pyro's own SVI by :func:`pyro_svi_step_function`
PYRO_ELBOS = ("Trace_ELBO", "TraceMeanField_ELBO", "JitTrace_ELBO", "JitTraceMeanField_ELBO")


def pyro_svi_step_function(
    elbo: str, network: str = "relu", hidden: int = 1024, samples: int = 32, batch: int = 128, device: str = "cpu"
) -> Callable[[], float]:
    """One step of Pyro's own ``SVI`` (``pyro.optim.Adam``) with Pyro's ELBO ``elbo`` on the package's model and
    guide (the paper's defaults otherwise; the global parameter store, as a user's ``SVI`` has it), on random
    28x28 images. The JIT ELBOs compile on their first call (left to the warm-up)."""
    import pyro
    from pyro.infer import SVI

    from ..config import Config
    from .build import build_model

    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    cfg = Config(network=network, hidden=hidden, samples=samples, batch_size=batch, init_eta=30.0)
    model, guide = build_model(cfg, (1, 28, 28), 10)
    model.to(device), guide.to(device)
    x = torch.rand(batch, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    # pyro.optim makes its wrappers of torch.optim at import time, unseen by mypy
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 1e-3}), getattr(pyro.infer, elbo)())  # type: ignore[attr-defined]

    def step() -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.jit.trace's notes on Python numbers taken from shapes
            return svi.step(x, y, num_data=60000)

    return step


def predictive_function(
    hidden: int = 512, samples: int = 16, n_test: int = 10000, num_samples: int = 16, device: str = "cpu"
) -> Callable[[], dict]:
    """``pyro.infer.Predictive(model, guide=guide, num_samples=...)`` of the sites ``y`` and ``W2`` over ``n_test``
    random 28x28 images, on a fresh model and guide of the paper's defaults (hidden and samples as given)."""
    import pyro
    from pyro.infer import Predictive

    from ..config import Config
    from .build import build_model

    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model, guide = build_model(Config(hidden=hidden, samples=samples, init_eta=30.0), (1, 28, 28), 10)
    model.to(device), guide.to(device)
    x = torch.rand(n_test, 1, 28, 28, device=device)
    predictive = Predictive(model, guide=guide, num_samples=num_samples, return_sites=["y", "W2"])
    return lambda: predictive(x)


def queued(step: Callable[..., object], steps: int) -> Callable[[], None]:
    """``steps`` training steps queued back to back (``step(sync=False)``), as training runs them; time it with
    :func:`time_call` (which waits for the device at the end) and divide by ``steps``."""

    def run() -> None:
        for _ in range(steps):
            step(sync=False)

    return run


def time_call(fn: Callable[[], object], repeats: int = 10, warmup: int = 2, device: str = "cpu") -> float:
    """Median wall time of ``fn`` in seconds (on CUDA, after the device has finished its work)."""
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def eval_function(
    path: str,
    network: str = "relu",
    hidden: int = 1024,
    samples: int = 32,
    n_test: int = 10000,
    batch: int = 500,
    device: str = "cpu",
) -> Callable[[], None]:
    """A closure predicting ``n_test`` images with S deterministic transforms (naive: warp per batch),
    without autograd, as :mod:`pyroinv.inference.evaluate` does."""
    feats, inv, _, _, W2, _ = _setup(network, hidden, samples, 1, device)
    x = torch.rand(n_test, 1, 28, 28, device=device)
    T = inv.sample_transforms(samples, "deterministic")
    W2 = W2.detach()

    @torch.no_grad()
    def run() -> None:
        bank = feats.weight_bank(T) if path == "pyroinv" else None
        for i in range(0, n_test, batch):
            b = feats.weight_bank(T) if bank is None else bank
            mc_log_predictive(feats.apply_bank(x[i : i + batch], b), W2)

    return run


def peak_memory_mb(device: str = "cpu") -> float:
    """Peak memory so far, in MiB: the process's resident size on the CPU (Linux ``ru_maxrss`` is in
    KiB), or the most memory torch's allocator has held on a CUDA device."""
    if torch.device(device).type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def training_memory(
    network: str = "relu",
    hidden: int = 1024,
    samples: int = 32,
    batch: int = 128,
    num_train: int = 2048,
    inference: str = "vi",
    steps: int = 3,
    device: str = "cpu",
) -> dict:
    """Peak memory of training, measured against :func:`pyroinv.inference.memory.estimate`: the growth of this
    process's peak resident memory (CPU) or the allocator's peak (CUDA) from just before the
    :class:`~pyroinv.inference.train.Trainer` is built (the data already loaded, as in a run) to after ``steps``
    training steps on random 28x28 images. Run it in a fresh process: the resident peak cannot be lowered."""

    from ..config import Config
    from .memory import estimate, resident_bytes
    from .train import Trainer

    n_test = 10
    data = random_split(num_train, n_test)
    cfg = Config(
        network=network,
        hidden=hidden,
        samples=samples,
        batch_size=batch,
        inference=inference,
        init_eta=30.0,
        epochs=1000,
        device=device,
    )
    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    else:
        before = resident_bytes()[0]
    trainer = Trainer(cfg, data, device=device)
    for _ in range(steps):
        trainer.train_step()
    peak = torch.cuda.max_memory_allocated(device) if cuda else resident_bytes()[1]
    est = estimate(cfg, (1, 28, 28), 10, num_train, n_test)
    return {"measured_mb": (peak - before) / 2**20, "estimated_mb": est.total / 2**20}
