"""Peak memory of a training run, estimated before it starts, and checked against what the device has.

A run holds, in float32 (4 bytes a number), with ``D`` the input size (784 for MNIST), ``H`` hidden units,
``K`` classes, ``F = H + 1`` features with the bias, ``S`` transforms, ``B`` the batch and ``N`` images:

* the data on the device: ``(N_train + N_test) D``;
* the parameters with their gradients and Adam's two moments: ``4 P``, with
  ``P = K F² + 2 K F`` for the per-class Cholesky ``q`` (``K F`` for a point estimate) plus the body's learned
  parameters (``H D + H`` for the paper's ReLU network; :attr:`pyroinv.model.registry.Network.parameters`);
* the step's temporaries: ``q``'s Cholesky factor and its gradient path (``c_L K F²``), the ``S × B × A``
  activations and their gradients (``c_a S B A``, ``A = H`` for the paper's network,
  :attr:`pyroinv.model.registry.Network.activations` for the others), the warped images (``c_x S B D`` when the
  warp's adjoint is
  applied to the ``B`` inputs, ``c_x S H D`` when the ``S H`` weight images are warped, i.e. ``B ≥ H``) and the
  per-example draws of ``W₂`` (``c_d B K F``, local estimator);
* what the framework takes on its first steps (autograd's engine, the math libraries' buffers): ``RUNTIME``.

The constants were fitted (non-negative least squares) to the measured peak resident memory of the first
training steps on the CPU at 16 settings from H = 64 to 2,048, S = 4 to 128, B = 16 to 1,024, with every
estimate within 12% of its measurement (``python scripts/benchmark.py --memory`` prints estimate against
measurement; docs/results/engineering.md gives the table).
A run whose estimate exceeds the device's available memory stops before training with one line
(:func:`check_fits`) instead of being killed by the operating system.
"""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch

from ..config import Config
from ..errors import ConfigError
from ..model.estimators import num_draws
from ..model.methods import method
from ..model.registry import FeatureSettings, network

FLOAT = 4
#: temporaries of a step, in copies of each term (fitted; see the module docstring). C_CHOLESKY was 3.4 when every
#: step checked q's Cholesky factor (torch's lower_cholesky check: comparisons the size of the factor); with the
#: checks on the first step only (Trainer.train_step) the peak of the paper's step fell by up to 0.9 of a factor
C_CHOLESKY, C_ACTIVATIONS, C_WARPED, C_DRAWS = 2.5, 1.75, 4.4, 3.8
#: bytes the framework adds on the first training steps, whatever the sizes (fitted)
RUNTIME = 180 * 2**20
GIB = 2**30


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a run needs on its device: the data, the parameters with gradients and Adam, a step's temporaries
    and the framework's own first-step allocations."""

    data: int
    state: int
    step: int
    runtime: int = RUNTIME

    @property
    def total(self) -> int:
        return self.data + self.state + self.step + self.runtime

    def describe(self) -> str:
        return (
            f"about {self.total / GIB:.1f} GiB (data {self.data / GIB:.1f}, parameters with Adam "
            f"{self.state / GIB:.1f}, one step {self.step / GIB:.1f})"
        )


def estimate(
    cfg: Config, input_shape: tuple[int, ...], num_classes: int, num_train: int, num_test: int
) -> MemoryEstimate:
    """The peak memory of training ``cfg`` on data of ``input_shape`` (see the module docstring)."""
    D = math.prod(input_shape)
    H, K, S, B = cfg.hidden, num_classes, cfg.samples, min(cfg.batch_size, num_train)
    F = H + 1
    gaussian = method(cfg.inference).bayesian  # a Cholesky q, else a point estimate of W2
    net = network(cfg.network)
    body = FeatureSettings(
        hidden=H,
        depth=cfg.depth,
        channels=cast("tuple[int, int]", tuple(cfg.channels)),
        standardize=cfg.standardizes_w1(images=len(input_shape) == 3),
    )
    params = (K * F * F + 2 * K * F if gaussian else K * F) + net.parameters(body, tuple(input_shape))
    image = len(input_shape) == 3
    warped = S * (B if B < H or not net.weight_space else H) * D if image else 0
    draws = num_draws(cfg.estimator, B) * K * F if gaussian else K * F
    activations = net.activations(body, tuple(input_shape))
    step = (
        (C_CHOLESKY * K * F * F if gaussian else 0)
        + C_ACTIVATIONS * S * B * activations
        + C_WARPED * warped
        + C_DRAWS * draws
    )
    return MemoryEstimate(data=FLOAT * (num_train + num_test) * D, state=FLOAT * 4 * params, step=int(FLOAT * step))


def available(device: torch.device) -> int | None:
    """Bytes the device can still give: CUDA's free memory, or on the CPU ``MemAvailable`` (capped by a cgroup's
    memory limit, as in a container or a batch job); ``None`` where it cannot be read."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type != "cpu":
        return None
    free = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max" and free is not None:
            free = min(free, int(limit) - used)
    except (OSError, ValueError):
        pass
    return free


def check_fits(
    cfg: Config, input_shape: tuple[int, ...], num_classes: int, num_train: int, num_test: int, device: torch.device
) -> MemoryEstimate:
    """Refuse, in one line, a run whose estimated memory exceeds what ``device`` has available."""
    need = estimate(cfg, input_shape, num_classes, num_train, num_test)
    have = available(device)
    if have is not None and need.total > have:
        raise ConfigError(
            f"training needs {need.describe()} but the {device.type.upper()} has "
            f"{have / GIB:.1f} GiB available; reduce --samples, --batch-size or --hidden (a step grows "
            f"with S x B x H, q with K x H²), or --train-size"
        )
    return need


def resident_bytes() -> tuple[int, int]:
    """This process's resident memory now and its peak so far (Linux ``VmRSS``, ``VmHWM``)."""
    now = peak = 0
    try:
        for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return now, peak
