"""Training: SVI on the ELBO with Adam and a cosine-annealed learning rate (paper §4).

Pyro's ELBO objects turn a (model, guide) pair into a ``torch.nn.Module`` whose
forward pass is a differentiable loss estimate (``Trace_ELBO()(model, guide)``, the
module form of :class:`pyro.infer.SVI` that works with module-local parameters); a
plain ``torch.optim.Adam`` with ``CosineAnnealingLR`` then steps the variational
parameters, ``W1`` and ``eta`` jointly. The loss of a step is the negative SGVB
estimate of the ELBO: ``-(N / M) sum_batch log f_hat - KL`` (one ``W2`` draw, L = 1).

Batches are drawn from a permutation seeded by (seed, epoch), so a run is a pure
function of its configuration on the CPU, and :meth:`Trainer.state_dict` captures
everything needed to continue it exactly (parameters, optimiser, schedule, RNG).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyro
import torch
from pyro.poutine.messenger import Messenger

from ..config import W1_WARMUP_STEPS, Config
from ..data.splits import Split
from ..errors import ConfigError
from ..model.methods import method
from ..model.precision import resolve_precision
from ..model.scope import local_params
from .build import build_model, resolve_device
from .evaluate import inactive_units
from .losses import MethodLoss, method_loss
from .step_graph import CudaGraph, GraphedStep, Recorder, enabled_by_environment

log = logging.getLogger("pyroinv")

#: "no non-finite loss yet" (a step number no run reaches)
_NEVER = 2**62
#: the training images on which each metrics record counts the inactive units (:meth:`Trainer.inactive_units`)
UNIT_PROBE_IMAGES = 512


def learning_rate_schedule(
    optimizer: torch.optim.Optimizer, total_steps: int, warm_group: int | None = None, warm_steps: int = 0
) -> torch.optim.lr_scheduler.LRScheduler:
    """Every group's rate cosine-annealed from its own value to 0 over ``total_steps`` (the paper's schedule),
    ``lr_t = lr (1 + cos(pi t / T)) / 2``; with ``warm_steps``, the group ``warm_group``'s rate is also multiplied
    by ``min(1, (t + 1) / warm_steps)``, a linear warm-up."""
    if not warm_steps:
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps, eta_min=0.0)

    def cosine(t: int) -> float:
        return 0.5 * (1.0 + math.cos(math.pi * min(t, total_steps) / total_steps))

    def warmed(t: int) -> float:
        return cosine(t) * min(1.0, (t + 1) / warm_steps)

    factors: list[Callable[[int], float]] = [
        warmed if i == warm_group else cosine for i in range(len(optimizer.param_groups))
    ]
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factors)


def run_length(num_data: int, batch_size: int, epochs: int, min_steps: int = 0) -> tuple[int, int]:
    """``(epochs, steps per epoch)`` of a run on ``num_data`` examples: ``epochs`` passes of ``ceil(N / batch)``
    steps, lengthened to at least ``min_steps`` steps."""
    per_epoch = math.ceil(num_data / batch_size)
    return max(epochs, math.ceil((min_steps or 0) / per_epoch)), per_epoch


class ObservedSite(Messenger):
    """Keeps the distribution and value of the observed sample site ``name`` of the last model run inside it, so
    that the training-batch NLL is read off the ELBO's own pass: ``with ObservedSite("y") as s: loss = ...``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.fn: pyro.distributions.Distribution | None = None
        self.value: torch.Tensor | None = None

    def _pyro_post_sample(self, msg: dict) -> None:
        if msg["name"] == self.name and msg["is_observed"]:
            self.fn, self.value = msg["fn"], msg["value"]

    @torch.no_grad()
    def log_prob(self) -> torch.Tensor:
        """``log p(y_b | ...)`` of every observed value, as the model saw it (unscaled)."""
        if self.fn is None:
            raise RuntimeError(f"no observed site {self.name!r} ran inside this ObservedSite")
        return self.fn.log_prob(self.value)


class Trainer:
    """Holds model, guide, loss module, optimiser and schedule of one run.

    Args:
        cfg: the configuration, validated (:meth:`~pyroinv.config.Config.validate`) by the caller.
        data: the data split (already subset).
        device: overrides ``cfg.device``.
        cuda_graph: on a CUDA device, replay the step as a CUDA graph (:mod:`pyroinv.inference.step_graph`;
            not for the Laplace method, whose curvature is refreshed between steps). Default: on, unless
            ``$PYROINV_CUDA_GRAPH`` is ``0``.
        recorder: records and replays the step in place of a CUDA graph, on any device (tests:
            :class:`~pyroinv.inference.step_graph.CallAgain`).
        body: a user's ``nn.Module`` from inputs to features in place of ``cfg.network``, with ``transforms_on``
            (:func:`~pyroinv.inference.build.build_model`).
    """

    def __init__(
        self,
        cfg: Config,
        data: Split,
        device: torch.device | str | None = None,
        cuda_graph: bool | None = None,
        recorder: Callable[..., Recorder] | None = None,
        body: torch.nn.Module | None = None,
        transforms_on: str = "auto",
    ) -> None:
        self.cfg = cfg  # validated by its caller (InvariantClassifier, the benchmark)
        self.device = torch.device(device) if device is not None else resolve_device(cfg.device)
        pyro.set_rng_seed(cfg.seed)
        self.x_train, self.y_train = data.tensors("train", self.device)
        self.x_test, self.y_test = data.tensors("test", self.device)
        #: the validation set held out of the training set (``cfg.valid_size``), else ``None``
        self.valid = data.tensors("valid", self.device) if data.y_valid is not None else None
        self.input_shape = data.input_shape
        self.num_classes = data.num_classes
        self.num_data = self.x_train.shape[0]
        self.model, self.guide = build_model(cfg, self.input_shape, self.num_classes, body, transforms_on, self.device)
        #: the precision of the network's products on this device (``cfg.precision`` with ``auto`` resolved)
        self.precision = resolve_precision(cfg.precision, self.device)
        self.model.to(self.device)
        self.guide.to(self.device)
        #: the method's objective (:mod:`pyroinv.inference.losses`): the loss of a batch, and eta's extra gradient
        self.loss_fn: MethodLoss = method_loss(cfg, self.model, self.guide, self.x_train, self.y_train)
        self.epochs, self.steps_per_epoch = run_length(self.num_data, cfg.batch_size, cfg.epochs, cfg.min_steps)
        self.total_steps = self.epochs * self.steps_per_epoch
        self.eta_warmup_steps = cfg.eta_warmup * self.steps_per_epoch
        if cfg.eta_warmup and self.eta_warmup_steps >= self.total_steps:
            raise ConfigError(
                f"--eta-warmup {cfg.eta_warmup} holds eta for the whole run of {self.epochs} epochs; "
                f"give a number below {self.epochs}"
            )
        if cfg.w1_warmup and not self._own_weights():
            raise ConfigError(
                f"--w1-warmup {cfg.w1_warmup}: the {cfg.network} network has no weights of its own to warm up "
                f"(rff's W1 is fixed); drop the flag or use --network relu"
            )
        if cfg.w1_warmup is not None and cfg.w1_warmup >= self.total_steps:
            raise ConfigError(
                f"--w1-warmup {cfg.w1_warmup} is not shorter than the run's {self.total_steps} steps; give fewer, "
                f"or leave it unset ({W1_WARMUP_STEPS} or an eighth of the run)"
            )
        #: the steps over which the network's own weights' rate warms up (:meth:`Config.w1_warmup_steps`; none
        #: without weights of their own, as rff's)
        self.w1_warmup_steps = cfg.w1_warmup_steps(self.total_steps) if self._own_weights() else 0
        # fused Adam: one kernel for all parameters (the guide has ~K D^2 / 2 of them); same update rule.
        # The output layer's mean (mu of q, or the point W2) takes its own rate, cfg.mean_lr (see Config).
        groups, self.own_weights_group = self.param_groups()
        self.optimizer = torch.optim.Adam(groups, lr=cfg.lr, betas=(0.9, 0.999), fused=True)
        self.scheduler = learning_rate_schedule(
            self.optimizer, self.total_steps, self.own_weights_group, self.w1_warmup_steps
        )
        self.step = 0
        self.wall_time = 0.0
        self._perm_epoch: int | None = None
        self._perm = torch.empty(0, dtype=torch.long)
        self._loss: torch.Tensor | None = None
        self._batch_nll: torch.Tensor | None = None
        # the number of the step being run, and the first step with a non-finite loss and that loss: on the device,
        # updated in place (a recorded step writes the same tensors at every replay)
        self._step_number = torch.zeros((), dtype=torch.long, device=self.device)
        self._first_bad = torch.full((), _NEVER, dtype=torch.long, device=self.device)
        self._bad_value = torch.zeros((), device=self.device)
        self._validate = True  # the next step checks the distributions' arguments (see train_step)
        if cuda_graph is None:
            cuda_graph = enabled_by_environment()
        if recorder is None and cuda_graph and self.device.type == "cuda":
            recorder = CudaGraph
        #: the step recorded and replayed (:mod:`pyroinv.inference.step_graph`), where it applies; else ``None``
        self.graph = (
            GraphedStep(self._step, self.optimizer, self.x_train, self.y_train, cfg.batch_size, recorder)
            if recorder is not None and not self.loss_fn.steps_eagerly
            else None
        )
        #: steps of this process that were replays of the recorded step
        self.graph_replays = 0

    def _own_weights(self) -> list[torch.nn.Parameter]:
        """The network's own weights: its features' parameters but ``eta`` (``W1`` and ``b1``, a deeper
        network's hidden layers, a user's body; none for rff)."""
        skip = {id(p) for p in self.model.invariance.parameters()}
        return [p for p in self.model.features.parameters() if id(p) not in skip]

    def param_groups(self) -> tuple[list[dict], int | None]:
        """Adam's parameter groups, and the index of the network's own weights' group (``None`` where they have none
        of their own): the output layer's mean (``mu`` or ``W2_hat``) at ``cfg.mean_lr``, the invariance ``eta`` at
        ``cfg.eta_lr``, the network's own weights at ``cfg.w1_lr``, the rest (the scale of q, and the weights where
        they have no group) at ``cfg.lr`` (``None``: ``cfg.lr``, the paper's single rate). The network's weights
        have a group of their own, the last, where ``w1_lr`` is set or their rate warms up."""
        eta = list(self.model.invariance.parameters())
        own = [(list(self.guide.mean_parameters()), self.cfg.mean_lr), (eta, self.cfg.eta_lr)]
        weights = self._own_weights() if self.cfg.w1_lr is not None or self.w1_warmup_steps else []
        own.append((weights, self.cfg.w1_lr))
        taken = {id(p) for params, _ in own for p in params}
        groups: list[dict[str, Any]] = [{"params": [p for p in self.loss_fn.parameters() if id(p) not in taken]}]
        for params, lr in own:
            if params:
                groups.append({"params": params, "lr": self.cfg.lr if lr is None else lr})
        return groups, (len(groups) - 1 if weights else None)

    @property
    def epoch(self) -> int:
        return self.step // self.steps_per_epoch

    @property
    def done(self) -> bool:
        return self.step >= self.total_steps

    def batch_indices(self, step: int) -> torch.Tensor:
        """Indices of the batch of ``step``: a slice of the permutation of its epoch (drawn on the CPU from
        (seed, epoch), once per epoch, and kept on the device)."""
        epoch, pos = divmod(step, self.steps_per_epoch)
        if self._perm_epoch != epoch:
            g = torch.Generator().manual_seed(self.cfg.seed * 100003 + epoch)
            self._perm = torch.randperm(self.num_data, generator=g).to(self.device)
            self._perm_epoch = epoch
        return self._perm[pos * self.cfg.batch_size : (pos + 1) * self.cfg.batch_size]

    def train_step(self, sync: bool = True) -> dict[str, float]:
        """One SVI step; returns the step, epoch and learning rate, and (``sync``) the loss and ELBO/N estimate.

        ``sync=False`` leaves the loss on the device: nothing waits for the step to finish, so on a GPU the next
        step is queued while this one runs (no value is read back: the ELBO is
        :class:`~pyroinv.inference.device_elbo.DeviceTrace_ELBO`, the transforms' exponentials stay on the device,
        and the distributions' argument checks run on the first step only). :meth:`losses`,
        :attr:`last_batch_nll` and :meth:`first_nonfinite` read the values when they are needed (at a metrics
        record or a checkpoint). On a GPU a full batch after ``eta_warmup`` is a replay of the recorded step
        (:attr:`graph`)."""
        t0 = time.perf_counter()
        idx = self.batch_indices(self.step)
        lr = self.optimizer.param_groups[0]["lr"]
        self._step_number.fill_(self.step + 1)
        out = None
        if self.graph is not None and self.step >= self.eta_warmup_steps and self.graph.applies(idx):
            out = self.graph(idx)
            self.graph_replays += self.graph.recorded
            if self.graph.failed is not None:
                log.warning(
                    "the training step could not be recorded as a CUDA graph (%s); training goes on step by step",
                    self.graph.failed,
                )
                self.graph = None
        if out is None:
            out = self._step(self.x_train[idx], self.y_train[idx])
        self._loss, self._batch_nll = out
        self.scheduler.step()
        self.step += 1
        if self.done and self.graph is not None:  # free the graph's memory for the evaluation
            self.graph = None
            self.optimizer.zero_grad(set_to_none=True)
        self.wall_time += time.perf_counter() - t0
        rec = {"step": self.step, "epoch": (self.step - 1) // self.steps_per_epoch, "lr": lr}
        return {**rec, **self.losses()} if sync else rec

    def _step(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The step on the batch ``(x, y)``: the loss, its gradients, Adam's update; returns the loss and the batch's
        mean NLL as device tensors. The same function runs eagerly and, recorded, as a graph."""
        self.optimizer.zero_grad(set_to_none=True)
        # Pyro's and torch's checks of every distribution's arguments read a boolean back from the device at each
        # sample site: the first step of a Trainer runs them (when they are on), later steps skip them
        with (
            pyro.validation_enabled(self._validate and pyro.distributions.is_validation_enabled()),
            ObservedSite("y") as y_site,
        ):
            loss = self.loss_fn(x, y, num_data=self.num_data)
        self._validate = False
        with local_params():  # the modules' own parameters, as in the loss (pyroinv.model.scope)
            loss = self.loss_fn.total(loss)
            # eta's gradient beyond the loss's (the Laplace evidence's Occam term), not while eta is held
            occam = (
                None
                if self.step < self.eta_warmup_steps
                else self.loss_fn.eta_gradient(self.step, self.steps_per_epoch)
            )
        loss.backward()
        if occam is not None:  # the Laplace evidence's gradient: the log-likelihood's (in loss) and the Occam term's
            for p, g in zip(self.model.invariance.parameters(), occam):
                if g is not None:
                    p.grad = g if p.grad is None else p.grad + g
        if self.step < self.eta_warmup_steps:  # eta held at its start: Adam skips a parameter without a gradient
            for p in self.model.invariance.parameters():
                p.grad = None
        self.optimizer.step()
        loss = loss.detach()
        self._note_nonfinite(loss)
        return loss, -y_site.log_prob().mean()

    def _note_nonfinite(self, loss: torch.Tensor) -> None:
        """Remember the first step whose loss was NaN or infinite, and that loss, in place and without a host sync."""
        first = ~torch.isfinite(loss) & (self._first_bad == _NEVER)
        self._first_bad.copy_(torch.where(first, self._step_number, self._first_bad))
        self._bad_value.copy_(torch.where(first, loss, self._bad_value))

    def losses(self) -> dict[str, float]:
        """The last step's ``loss`` and ``elbo_per_datapoint`` (= -loss / N) as numbers (a host sync)."""
        loss = float(self._loss) if self._loss is not None else float("nan")
        return {"loss": loss, "elbo_per_datapoint": -loss / self.num_data}

    @property
    def last_batch_nll(self) -> float:
        """The last training batch's mean NLL, read off the ELBO's own pass (a host sync)."""
        return float(self._batch_nll) if self._batch_nll is not None else float("nan")

    def first_nonfinite(self) -> tuple[int, float] | None:
        """``(step, loss)`` of the first step whose loss was NaN or infinite, or ``None`` (one host sync)."""
        if int(self._first_bad) == _NEVER:
            return None
        return int(self._first_bad), float(self._bad_value)

    def steps(self) -> Iterator[dict[str, float]]:
        """Run the remaining steps, yielding each step's record."""
        while not self.done:
            yield self.train_step()

    @torch.no_grad()
    def diagnostics(self, units: bool = True) -> dict[str, float]:
        """Where the fit stands: ``kl_per_datapoint`` = KL(q || p) / N (VI only), the guide's ``q_scale`` (mean
        diagonal of the ``L_c``; 1 at ``L = I``) and ``mu_norm`` (``||mu||``, or ``||W2_hat||`` of a point guide).

        A collapsed q shows as ``q_scale`` far below 1 with KL/N of tenths of a nat; the regime in which the
        ELBO rewards invariance keeps ``q_scale`` near 1 and KL/N at hundredths. ``inactive_units``: the share of
        the last hidden layer that is zero on the first :data:`UNIT_PROBE_IMAGES` training images under one draw
        of S transforms (:meth:`inactive_units`; left out with ``units=False``, as it costs most of a step).
        """
        out = dict(self.guide.diagnostics())
        if units:
            out["inactive_units"] = self.inactive_units()
        if method(self.cfg.inference).bayesian:
            out["kl_per_datapoint"] = (
                float(self.guide.regulariser(self.model.prior(device=self.device))) / self.num_data
            )
        out.update(self.loss_fn.diagnostics())
        return out

    def inactive_units(self) -> float:
        """:func:`~pyroinv.inference.evaluate.inactive_units` on the first :data:`UNIT_PROBE_IMAGES` training
        images, with the random state forked so that the run's own draws are those of a run that never asks."""
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            return inactive_units(self.model, self.x_train[:UNIT_PROBE_IMAGES])

    def eta(self) -> torch.Tensor:
        return self.model.invariance.eta.detach().cpu()

    def state_dict(self) -> dict:
        """Everything a resumed run needs; plain tensors and numbers (``weights_only``-loadable)."""
        state = {
            "step": self.step,
            "wall_time": self.wall_time,
            "model": self.model.state_dict(),
            "guide": self.guide.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
        }
        if torch.cuda.is_available():
            state["cuda_rng"] = torch.cuda.get_rng_state_all()
        extra = self.loss_fn.extra_state()
        if extra is not None:
            state["laplace"] = extra
        return state

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.guide.load_state_dict(state["guide"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])
        self.wall_time = float(state["wall_time"])
        torch.set_rng_state(state["torch_rng"])
        if "laplace" in state:
            self.loss_fn.load_extra_state(state["laplace"])
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
