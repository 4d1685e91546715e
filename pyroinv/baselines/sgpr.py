"""Sparse GP regression on one-hot labels, the paper's SGPR baseline (Table 2), with ``pyro.contrib.gp``.

Each class c gets a GP output ``f_c ~ GP(0, k)`` with one shared RBF kernel
``k(x, x') = s² exp(-||x - x'||² / 2ℓ²)`` and Gaussian noise; the targets are the one-hot labels
``y_c ∈ {0, 1}`` and a test point is classified by ``argmax_c E[f_c(x)]``. Titsias' (2009) collapsed
variational bound (``approx="VFE"``) with M inducing inputs ``Z`` (initialised at a class-balanced random
subset of the training images) is maximised over ``Z``, ``ℓ``, ``s²`` and the noise with Adam, full batch.
The paper does not give M or the optimiser; they are flags here (``docs/results/claims.md``: the values used).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyro
import pyro.contrib.gp as gp
import torch

from ..data import describe, load_dataset
from ..errors import ConfigError
from ..files import append_line, write_failure, write_json
from ..inference.build import device_name
from ..model import lie
from ..model.scope import local_params
from ..run.folder import RunFolder, RunResults
from ..run.lock import RunLock


@dataclass
class SGPRConfig:
    """Settings of one SGPR run (defaults: see the module docstring)."""

    dataset: str = "mnist-rot"
    inducing: int = 500
    steps: int = 300
    lr: float = 0.01
    train_size: int | None = None
    test_size: int | None = None
    seed: int = 0

    def validate(self) -> SGPRConfig:
        for name in ("inducing", "steps"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"--{name} must be a positive integer, got {getattr(self, name)}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"--lr must be a positive number, got {self.lr}")
        return self


def initial_inducing(x: torch.Tensor, y: torch.Tensor, m: int, generator: torch.Generator) -> torch.Tensor:
    """``m`` training inputs, as equal a number from each class as ``m`` allows."""
    if m > x.shape[0]:
        raise ConfigError(f"--inducing {m} exceeds the {x.shape[0]} training points; use at most that many")
    classes = torch.unique(y)
    picks = []
    for i, c in enumerate(classes):
        idx = torch.nonzero(y == c).squeeze(1)
        k = m // len(classes) + (1 if i < m % len(classes) else 0)
        picks.append(idx[torch.randperm(len(idx), generator=generator)[:k]])
    return x[torch.cat(picks)].clone()


def build_sgpr(
    x: torch.Tensor, y: torch.Tensor, num_classes: int, inducing: int, generator: torch.Generator
) -> gp.models.SparseGPRegression:
    """The model: RBF kernel (lengthscale initialised at the median inter-point distance), VFE."""
    sub = x[torch.randperm(x.shape[0], generator=generator)[:500]]
    lengthscale = torch.cdist(sub, sub).median().clamp_min(1e-3)
    kernel = gp.kernels.RBF(input_dim=x.shape[1], variance=torch.tensor(1.0, dtype=x.dtype), lengthscale=lengthscale)
    targets = torch.nn.functional.one_hot(y, num_classes).to(x.dtype).T  # (K, N): one GP output per class
    Xu = initial_inducing(x, y, inducing, generator)
    return gp.models.SparseGPRegression(
        x, targets, kernel, Xu=Xu, noise=torch.tensor(0.1, dtype=x.dtype), approx="VFE", jitter=1e-5
    )


def predict(model: gp.models.SparseGPRegression, x: torch.Tensor, batch_size: int = 1000) -> torch.Tensor:
    """Predictive means ``(N, K)``."""
    with torch.no_grad():
        return torch.cat([model(x[i : i + batch_size], full_cov=False)[0].T for i in range(0, x.shape[0], batch_size)])


def run_sgpr(
    cfg: SGPRConfig, out: str | Path, data_root: str | None = None, cache_dir: str | None = None, report=print
) -> dict[str, Any]:
    """Train and evaluate; write ``config.json``, ``metrics.jsonl`` and ``results.json`` into ``out`` (under the
    folder's lock, :class:`pyroinv.run.lock.RunLock`), with the GP's parameters in its modules
    (:func:`~pyroinv.model.scope.local_params`)."""
    cfg.validate()
    out = Path(out)
    with RunLock(out), local_params():
        return _run_sgpr(cfg, out, data_root, cache_dir, report)


def _run_sgpr(cfg: SGPRConfig, out: Path, data_root: str | None, cache_dir: str | None, report) -> dict[str, Any]:
    if RunFolder(out).is_finished():
        raise ConfigError(f"--out {out} already holds a run; choose a new --out")
    data = load_dataset(
        cfg.dataset,
        data_root=data_root,
        cache_dir=cache_dir,
        train_size=cfg.train_size,
        test_size=cfg.test_size,
        seed=cfg.seed,
    )
    report(describe(data))
    if cfg.inducing > len(data.y_train):
        raise ConfigError(
            f"--inducing {cfg.inducing} exceeds the {len(data.y_train)} training points; use at most that many"
        )
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "config.json", saved_config(cfg))
    x, y = (t.double() for t in data.tensors("train"))
    x, y = x.reshape(x.shape[0], -1), y.long()
    x_test, y_test = data.tensors("test")
    x_test = x_test.double().reshape(x_test.shape[0], -1)
    gen = torch.Generator().manual_seed(cfg.seed)
    pyro.set_rng_seed(cfg.seed)
    pyro.clear_param_store()
    model = build_sgpr(x, y, data.num_classes, cfg.inducing, gen)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    loss_fn = pyro.infer.Trace_ELBO().differentiable_loss
    n_outputs = data.num_classes
    t0 = time.perf_counter()
    try:
        log = open(out / "metrics.jsonl", "w")
    except OSError as err:
        raise write_failure(out / "metrics.jsonl", err) from None
    with log:
        for step in range(1, cfg.steps + 1):
            optimizer.zero_grad()
            loss = loss_fn(model.model, model.guide)
            loss.backward()
            optimizer.step()
            if not torch.isfinite(loss):
                raise ConfigError(f"the SGPR bound became {loss.item()} at step {step}; try a smaller --lr")
            if step % 10 == 0 or step == cfg.steps:
                bound = -loss.item() / (x.shape[0] * n_outputs)
                rec = {
                    "step": step,
                    "bound_per_datapoint": bound,
                    "lengthscale": model.kernel.lengthscale.item(),
                    "noise": model.noise.item(),  # type: ignore[attr-defined]  # pyro types it PyroParam
                    "wall_time_s": time.perf_counter() - t0,
                }
                append_line(log, out / "metrics.jsonl", json.dumps(rec) + "\n")
                if step % 50 == 0 or step == cfg.steps:
                    report(
                        f"step {step}/{cfg.steps}  bound/N {bound:.4f}  lengthscale {rec['lengthscale']:.3f}  "
                        f"noise {rec['noise']:.4f}"
                    )
    train_time = time.perf_counter() - t0
    t1 = time.perf_counter()
    mean = predict(model, x_test)
    acc = (mean.argmax(1) == y_test).double().mean().item()
    no_eta = torch.zeros(6)
    results = RunFolder(out).write_results(
        RunResults(
            dataset=cfg.dataset,
            invariance="none",
            network="sgpr",
            inference="sgpr",
            test_accuracy=acc,
            test_nll=None,
            elbo_per_datapoint=None,
            train_loglik_per_datapoint=None,
            eta=no_eta.tolist(),
            eta_human=lie.to_human(no_eta, None),
            learned_invariance="no invariance",
            steps=cfg.steps,
            train_size=int(x.shape[0]),
            test_size=int(x_test.shape[0]),
            train_wall_time_s=train_time,
            eval_wall_time_s=time.perf_counter() - t1,
            device="cpu",
            device_name=device_name("cpu"),
            extra={
                "sgpr_bound_per_datapoint": -loss.item() / (x.shape[0] * n_outputs),
                "inducing": cfg.inducing,
                "lengthscale": model.kernel.lengthscale.item(),
                "noise": model.noise.item(),  # type: ignore[attr-defined]  # pyro types it PyroParam
            },
        )
    )
    report(f"SGPR ({cfg.inducing} inducing points): test accuracy {100 * acc:.2f}%  results in {out}/")
    return results


def saved_config(cfg: SGPRConfig) -> dict[str, Any]:
    """What ``config.json`` of an SGPR run holds."""
    return {"method": "sgpr", **asdict(cfg)}


__all__ = ["SGPRConfig", "build_sgpr", "initial_inducing", "predict", "run_sgpr", "saved_config"]
