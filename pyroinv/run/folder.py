"""The run folder: its layout, its checks, and the one writer of ``results.json``.

A run folder (``--out``) holds

* ``config.json``: the resolved :class:`~pyroinv.config.Config` (what the user chose);
* ``meta.json``: what the data decided: input shape, number of classes, training-set size;
* ``metrics.jsonl``: one JSON record per logged step;
* ``checkpoint.pt`` (and ``checkpoint.prev.pt``, the one before): everything ``--resume`` needs;
* ``results.json``: written by :func:`write_results` for every method and for the SGPR baseline alike,
  the last file of a run;
* plots and ``posterior.nc``;
* ``.lock`` while a process trains in it (:mod:`pyroinv.run.lock`).

:meth:`RunFolder.state` is the one set of rules for what a folder holds (``done``, ``resumable``,
``unstarted``, ``foreign``), used by the command line, ``run_or_load`` and the reproduction runner alike.
:func:`load_run` rebuilds a trained model and guide from a folder.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..config import Config
from ..errors import ConfigError
from ..files import load_latest_checkpoint, read_config, read_json, read_jsonl, save_checkpoint, write_bytes, write_json

CONFIG, META, METRICS, RESULTS = "config.json", "meta.json", "metrics.jsonl", "results.json"
CHECKPOINT = "checkpoint.pt"
#: the checkpoint before the latest, kept so that a damaged latest file costs one checkpoint interval
PREVIOUS_CHECKPOINT = "checkpoint.prev.pt"

#: what :meth:`RunFolder.state` tells: finished; interrupted with a checkpoint; empty or stopped before its first
#: checkpoint (started again from step 0); holding a run with other settings
DONE, RESUMABLE, UNSTARTED, FOREIGN = "done", "resumable", "unstarted", "foreign"


def versions() -> dict[str, str]:
    """Python, torch, pyro and arviz versions, recorded in every ``results.json``."""
    import pyro

    from ..inference.arviz_export import import_arviz

    arviz = import_arviz()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "pyro": pyro.__version__,
        "arviz": arviz.__version__,
    }


@dataclass
class RunResults:
    """What ``results.json`` holds, for every method and baseline (``None`` where a value does not apply).

    ``elbo_per_datapoint`` is a bound only for a Gaussian ``q`` (:attr:`pyroinv.model.methods.Method.reports_elbo`);
    ``train_loglik_per_datapoint`` is the training log-likelihood / N of the fitted model; ``extra`` holds a
    method's own fields (e.g. SGPR's inducing points), written beside the others.
    """

    dataset: str
    invariance: str
    network: str
    inference: str
    test_accuracy: float
    test_nll: float | None
    elbo_per_datapoint: float | None
    train_loglik_per_datapoint: float | None
    eta: list[float]
    eta_human: dict[str, float]
    learned_invariance: str
    steps: int
    train_size: int
    test_size: int
    train_wall_time_s: float
    eval_wall_time_s: float
    device: str
    device_name: str = ""  # the card or processor (:func:`pyroinv.inference.build.device_name`)
    #: the Laplace estimates of log p(D | eta) / N at the trained body, W2 at its mode (Kronecker-factored, and exact
    #: up to :data:`pyroinv.inference.laplace.FULL_MAX` output weights):
    #: :func:`pyroinv.inference.laplace.evidence_at_mode`
    laplace_per_datapoint: float | None = None
    laplace_full_per_datapoint: float | None = None
    #: the Laplace estimate over every fully connected layer (image data, --network relu or mlp), with the layers'
    #: prior precisions at the evidence's fixed point: :func:`pyroinv.inference.laplace_layers.layers_evidence`
    laplace_layers_per_datapoint: float | None = None
    prior_precisions: list[float] | None = None
    #: the predictive on the validation set held out of the training set (``--valid-size``), else ``None``
    valid_accuracy: float | None = None
    valid_nll: float | None = None
    valid_size: int | None = None
    #: the fraction of the last hidden layer's units never active on (up to 1,000 of) the training images under S
    #: transforms (:func:`pyroinv.inference.evaluate.inactive_units`)
    inactive_units: float | None = None
    #: the wall time of each part of ``eval_wall_time_s`` (test, validation, training ELBO, Laplace, ArviZ, plots)
    eval_phases_s: dict[str, float] | None = None
    #: training steps replayed as a CUDA graph by the process that finished the run
    #: (:mod:`pyroinv.inference.step_graph`; 0: every step eager, as on a CPU)
    graph_replays: int | None = None
    #: the precision the network's products ran in (``fp32`` or ``bf16``: ``--precision`` with ``auto`` resolved)
    precision: str | None = None
    #: one line for each thing a user should know about the result (:mod:`pyroinv.run.fit_check`)
    warnings: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        clash = set(extra) & set(d)
        if clash:
            raise ValueError(f"extra results {sorted(clash)} would overwrite the common fields")
        return {**d, "versions": versions(), **extra}


class RunFolder:
    """One run's folder: where each file lives and what may be done with it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def has_checkpoint(self) -> bool:
        """Whether the folder holds a checkpoint to resume from (the latest or the one before it)."""
        return (self / CHECKPOINT).exists() or (self / PREVIOUS_CHECKPOINT).exists()

    def require_run(self) -> None:
        """Refuse a folder that holds no trained run (one-line :class:`ConfigError`)."""
        if not (self / CONFIG).exists() or not self.has_checkpoint():
            raise ConfigError(
                f"{self.path} is not a run folder (needs {CONFIG} and {CHECKPOINT}); pass the --out of a training run"
            )

    def is_finished(self) -> bool:
        return (self / RESULTS).exists()

    def config(self) -> dict[str, Any]:
        """The saved ``config.json`` (one-line error if it is damaged)."""
        return read_config(self / CONFIG)

    def differences(self, expected: Config | dict[str, Any]) -> list[str]:
        """The settings in which this folder's ``config.json`` differs from the run ``expected`` (a :class:`Config`,
        or the plain settings of another kind of run, e.g. the SGPR baseline's): the one answer to "is this folder
        the same run?" (``[]``: it is, or it holds no ``config.json`` yet). Keys added to :class:`Config` since the
        folder was written take their defaults."""
        if not (self / CONFIG).exists():
            return []
        saved = self.config()
        if isinstance(expected, Config):
            return expected.differences(saved)
        return sorted(k for k in set(saved) | set(expected) if saved.get(k) != expected.get(k))

    def state(self, expected: Config | dict[str, Any] | None = None) -> str:
        """What the folder holds: :data:`DONE` (``results.json``), :data:`RESUMABLE` (a checkpoint, the latest or
        the one before it), :data:`UNSTARTED` (nothing, or an attempt killed before its first checkpoint: at most
        ``config.json``, ``meta.json`` and ``metrics.jsonl``) or :data:`FOREIGN` (another run's folder: its settings
        differ from ``expected``, :meth:`differences`). A damaged ``config.json`` is a one-line error."""
        if expected is not None and self.differences(expected):
            return FOREIGN
        if self.is_finished():
            return DONE
        return RESUMABLE if self.has_checkpoint() else UNSTARTED

    def check_new(self, cfg: Config) -> None:
        """Refuse a folder that cannot take a new run of ``cfg`` (nothing is written): a file, a finished or
        resumable run, or an attempt with other settings. An attempt of the same run that stopped before its first
        checkpoint may be started again."""
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"--out {self.path} is a file, not a folder; choose a new --out")
        if not self.path.exists():
            return
        state = self.state(cfg)
        if state in (DONE, RESUMABLE):
            raise ConfigError(
                f"--out {self.path} already holds a run; pass --resume to continue it or choose a new --out"
            )
        if state == FOREIGN:
            raise ConfigError(
                f"--out {self.path} holds an attempt with other settings "
                f"({', '.join(self.differences(cfg))}) that stopped before its first "
                f"checkpoint; delete it or choose a new --out"
            )

    def check_resume(self, cfg: Config) -> None:
        """Refuse to resume a folder without a checkpoint, or one trained with other settings."""
        if not self.has_checkpoint():
            raise ConfigError(f"--resume: no checkpoint in {self.path}; start a new run without --resume")
        if not (self / CONFIG).exists():
            raise ConfigError(
                f"--resume: {self.path} has no {CONFIG}; it is not a complete run folder, start a new --out"
            )
        diff = self.differences(cfg)
        if diff:
            raise ConfigError(
                f"--resume: the configuration differs from the checkpoint's in {', '.join(diff)}; "
                f"use the same flags, or a new --out"
            )

    def check_same_run(self, cfg: Config) -> None:
        """Refuse a folder whose ``config.json`` holds other settings than ``cfg``."""
        diff = self.differences(cfg)
        if diff:
            raise ConfigError(f"{self.path} holds a run with other settings ({', '.join(diff)}); choose another folder")

    def start(self, cfg: Config, input_shape: tuple[int, ...], num_classes: int, num_data: int) -> None:
        """Create the folder with ``config.json`` and ``meta.json`` (an earlier attempt's metrics are dropped)."""
        self.path.mkdir(parents=True, exist_ok=True)
        (self / METRICS).unlink(missing_ok=True)
        write_json(self / CONFIG, cfg.to_dict())
        write_json(self / META, {"input_shape": list(input_shape), "num_classes": num_classes, "num_data": num_data})

    def meta(self) -> dict[str, Any] | None:
        """``meta.json``, or ``None`` for folders written before it existed."""
        return read_json(self / META) if (self / META).exists() else None

    def load_checkpoint(self, device: str | torch.device = "cpu") -> tuple[dict, Path]:
        """The latest readable checkpoint and its path (falls back to ``checkpoint.prev.pt``)."""
        return load_latest_checkpoint(self / CHECKPOINT, self / PREVIOUS_CHECKPOINT, map_location=device)

    def save_checkpoint(self, state: dict) -> None:
        """Write ``checkpoint.pt`` atomically, keeping the one it replaces as ``checkpoint.prev.pt``."""
        save_checkpoint(self / CHECKPOINT, state, previous=self / PREVIOUS_CHECKPOINT)

    def metrics(self) -> list[dict[str, Any]]:
        return read_jsonl(self / METRICS)

    def truncate_metrics(self, step: int) -> None:
        """Drop the records after ``step`` (those of steps a resumed run will train again)."""
        kept = "".join(json.dumps(r) + "\n" for r in self.metrics() if r["step"] <= step).encode()
        write_bytes(self / METRICS, kept)

    def write_results(self, results: RunResults) -> dict[str, Any]:
        """Write ``results.json`` (the one writer of it) and return what was written."""
        d = results.to_dict()
        write_json(self / RESULTS, d)
        return d

    def results(self) -> dict[str, Any]:
        return read_json(self / RESULTS)


def _shape_and_classes(
    folder: RunFolder, state: dict, input_shape: tuple[int, ...] | None, dataset: str
) -> tuple[tuple[int, ...], int]:
    """Input shape and number of classes from ``meta.json``; for folders written before it, from the checkpoint
    (the input-shape buffer and the guide's parameter shapes) or ``input_shape``."""
    meta = folder.meta()
    legacy_shape = state["model"].pop("features._input_shape", None)
    if meta is not None:
        shape, classes = tuple(meta["input_shape"]), int(meta["num_classes"])
    else:
        guide = state["guide"]
        classes = int(guide.get("loc_unconstrained", guide.get("W2_hat_unconstrained")).shape[0])
        if legacy_shape is not None:
            shape = tuple(int(v) for v in legacy_shape.tolist())
        elif input_shape is not None:
            return tuple(input_shape), classes
        else:
            raise ConfigError(f"{folder.path} records neither {META} nor its input shape; pass input_shape")
    if input_shape is not None and tuple(input_shape) != shape:
        raise ConfigError(
            f"the data have inputs {tuple(input_shape)} but the run was trained on {shape}; "
            f"evaluate it on a variant of {dataset}"
        )
    return shape, classes


def load_run(out: str | Path, device: str | torch.device = "cpu", input_shape: tuple[int, ...] | None = None):
    """Rebuild ``(cfg, model, guide, step)`` of a run folder from its ``config.json``, ``meta.json`` and checkpoint.

    ``input_shape``, if given, must match the run's (a one-line error names both otherwise).
    """
    import pyro

    from ..inference.build import build_model

    folder = RunFolder(out)
    folder.require_run()
    cfg = Config.from_dict(folder.config())
    state, _ = folder.load_checkpoint(device)
    shape, num_classes = _shape_and_classes(folder, state, input_shape, cfg.dataset)
    pyro.set_rng_seed(cfg.seed)
    model, guide = build_model(cfg, shape, num_classes, device=device)
    model.load_state_dict(state["model"])
    guide.load_state_dict(state["guide"])
    return cfg, model.to(device), guide.to(device), int(state["step"])
