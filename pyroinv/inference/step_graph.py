"""A whole training step recorded once as a CUDA graph and replayed: one launch a step instead of hundreds.

On a GPU the paper's step (ReLU, H = 1,024, S = 32, batch 128) is bound by launches, not arithmetic: Pyro traces
the model and the guide in Python, and the forward pass, autograd and Adam launch about 290 operators one by one
(8.3 ms a step on an H200 against a 1.6 ms matrix-product floor, docs/results/engineering.md).
``torch.cuda.graph`` records the kernels of one step (forward, backward, the fused Adam update) and replays them with
one call. What a replay needs, and how :class:`GraphedStep` provides it:

* fixed inputs: each batch is gathered into the same two buffers (``index_select(..., out=)``) before a replay;
* no host read inside the step (the ELBO stays a tensor, :mod:`pyroinv.inference.device_elbo`; the trainer's
  records of the loss, the batch NLL and the first non-finite step are written in place);
* the learning rate as a device tensor: inside the recorded step Adam reads each group's rate from a tensor
  (fused Adam takes one), and the cosine schedule's value is written into it before every replay;
* fresh random numbers at every replay: PyTorch's CUDA generator advances its Philox offset per replay;
* state that exists before recording: a few steps run eagerly first, on the stream the graph is recorded on
  (the warm-up PyTorch's documentation asks for);
* a batch of another size (the last of an epoch) runs eagerly, on the same parameters and Adam state.

The step replayed is the trainer's eager step. ``tests/inference/test_step_graph.py`` checks that on the CPU
with :class:`CallAgain`, a stand-in that replays by calling the step again on the same buffers and rates, and
on a GPU with a real graph. Where recording fails (an operation that cannot be recorded), the reason is kept in
:attr:`GraphedStep.failed` and the trainer goes on step by step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Protocol

import torch

from .. import settings

#: the environment variable that turns the graph off (``0``, ``off``, ``false`` or ``no``); on by default
ENV = "PYROINV_CUDA_GRAPH"
#: eager steps on the recording stream before the graph is recorded
WARMUP_STEPS = 3

#: one training step on the batch ``(x, y)``: forward, backward and optimiser step; returns
#: ``(loss, batch NLL)`` as tensors
Step = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def enabled_by_environment() -> bool:
    """The ``cuda_graph`` setting (:mod:`pyroinv.settings`): ``False`` where :data:`ENV` says ``0``/``off``/``false``/
    ``no`` or the setting was turned off, else ``True``."""
    return settings.get("cuda_graph")


class Recorder(Protocol):
    """Records a function's kernels once (without running them) and replays them."""

    def record(self, fn: Callable[[], None]) -> None: ...

    def replay(self) -> None: ...


class CudaGraph:
    """:class:`Recorder` on ``torch.cuda.graph``, recorded on ``stream`` (a side stream)."""

    def __init__(self, stream: torch.cuda.Stream | None) -> None:
        self.graph = torch.cuda.CUDAGraph()
        self.stream = stream

    def record(self, fn: Callable[[], None]) -> None:
        with torch.cuda.graph(self.graph, stream=self.stream):
            fn()

    def replay(self) -> None:
        self.graph.replay()


class CallAgain:
    """:class:`Recorder` without CUDA, for tests: recording keeps the function without running it (as a CUDA graph's
    recording runs no kernel) and a replay calls it again, on the same buffers and rate tensors."""

    def __init__(self, stream: object = None) -> None:
        self.fn: Callable[[], None] | None = None
        self.replays = 0

    def record(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def replay(self) -> None:
        assert self.fn is not None, "replay before record"
        self.fn()
        self.replays += 1


class GraphedStep:
    """A training step of batch size ``batch_size`` over fixed buffers, recorded once and replayed (module docstring).

    Args:
        step: the trainer's eager step, called as ``step(x, y)`` on the buffers.
        optimizer: the optimiser ``step`` steps (its groups' rates become tensors inside the recorded step).
        x_train, y_train: the training set on the device; batches are gathered from it by index.
        batch_size: the batch size the graph is recorded for.
        recorder: makes the :class:`Recorder` for a stream (default :class:`CudaGraph`).
        warmup: eager steps before recording.
    """

    def __init__(
        self,
        step: Step,
        optimizer: torch.optim.Optimizer,
        x_train: torch.Tensor,
        y_train: torch.Tensor,
        batch_size: int,
        recorder: Callable[[torch.cuda.Stream | None], Recorder] = CudaGraph,
        warmup: int = WARMUP_STEPS,
    ) -> None:
        self.step, self.optimizer = step, optimizer
        self.x_train, self.y_train = x_train, y_train
        self.batch_size = batch_size
        self.x = torch.empty((batch_size, *x_train.shape[1:]), dtype=x_train.dtype, device=x_train.device)
        self.y = torch.empty(batch_size, dtype=y_train.dtype, device=y_train.device)
        # float32: CUDA's fused Adam reads a tensor rate as a float
        self.rates = [
            torch.tensor(float(g["lr"]), dtype=torch.float32, device=x_train.device) for g in optimizer.param_groups
        ]
        self.new_recorder = recorder
        self.warmup_left = warmup
        self.recorder: Recorder | None = None
        self.outputs: tuple[torch.Tensor, torch.Tensor] | None = None
        #: why recording failed (one line), else ``None``; the trainer then steps eagerly
        self.failed: str | None = None
        #: the stream the warm-up steps run on and the graph is recorded on
        self.stream = torch.cuda.Stream(x_train.device) if x_train.is_cuda else None

    @property
    def recorded(self) -> bool:
        return self.recorder is not None

    def applies(self, idx: torch.Tensor) -> bool:
        """Whether the batch of these indices can be stepped here (its size is the recorded one, recording has not
        failed)."""
        return self.failed is None and idx.shape[0] == self.batch_size

    def __call__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Step on the batch ``idx``: eagerly during the warm-up, then by replaying the recorded step. Returns the
        step's ``(loss, batch NLL)`` (for a replay, the graph's own tensors, overwritten by the next replay), or
        ``None`` where recording has just failed (nothing was stepped: step eagerly instead)."""
        torch.index_select(self.x_train, 0, idx, out=self.x)
        torch.index_select(self.y_train, 0, idx, out=self.y)
        for rate, group in zip(self.rates, self.optimizer.param_groups):
            rate.fill_(group["lr"])
        if self.recorder is None:
            if self.warmup_left > 0:
                self.warmup_left -= 1
                with self._on_stream():
                    return self.step(self.x, self.y)
            if not self._record():
                return None
            assert self.recorder is not None  # _record set it
        self.recorder.replay()
        return self.outputs

    @contextlib.contextmanager
    def _on_stream(self) -> Iterator[None]:
        """Run the block on the recording stream (PyTorch's warm-up before recording), ordered after and before the
        current stream's work."""
        stream = self.stream
        if stream is None:
            yield
            return
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            yield
        torch.cuda.current_stream().wait_stream(stream)

    @contextlib.contextmanager
    def _tensor_rates(self) -> Iterator[None]:
        """Adam's groups read their rates from :attr:`rates` (and accept being recorded) inside the block; the
        numbers the schedule steps are put back after it."""
        groups = self.optimizer.param_groups
        saved = [(g["lr"], g.get("capturable", False)) for g in groups]
        try:
            for g, rate in zip(groups, self.rates):
                g["lr"] = rate
                if "capturable" in g and rate.is_cuda:
                    g["capturable"] = True
            yield
        finally:
            for g, (lr, capturable) in zip(groups, saved):
                g["lr"] = lr
                if "capturable" in g:
                    g["capturable"] = capturable

    def _body(self) -> None:
        """The recorded step: the eager step on the buffers, with tensor rates, its outputs copied into fixed
        tensors."""
        with self._tensor_rates():
            loss, nll = self.step(self.x, self.y)
        if self.outputs is None:
            self.outputs = (torch.empty_like(loss), torch.empty_like(nll))
        self.outputs[0].copy_(loss)
        self.outputs[1].copy_(nll)

    def _record(self) -> bool:
        """Record the step; on failure keep the reason in :attr:`failed` and return ``False``."""
        recorder = self.new_recorder(self.stream)
        self.optimizer.zero_grad(set_to_none=True)  # the recorded backward allocates the gradients in the graph's pool
        try:
            recorder.record(self._body)
        except Exception as err:  # noqa: BLE001 - any failure to record leaves the eager step, which is the same
            self.failed = " ".join(f"{type(err).__name__}: {err}".split())[:300]
            self.outputs = None
            if self.x.is_cuda:
                torch.cuda.synchronize()
            return False
        self.recorder = recorder
        return True
