"""``InvariantClassifier``: learn which invariance a network should have from its training data, for any body.

The model is the paper's (§3.6-3.7): a body ``g`` (the paper's one ReLU layer, or the user's ``nn.Module``) under
S transforms ``T_i ~ p_eta(T)``, their features averaged, and a Bayesian output layer ``W2 ~ N(0, alpha I)``,

    log f_hat(x)_y = log_softmax(W2 (1/S) sum_i [g(T_i x), 1])_y,

with ``eta`` learned jointly with ``g`` and ``q(W2)`` by maximising the ELBO

    E_q[sum_n log f_hat(x_n)_{y_n}] - KL(q(W2) || p(W2))  <=  log p(D | eta)

(``inference="vi"``), or by the Laplace evidence, MAP, maximum likelihood or Augerino's objective
(:mod:`pyroinv.model.methods`). The classifier holds the Pyro model and guide (:attr:`InvariantClassifier.model`,
:attr:`InvariantClassifier.guide`) for a user's own ``SVI`` and ``Predictive``; the command line's run folders
(:mod:`pyroinv.run.experiment`) are a layer above it.
"""

from __future__ import annotations

import os
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pyro
import torch
from pyro.nn import PyroModule

from ..config import Config
from ..data.splits import Split
from ..errors import ConfigError, one_line
from ..files import load_checkpoint, save_checkpoint
from ..inference.build import build_model, resolve_device
from ..inference.evaluate import classification_metrics, posterior_draws, predictive_log_probs, units_under_q
from ..inference.memory import check_fits
from ..inference.train import Trainer
from ..model import lie
from ..model.bnn import InvariantBNN
from ..model.body import BODY_PATHS
from ..model.scope import local_params
from .inputs import arrays, as_tensor, input_tensor, training_split
from .loop import FitCallbacks, train_loop

#: the format tag of :meth:`InvariantClassifier.save`'s files
FORMAT = "pyroinv.InvariantClassifier/1"
#: ``Config`` fields that describe the command line's data set, not a classifier: ``fit``'s data takes their place
DATA_FIELDS = ("dataset", "train_size", "test_size", "valid_size")


class CheckpointMismatch(ConfigError):
    """A checkpoint's tensors do not fit the classifier built from the settings (``detail`` says where)."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"the checkpoint does not fit this classifier's settings ({detail}); fit with the settings "
            f"it was made with, or start afresh"
        )
        self.detail = detail


class _Fitting(FitCallbacks):
    """The classifier's own callbacks: the records kept in memory, the checkpoint in one file (atomically), and
    those of the caller after them."""

    def __init__(
        self, history: list[dict[str, Any]], path: Path | None, header: dict[str, Any], then: FitCallbacks | None
    ) -> None:
        self.history, self.path, self.header, self.then = history, path, header, then

    def started(self, trainer: Trainer) -> None:
        if self.then is not None:
            self.then.started(trainer)

    def record(self, record: dict[str, Any]) -> None:
        self.history.append(record)
        if self.then is not None:
            self.then.record(record)

    def checkpoint(self, state: dict[str, Any]) -> None:
        if self.path is not None:
            save_checkpoint(self.path, {**self.header, "trainer": state})
        if self.then is not None:
            self.then.checkpoint(state)

    def should_stop(self) -> bool:
        return self.then is not None and self.then.should_stop()

    def kept(self, step: int) -> str:
        if self.then is not None:
            return self.then.kept(step)
        where = f" in {self.path}" if self.path is not None else " (none: pass checkpoint=PATH to keep one)"
        return f"the checkpoint of step {step} is kept{where}"


def _read_file(path: Path, what: str) -> dict[str, Any]:
    obj = load_checkpoint(path)
    if obj.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a {what} written by pyroinv.InvariantClassifier")
    return obj


class InvariantClassifier:
    """A classifier whose invariance ``eta`` is learned from the training data by the marginal likelihood.

    Args:
        body: an ``nn.Module`` from inputs ``(B, C, H, W)`` (or ``(B, 2)`` for 2-D points) to features ``(B, F)``;
            ``None`` is the paper's network, one ReLU layer of ``hidden`` units (``network="relu"`` and the other
            names of ``--network`` pick the package's own bodies).
        num_classes: K; ``None`` takes it from the training labels (``max + 1``).
        invariance: the generators ``eta`` may use: ``rotation``, ``translation``, ``scale``, ``affine``, ... or
            ``none`` (:data:`pyroinv.model.lie.PRESETS`); ``init_eta`` / ``fixed_eta`` in human units as on the
            command line.
        inference: ``vi`` (the paper's ELBO), ``laplace`` (with ``laplace_layers``), ``map``, ``ml`` or
            ``augerino``, as ``--inference``.
        samples: S, transforms per forward pass (paper: 32).
        transforms_on: for a ``body``: ``"weights"`` (on its leading ``nn.Flatten`` + ``nn.Linear``, the paper's
            exact path at input cost), ``"inputs"`` (every input resampled, then the body) or ``"auto"`` (weights
            where the body allows it). :mod:`pyroinv.model.body`.
        **settings: any other field of :class:`~pyroinv.config.Config` (``hidden``, ``lr``, ``epochs``,
            ``batch_size``, ``alpha``, ``seed``, ``device``, ...), with the paper's values as defaults.

    A body keeps its own initialisation and its own parametrisation (``w1_standardize`` applies to the package's
    networks only), and its weights' rate is warmed up as ``W1``'s (``w1_warmup``; ``0`` for none); the paper's
    network starts ``W1`` at ``w1_init_scale`` x Xavier (0.15), standardised per unit (``w1_standardize``).
    """

    def __init__(
        self,
        body: torch.nn.Module | None = None,
        num_classes: int | None = None,
        invariance: str = "rotation",
        inference: str = "vi",
        samples: int = 32,
        transforms_on: str = "auto",
        **settings: Any,
    ) -> None:
        known = {f.name for f in fields(Config)} - set(DATA_FIELDS)
        for name in settings:
            if name in DATA_FIELDS:
                raise ConfigError(
                    f"{name} is a setting of the command line's data sets; give fit the data you "
                    f"want it to train on instead"
                )
            if name not in known:
                raise ConfigError(
                    f"unknown setting {name!r}; InvariantClassifier takes the fields of pyroinv.Config "
                    f"({', '.join(sorted(known))})"
                )
        cfg = Config(invariance=invariance, inference=inference, samples=samples, **settings)
        self._setup(cfg.validate(), body, num_classes, transforms_on)

    @classmethod
    def from_config(
        cls,
        cfg: Config,
        body: torch.nn.Module | None = None,
        num_classes: int | None = None,
        transforms_on: str = "auto",
    ) -> InvariantClassifier:
        """The classifier of a whole :class:`~pyroinv.config.Config` (its data fields included, as the command line
        and the reproduction grids use it)."""
        clf = cls.__new__(cls)
        clf._setup(cfg.validate(), body, num_classes, transforms_on)
        return clf

    def _setup(self, cfg: Config, body: torch.nn.Module | None, num_classes: int | None, transforms_on: str) -> None:
        if body is not None and not isinstance(body, torch.nn.Module):
            raise ConfigError(
                f"body must be a torch.nn.Module from inputs to features (or None for the paper's "
                f"network), got {type(body).__name__}"
            )
        if transforms_on not in BODY_PATHS:
            raise ConfigError(f"transforms_on={transforms_on!r} is not one of {', '.join(BODY_PATHS)}")
        if body is not None and cfg.laplace_layers != "last":
            raise ConfigError(
                "laplace_layers='all' covers the package's own relu and mlp networks; with your own "
                "body use laplace_layers='last' (the evidence of W2)"
            )
        if num_classes is not None and (not isinstance(num_classes, int) or num_classes < 2):
            raise ConfigError(f"num_classes must be an integer of at least 2, got {num_classes!r}")
        self.config = cfg
        self.body = body
        self._body_class = type(body).__name__ if body is not None else None
        self.num_classes = num_classes
        self.transforms_on = transforms_on
        #: the metric records of the last fit (step, epoch, loss, ELBO/N estimate, NLL, eta, ...)
        self.history: list[dict[str, Any]] = []
        #: accuracy and NLL on ``fit``'s validation set, once fitted with one
        self.valid_metrics: dict[str, float] | None = None
        self.trainer: Trainer | None = None
        self.input_shape: tuple[int, ...] | None = None
        self._model: InvariantBNN | None = None
        self._guide: PyroModule | None = None
        self._device = torch.device("cpu")

    # ---- fitting ---------------------------------------------------------------------------------------------

    def fit(
        self,
        x: Any,
        y: Any = None,
        *,
        epochs: int | None = None,
        valid: Any = None,
        device: str | torch.device | None = None,
        checkpoint: str | os.PathLike | None = None,
        progress: bool | None = None,
        log_every: int = 10,
        checkpoint_every: int | None = None,
        max_steps: int | None = None,
        callbacks: FitCallbacks | None = None,
        resume_state: dict[str, Any] | None = None,
        cuda_graph: bool | None = None,
    ) -> InvariantClassifier:
        """Learn ``q(W2)`` (or a point ``W2``), the body and ``eta`` jointly on ``(x, y)``.

        Args:
            x, y: tensors or arrays (see :mod:`pyroinv.classifier.inputs`); or ``x`` a ``Dataset`` or ``DataLoader``
                of ``(input, label)`` pairs and no ``y``; or a :class:`~pyroinv.data.splits.Split`.
            epochs: passes over the data (default: the ``epochs`` setting, 30).
            valid: a validation set (a pair, a Dataset or a DataLoader): its accuracy and NLL under the posterior
                predictive go to :attr:`valid_metrics`.
            device: ``"cpu"``, ``"cuda"`` or ``"auto"`` (default: the ``device`` setting).
            checkpoint: a file to checkpoint to (every epoch, or ``checkpoint_every`` steps) and, when it holds a
                fit of the same settings and data shape, to resume from.
            progress: a tqdm bar (default: when stderr is a terminal).
            log_every: steps between metric records (:attr:`history`).
            max_steps: stop after this many steps of this call (resumable from ``checkpoint``).
            callbacks: what else to do with the records and checkpoints (the run folders' writer).
            resume_state: a trainer state to continue from (the run folders' checkpoint).
            cuda_graph: on a CUDA device, replay the step as a CUDA graph (:mod:`pyroinv.inference.step_graph`).

        Returns ``self``. Bad data or settings stop with a one-line :class:`~pyroinv.errors.PyroinvError` before
        anything is trained."""
        data = x if isinstance(x, Split) else training_split(x, y, valid, self.num_classes)
        cfg = self.config if epochs is None else replace(self.config, epochs=epochs).validate()
        dev = resolve_device(device or cfg.device)
        if self.body is None:  # a run that cannot fit stops with one line, not killed by the operating system
            check_fits(cfg, data.input_shape, data.num_classes, len(data.y_train), len(data.y_test), dev)
        path = Path(checkpoint) if checkpoint is not None else None
        header = {
            "format": FORMAT,
            "config": cfg.to_dict(),
            "input_shape": list(data.input_shape),
            "num_classes": data.num_classes,
            "num_data": len(data.y_train),
            "transforms_on": self.transforms_on,
        }
        if resume_state is None and path is not None and path.exists():
            saved = _read_file(path, "checkpoint")
            differ = sorted(k for k in header if k != "config" and saved.get(k) != header[k])
            differ += cfg.differences(saved["config"])
            if differ:
                raise ConfigError(
                    f"checkpoint {path} holds a fit with other settings or data ({', '.join(differ)}); "
                    f"delete it or pass another checkpoint path"
                )
            resume_state = saved["trainer"]
        self.trainer = trainer = Trainer(
            cfg, data, device=dev, cuda_graph=cuda_graph, body=self.body, transforms_on=self.transforms_on
        )
        self.config, self.input_shape, self._device = cfg, tuple(data.input_shape), dev
        self.num_classes = data.num_classes
        self._model, self._guide = trainer.model, trainer.guide
        if resume_state is not None:
            try:
                resume_state["model"].pop("features._input_shape", None)  # a buffer of folders written before meta.json
                trainer.load_state_dict(resume_state)
            except (KeyError, RuntimeError, ValueError, TypeError) as err:
                raise CheckpointMismatch(one_line(err, 160)) from None
        self.history = [r for r in self.history if r["step"] <= trainer.step] if resume_state is not None else []
        fitting = _Fitting(self.history, path, header, callbacks)
        fitting.started(trainer)
        finished = train_loop(
            trainer,
            fitting,
            log_every=log_every,
            checkpoint_every=checkpoint_every,
            max_steps=max_steps,
            progress=progress,
        )
        if finished and trainer.valid is not None and not isinstance(x, Split):  # a Split's caller evaluates its own
            self.valid_metrics = self.evaluate(*trainer.valid)
        return self

    @property
    def is_fitted(self) -> bool:
        """Whether the model exists (after :meth:`fit` or :meth:`load`)."""
        return self._model is not None

    def _require_fitted(self, what: str) -> None:
        if self._model is None:
            raise ConfigError(
                f"InvariantClassifier.{what} needs a fitted classifier (the model is built from the "
                f"data's shape); call fit(x, y) first, or InvariantClassifier.load(path)"
            )

    # ---- the fitted model --------------------------------------------------------------------------------------

    @property
    def model(self):
        """The Pyro model (:class:`~pyroinv.model.bnn.InvariantBNN`): ``model(x, y=None, num_data=None)``."""
        self._require_fitted("model")
        return self._model

    @property
    def guide(self):
        """The Pyro guide of ``W2`` (``q(W2)``, or a ``Delta`` for point methods); its :meth:`median` is the mean."""
        self._require_fitted("guide")
        return self._guide

    @property
    def invariance(self) -> dict[str, float]:
        """The learned (or fixed) ``eta`` of the active generators in human units, e.g. ``{"rotation_deg": 171.3}``
        (degrees, pixels, scale factors; :func:`pyroinv.model.lie.to_human`)."""
        self._require_fitted("invariance")
        assert self._model is not None
        inv = self._model.invariance
        human = lie.to_human(inv.eta, inv.image_size)
        return {k: v for i, (k, v) in enumerate(human.items()) if i in inv.active}

    def describe(self) -> str:
        """The learned invariance in words, e.g. ``rotation ±171.3°``."""
        self._require_fitted("describe")
        assert self._model is not None
        return self._model.invariance.describe()

    @torch.no_grad()
    def predict_log_proba(self, x: Any, draws: int | None = None) -> torch.Tensor:
        """``log p(y | x, D)`` of every class, ``(N, K)``: the posterior predictive, ``draws`` draws of ``W2``
        (default ``eval_draws``) times S transforms averaged in probability."""
        self._require_fitted("predict_log_proba")
        assert self.input_shape is not None  # set with the model
        return self._log_proba(input_tensor(x, self.input_shape, self._device), draws)

    @torch.no_grad()
    def _log_proba(self, xt: torch.Tensor, draws: int | None) -> torch.Tensor:
        assert self._model is not None  # the callers require a fitted classifier
        was_training = self._model.training
        self._model.eval()
        try:
            with local_params():
                W2 = posterior_draws(self._guide, draws or self.config.eval_draws)
                return predictive_log_probs(self._model, W2, xt).cpu()
        finally:
            self._model.train(was_training)

    def predict_proba(self, x: Any, draws: int | None = None) -> torch.Tensor:
        """``p(y | x, D)``, ``(N, K)`` (see :meth:`predict_log_proba`)."""
        return self.predict_log_proba(x, draws).exp()

    def predict(self, x: Any, draws: int | None = None) -> torch.Tensor:
        """The most probable class of every input, ``(N,)``."""
        return self.predict_log_proba(x, draws).argmax(-1)

    def evaluate(self, x: Any, y: Any = None, draws: int | None = None) -> dict[str, float]:
        """``accuracy`` and ``nll`` (per example) of the posterior predictive on labelled data."""
        xa, ya = arrays(x, y, "x")
        if ya is None:
            raise ConfigError("evaluate needs labels: evaluate(x, y), or a Dataset or DataLoader of pairs")
        self._require_fitted("evaluate")
        assert self.input_shape is not None  # set with the model
        log_probs = self._log_proba(as_tensor(xa, self.input_shape, self._device), draws)
        return classification_metrics(log_probs, torch.as_tensor(ya))

    @torch.no_grad()
    def hidden_units(self, x: Any, draws: int = 256) -> dict[str, float | None]:
        """How the last hidden layer is used on the inputs ``x`` (:func:`pyroinv.inference.evaluate.units_under_q`):
        ``inactive_units``, the share of the output layer's inputs that are zero on every input under every one of
        S transforms; ``units_for_99pct_power``, the share that carries 99% of the layer's mean squared activation;
        and where ``q(W2)`` puts the output weights of the live and of the dead units, as root mean squares of their
        means and sds over ``draws`` draws, in units of the prior's ``sqrt(alpha)`` (a unit the bound has switched off
        keeps q at the prior: mean 0, sd 1)."""
        self._require_fitted("hidden_units")
        assert self._model is not None and self.input_shape is not None  # set with the model
        xt = input_tensor(x, self.input_shape, self._device)
        was_training = self._model.training
        self._model.eval()
        try:
            with local_params():
                return units_under_q(self._model, self._guide, xt, draws)
        finally:
            self._model.train(was_training)

    def to_inference_data(self, x_test: Any = None, y_test: Any = None, draws: int | None = None):
        """ArviZ ``InferenceData`` as the command line's ``posterior.nc``: ``W2`` draws (per-class norms),
        the training set's pointwise log-likelihood (``az.loo``) and, given ``(x_test, y_test)``, the test set's
        predictions; ``eta`` in ``constant_data``. The training data are those of the last :meth:`fit`."""
        from ..inference.arviz_export import export_data

        self._require_fitted("to_inference_data")
        assert self.input_shape is not None  # set with the model
        if self.trainer is None:
            raise ConfigError(
                "to_inference_data reads the training data of fit; a loaded classifier has none, call fit first"
            )
        x_train, y_train = self.trainer.x_train, self.trainer.y_train
        if x_test is None:
            x, y = x_train[:100], y_train[:100]
        else:
            xa, ya = arrays(x_test, y_test, "x_test")
            if ya is None:
                raise ConfigError("to_inference_data needs the test labels with x_test")
            x, y = as_tensor(xa, self.input_shape, self._device), torch.as_tensor(ya, device=self._device)
        with local_params(), torch.no_grad():
            return export_data(
                self._model,
                self._guide,
                x_train,
                y_train,
                x,
                y,
                draws or self.config.export_draws,
                seed=self.config.seed,
            )

    # ---- saving --------------------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the fitted classifier (settings, model and guide) to ``path``; the body's architecture is not saved:
        :meth:`load` takes it again."""
        self._require_fitted("save")
        assert self._model is not None and self._guide is not None and self.input_shape is not None
        save_checkpoint(
            Path(path),
            {
                "format": FORMAT,
                "config": self.config.to_dict(),
                "input_shape": list(self.input_shape),
                "num_classes": self.num_classes,
                "transforms_on": self.transforms_on,
                "body": self._body_class,
                "model": self._model.state_dict(),
                "guide": self._guide.state_dict(),
                "history": self.history,
            },
        )

    @classmethod
    def load(
        cls, path: str | os.PathLike, body: torch.nn.Module | None = None, device: str = "cpu"
    ) -> InvariantClassifier:
        """A classifier written by :meth:`save`; ``body``: a module of the same architecture as the saved one's (its
        weights are replaced by the saved ones)."""
        saved = _read_file(Path(path), "saved classifier")
        if saved["body"] is not None and body is None:
            raise ConfigError(
                f"{path} was fitted with your own body ({saved['body']}); pass body= a new instance of "
                f"the same architecture"
            )
        if saved["body"] is None and body is not None:
            raise ConfigError(
                f"{path} was fitted with the package's {saved['config']['network']} network; load it without body="
            )
        cfg = Config.from_dict(saved["config"])
        clf = cls.from_config(cfg, body, saved["num_classes"], saved["transforms_on"])
        clf.input_shape = tuple(saved["input_shape"])
        clf._device = resolve_device(device)
        pyro.set_rng_seed(cfg.seed)
        assert clf.num_classes is not None  # the saved one
        model, guide = build_model(cfg, clf.input_shape, clf.num_classes, body, clf.transforms_on, clf._device)
        try:
            model.load_state_dict(saved["model"])
            guide.load_state_dict(saved["guide"])
        except RuntimeError as err:
            raise ConfigError(
                f"the body does not match the one saved in {path} ({one_line(err, 160)}); pass a module "
                f"of the same architecture"
            ) from None
        clf._model, clf._guide = model.to(clf._device), guide.to(clf._device)
        clf.history = list(saved.get("history", []))
        return clf

    def __repr__(self) -> str:
        body = self._body_class or f"the package's {self.config.network}"
        state = f"learned {self.describe()}" if self.is_fitted else "not fitted"
        return (
            f"InvariantClassifier(body={body}, invariance={self.config.invariance!r}, "
            f"inference={self.config.inference!r}, samples={self.config.samples}; {state})"
        )


__all__ = ["CheckpointMismatch", "DATA_FIELDS", "FORMAT", "InvariantClassifier"]
