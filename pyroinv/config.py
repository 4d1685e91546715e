"""Run configuration, with the paper's hyper-parameters as defaults (§4)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .errors import ConfigError
from .model import lie
from .model.bnn import AVERAGES
from .model.estimators import ELBOS, ESTIMATORS
from .model.invariance import CONSTRAINTS
from .model.lie import SAMPLINGS
from .model.methods import METHODS
from .model.objectives import LAPLACE
from .model.precision import PRECISIONS
from .model.registry import CNN_ACTIVATIONS, CNN_CHANNELS, NETWORKS

DEVICES = ("auto", "cpu", "cuda")
#: what the Laplace evidence of ``--inference laplace`` covers: the output layer, or every fully connected layer
LAPLACE_LAYERS = ("last", "all")
#: q's family (``Config.guide``): the paper's per-class Cholesky guide, or one of Pyro's AutoGuides
GUIDES = ("cholesky", "autonormal", "autolowrank")
#: settings that one network alone reads -> that network (another value than the default elsewhere is refused)
NETWORK_FIELDS = {"depth": "mlp", "channels": "cnn", "activation": "cnn"}
#: the networks whose first layer ``--w1-standardize`` can standardise (a fully connected layer over the pixels)
STANDARDIZED_NETWORKS = ("relu", "mlp")
#: the warm-up of the network's own weights' rate where ``--w1-warmup`` is unset (one epoch of the paper's
#: 60,000 images at batch 128), at most an eighth of the run
W1_WARMUP_STEPS = 470
#: settings whose default changed after they were added: a ``config.json`` written without them ran with these
#: values (:meth:`Config.from_dict`)
VALUES_BEFORE_ADDED: dict[str, Any] = {"w1_warmup": 0, "w1_standardize": False}


#: the kinds of setting, each checked one way (:meth:`Config.validate`) and parsed one way (the command line)
KINDS = ("choice", "pos_int", "count", "int", "pos_float", "nonneg_float", "float", "bool", "str")


def setting(
    default: Any,
    help: str,
    kind: str | None = None,
    *,
    choices: tuple[str, ...] | None = None,
    nargs: int | str | None = None,
    metavar: tuple[str, ...] | None = None,
    unit: str | None = None,
) -> Any:
    """A :class:`Config` field with what the command line and :meth:`Config.validate` read off it: its ``help``,
    its ``kind`` (:data:`KINDS`; ``choice`` with ``choices``), ``nargs`` / ``metavar`` for several values, the
    ``unit`` of a count. One owner for each flag's text and each value's rule."""
    kind = kind or ("choice" if choices is not None else "str")
    if kind not in KINDS or (kind == "choice") != (choices is not None):
        raise ValueError(f"setting kind {kind!r} with choices {choices!r}")
    meta = {"help": help, "kind": kind, "choices": choices, "nargs": nargs, "metavar": metavar, "unit": unit}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def flag(name: str) -> str:
    """The command-line flag of a setting: ``batch_size`` -> ``--batch-size``."""
    return "--" + name.replace("_", "-")


_WORDS = {2: "two", 3: "three"}
_NOUNS = {
    "pos_int": "positive integers",
    "count": "whole numbers",
    "int": "integers",
    "pos_float": "positive numbers",
    "nonneg_float": "non-negative numbers",
    "float": "numbers",
    "choice": "choices",
    "bool": "booleans",
    "str": "strings",
}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_value(name: str, value: Any, meta: Any) -> None:
    """One setting's own rule, by its kind (a one-line :class:`ConfigError` naming the flag). ``None`` passes where the
    default is ``None`` (an optional setting); a setting of several values (``nargs``) checks each."""
    kind, where = meta.get("kind", "str"), flag(name)
    if value is None and name in _OPTIONAL:
        return
    nargs = meta.get("nargs")
    if isinstance(nargs, int):  # a fixed number of values
        try:
            if not (isinstance(value, (list, tuple)) and len(value) == nargs):
                raise ConfigError("")
            for v in value:
                check_value(name, v, {**meta, "nargs": None})
        except ConfigError:
            raise ConfigError(
                f"{where} takes {_WORDS.get(nargs, nargs)} {_NOUNS[kind]} ({meta['help']}), got {value!r}"
            ) from None
        return
    if nargs is not None and isinstance(value, (list, tuple)):
        for v in value:
            check_value(name, v, {**meta, "nargs": None})
        return
    if kind == "choice" and value not in meta["choices"]:
        raise ConfigError(f"{where} {value!r} is not one of {', '.join(meta['choices'])}")
    if kind == "pos_int" and not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        raise ConfigError(f"{where} must be a positive integer, got {value!r}")
    if kind == "count" and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        raise ConfigError(f"{where} must be a non-negative whole number of {meta['unit']}, got {value!r}")
    if kind == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
        raise ConfigError(f"{where} must be an integer, got {value!r}")
    if kind == "pos_float" and not (_number(value) and value > 0):
        raise ConfigError(f"{where} must be a positive finite number, got {value!r}")
    if kind == "nonneg_float" and not (_number(value) and value >= 0):
        raise ConfigError(f"{where} must be a non-negative number, got {value!r}")
    if kind == "float" and not _number(value):
        raise ConfigError(f"{where} must be finite numbers, got {value!r}")
    if kind == "bool" and not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {value!r}")


@dataclass
class Config:
    """Everything that defines a run. Defaults are the paper's settings where it states them (§4: H = 1024,
    S = 32, batch 128, Adam 1e-3 cosine-annealed to 0, mu = 0, L = I, alpha = 1, sigma = 0.3), and otherwise
    chosen by measurement (docs/results/deviations.md):

    * ``estimator="local"``: the expected log-likelihood with a fresh ``W2`` draw per example, an unbiased
      estimate of the same ELBO as the paper's one draw per batch (``"shared"``) with 6-60x less gradient
      variance (:mod:`pyroinv.model.estimators`); ``average="logits"``: Appendix A's reading, the logits averaged
      over the transforms inside the softmax (better bound, accuracy and invariance than averaging
      probabilities, eq. (f-estimate) of the main text, on the cpu protocol at three seeds).
    * ``mean_lr = eta_lr = 0.05``: Adam's rate for ``mu`` (or the point ``W2``) and for ``eta``, a deviation
      from the paper's single rate. Adam moves a parameter by about its rate per step whatever its
      gradient, so at 1e-3 ``mu`` cannot grow to the norm a good fit with ``L = I`` needs before ``q``
      shrinks instead (the collapse that prefers little invariance), and ``eta`` is overtaken by ``W1``
      learning orientation-specific filters. ``None`` gives ``lr`` (the paper's single rate).
    * ``eta_constraint="tanh"``: rotation bounded to ±180° (Appendix E's option; at the faster rate an
      unbounded ``eta_rot`` passes 180° and covers the circle twice).
    * ``w1_init_scale=0.15``: ``W1`` started at 0.15 x Xavier, so that ``||phi|| ~ 1`` and q's noise at
      ``L = I`` is about one nat of logit rather than seven.
    * ``w1_lr=None``: the network's own weights (``W1``, a deeper network's hidden layers, a user's body) at
      ``lr``, as in the paper. A value steps them at their own rate: with ``W1 = c W'`` (``W'`` Xavier) Adam at
      rate ``r`` on ``W1`` is Adam at ``r / c`` on ``W'`` with a fixed factor ``c`` on the features.
    * ``w1_standardize=None`` and ``w1_warmup=None`` (unset), two deviations chosen together by measurement
      (docs/results/deviations.md, "When the units die"). ``w1_standardize`` learns each unit's first-layer weights
      as a centred, unit-rms ``V_h`` times a learned gain ``g_h``, ``W1_h = g_h (V_h - mean V_h) / rms`` (weight
      standardisation, Qiao et al., 2019; :class:`pyroinv.model.networks.InvariantFeatures`), started at the same
      ``W1``, centred; unset, it is on wherever it applies (:meth:`standardizes_w1`). ``w1_warmup = n`` multiplies the
      rate of the network's own weights by ``min(1, (t + 1) / n)`` at step ``t``; unset, ``n`` is
      :data:`W1_WARMUP_STEPS` (470) or an eighth of the run, whichever is fewer (:meth:`w1_warmup_steps`). While
      ``mu = 0``, q's noise on the logits is all the signal ``W1`` gets, and Adam, stepping each weight by about its
      rate whatever its gradient, pushes the small start's weights below zero on every image within ten steps, where
      half of the units stay off. Together, on the cpu protocol at three seeds, they raise the bound by 0.041-0.046
      nats per image and the validation accuracy by 0.4-0.8 points, with 12-13% of the units off against 52-60%;
      at the paper's sizes (10 epochs, three seeds) the bound by about 0.02 nats. ``False`` and ``0`` are the
      paper's (and the kept cells', :data:`pyroinv.reproduce.grids.KEPT_RECIPE`); ``True`` asks for
      standardisation where it may not apply, which is then an error.
    * ``eta_warmup=0``: ``eta`` learns from the first step, as in the paper. A positive value holds ``eta`` at
      its start for that many epochs while the network fits, then lets it learn (a probe of Figure 6: what
      each objective prefers once the fit no longer needs the transient help of averaged random features; LILA's
      burn-in). With ``min_steps`` the epochs are those of the lengthened run.
    * ``jacobian=False``: the weight images are warped as in the paper, without the ``|det A|`` factor that
      would make the averaged features exactly invariant to input scaling (:func:`pyroinv.model.warp.jacobian`).
    * ``network="relu"`` is the paper's single hidden layer; ``mlp`` stacks ``depth`` such layers and ``cnn`` is a
      small convolutional network with ``channels`` in its two convolutions and ``activation`` units
      (``relu``, or ``tanh`` as in LILA's LeNet; :mod:`pyroinv.model.registry`), beyond the paper.
    * ``laplace_layers="last"``: ``--inference laplace`` learns ``eta`` on the Laplace evidence of ``W2``, the layer
      the paper treats as random; ``"all"`` covers every fully connected layer with learned prior precisions, LILA's
      scope (:mod:`pyroinv.inference.laplace_layers`).
    * ``valid_size=None``: no validation set, as in the paper. A positive value holds that many class-balanced
      images out of the training set first (the training subset is drawn from the rest) and reports the
      predictive's accuracy and NLL on them, so settings can be chosen without the test set.
    * ``min_steps=0``: a run lasts ``epochs`` passes, as in the paper; a positive value lengthens a run on a small
      training set to at least that many steps (whole epochs), e.g. for the data-efficiency grid.
    * ``epochs=30``: not stated in the paper. At its sizes on fully rotated MNIST the bound per image is -0.153
      after 10 epochs and -0.097 after 30 (the paper's: -0.07), and on a held-out validation set three times the
      epochs score higher (cpu protocol: 96.70% against 95.55%); the kept cells of the ``paper`` protocol are
      10-epoch runs (docs/results/deviations.md, "Where the bound goes").
    * ``init_eta=None``: near no invariance (:data:`pyroinv.model.lie.SMALL_START`: ±5° for rotation), not stated
      in the paper.

    ``init_eta`` / ``fixed_eta`` are in human units: degrees for rotation, pixels for
    translation, log-scale for scale and shear (for ``affine``, each generator in its unit).
    ``init_eta`` may also list one value per active generator, in the order of
    :data:`pyroinv.model.lie.GENERATOR_NAMES` (e.g. affine: x px, y px, degrees, log-scale x, y, shear).
    ``guide_init_scale`` is the initial diagonal of the guide's Cholesky factors (paper: 1,
    i.e. ``L = I``). ``guide`` is q's family for ``inference="vi"``: ``cholesky`` (the paper's per-class full
    covariance), or Pyro's ``autonormal`` (mean-field) or ``autolowrank`` (one low-rank-plus-diagonal Gaussian
    over all of ``W2``), :mod:`pyroinv.model.autoguides`; these need ``elbo="trace"``.
    ``inference="augerino"`` is the Augerino-style baseline (Benton et al., 2020): the transforms act
    on the *inputs*, W2 is a point estimate, and the loss is ``CE - width_weight * ||eta||_2``.
    """

    dataset: str = setting(
        "mnist-rot",
        "mnist, mnist-rot (fully rotated), mnist-rot90 (partially), mnist-trans, "
        "mnist-scale, mnist-rot-trans, mnist-rot-scale, mnist-trans-scale, the same for cifar10-*, "
        "or a path to an .npz",
    )
    invariance: str = setting(
        "rotation",
        "which generators eta may use: rotation (eta3), translation (eta1, eta2), "
        "scale (eta4, eta5), affine (all six), isotropic-scale (eta4 = eta5, one draw for x and "
        "y), similarity (translation, rotation, isotropic scale) or none",
        choices=tuple(lie.PRESETS),
    )
    network: str = setting(
        "relu", "; ".join(f"{n.name}: {n.summary}" for n in NETWORKS.values()), choices=tuple(NETWORKS)
    )
    inference: str = setting(
        "vi", "; ".join(f"{m.name}: {m.summary}" for m in METHODS.values()), choices=tuple(METHODS)
    )
    elbo: str = setting("trace", "Trace_ELBO (sampled KL) or the closed-form KL (TraceMeanField_ELBO)", choices=ELBOS)
    estimator: str = setting(
        "local",
        "vi only: estimate the expected log-likelihood with a W2 draw per example "
        "(local) or one per batch (shared, the paper's L = 1); both are unbiased for the same "
        "ELBO, local has far less gradient noise",
        choices=ESTIMATORS,
    )
    average: str = setting(
        "logits",
        "average the S transforms' probabilities (probs, eq. f-estimate) or their logits "
        "inside the softmax (logits, Appendix A)",
        choices=AVERAGES,
    )
    hidden: int = setting(1024, "hidden units H (of each layer)", "pos_int")
    depth: int = setting(3, "--network mlp only: hidden layers (at least 2)", "pos_int")
    channels: list[int] = setting(
        list(CNN_CHANNELS),
        "--network cnn only: channels of its two convolutions",
        "pos_int",
        nargs=2,
        metavar=("C1", "C2"),
    )
    activation: str = setting(
        "relu",
        "--network cnn only: its units, relu or tanh (LILA's LeNet has tanh units)",
        choices=tuple(CNN_ACTIVATIONS),
    )
    samples: int = setting(32, "transforms S per forward pass", "pos_int")
    sampling: str = setting("stochastic", "eps ~ U[-1,1]^k or a linspace grid", choices=SAMPLINGS)
    init_eta: float | list[float] | None = setting(
        None,
        "initial eta (default: near none, ±0.5 px, ±5°, ×exp(±0.05), shear 0.05): degrees (rotation), pixels "
        "(translation), log-scale (scale, shear); one value for every generator, or one per generator in the order "
        "x px, y px, degrees, log-scale x, log-scale y, shear (e.g. affine: 0.5 0.5 5 0.05 0.05 0.05)",
        "float",
        nargs="+",
    )
    fixed_eta: float | None = setting(None, "hold eta fixed at this value (same units); not learned", "float")
    eta_constraint: str = setting("tanh", "optional constraint on eta (Appendix E)", choices=CONSTRAINTS)
    epochs: int = setting(30, "passes over the training set", "pos_int")
    min_steps: int = setting(
        0,
        "train for at least this many steps (whole epochs): more passes over a small training set",
        "count",
        unit="steps",
    )
    batch_size: int = setting(128, "minibatch size M", "pos_int")
    lr: float = setting(1e-3, "Adam learning rate, cosine-annealed to 0", "pos_float")
    alpha: float = setting(1.0, "prior variance of W2", "pos_float")
    guide_init_scale: float = setting(1.0, "initial diagonal of the Cholesky factors of q (paper: 1)", "pos_float")
    guide: str = setting(
        "cholesky",
        "vi only: q(W2) per class with a full Cholesky factor (cholesky, the paper's), "
        "or Pyro's AutoNormal (autonormal, mean-field) or AutoLowRankMultivariateNormal "
        "(autolowrank)",
        choices=GUIDES,
    )
    w1_init_scale: float = setting(
        0.15, "ReLU only: factor on the Xavier-uniform initial W1 (paper: Xavier, 1)", "pos_float"
    )
    mean_lr: float | None = setting(
        0.05,
        "Adam learning rate of the output layer's mean (mu of q, or the point W2), "
        "cosine-annealed with the rest; the paper uses --lr for every parameter (pass "
        "the same value for that)",
        "pos_float",
    )
    eta_lr: float | None = setting(
        0.05,
        "Adam learning rate of the invariance parameters eta, cosine-annealed with "
        "the rest; the paper uses --lr for every parameter (pass the same value for "
        "that)",
        "pos_float",
    )
    w1_lr: float | None = setting(
        None,
        "Adam learning rate of the network's own weights (W1, and every hidden layer "
        "or your own body's), cosine-annealed with the rest; unset: --lr, the paper's "
        "single rate",
        "pos_float",
    )
    w1_standardize: bool | None = setting(
        None,
        "learn the first layer's weights standardised per unit, W1_h = g_h (V_h - mean) / rms, with a learned gain "
        "g_h (weight standardisation; the paper does not); unset: on where it applies (relu and mlp on images, "
        "not --laplace-layers all nor your own body), --no-w1-standardize: off, the paper",
        "bool",
    )
    w1_warmup: int | None = setting(
        None,
        "steps over which the Adam rate of the network's own weights rises linearly from 0 to its value, "
        f"under the cosine schedule; unset: {W1_WARMUP_STEPS} steps or an eighth of the run, whichever is "
        "fewer (0: none, the paper)",
        "count",
        unit="steps",
    )
    eta_warmup: int = setting(
        0,
        "epochs during which eta is held at its start while the network fits, before it "
        "learns (0: from the first step, the paper)",
        "count",
        unit="epochs",
    )
    laplace_layers: str = setting(
        "last",
        "--inference laplace only: the Laplace evidence of the output layer W2 "
        "(last), or of every fully connected layer with learned prior precisions (all, "
        "LILA's scope; relu and mlp)",
        choices=LAPLACE_LAYERS,
    )
    blur_sigma: float = setting(0.1, "Gaussian blur of weight images (pixels)", "nonneg_float")
    jacobian: bool = setting(
        False,
        "multiply each warped weight image by |det| of its transform, so the averaged "
        "features are invariant to input scaling too (changes scale only; the paper does not)",
        "bool",
    )
    rff_sigma: float = setting(0.3, "RFF frequency scale (lengthscale 1/sigma)", "pos_float")
    rff_lengthscale: float | None = setting(None, "RFF lengthscale (overrides --rff-sigma)", "pos_float")
    train_size: int | None = setting(None, "class-balanced subset of the training set", "pos_int")
    test_size: int | None = setting(None, "class-balanced subset of the test set", "pos_int")
    valid_size: int | None = setting(
        None,
        "hold this many class-balanced training images out as a validation set "
        "(reported in results.json), to choose settings without the test set",
        "pos_int",
    )
    width_weight: float = setting(
        0.01, "--inference augerino only: weight of the reward on the augmentation width ||eta||_2", "nonneg_float"
    )
    eval_draws: int = setting(8, "W2 draws for the posterior predictive", "pos_int")
    export_draws: int = setting(
        200,
        "W2 draws in posterior.nc (the training set's pointwise log-likelihood for az.loo, the test set's predictions)",
        "pos_int",
    )
    seed: int = setting(0, "random seed (data subset, initialisation, sampling)", "int")
    precision: str = setting(
        "fp32",
        "the network's large products and the guide's draw of W2 in float32, or in bfloat16 with float32 "
        "accumulation (bf16; everything else stays float32); auto: bf16 where the processor or "
        "card has native bfloat16 products",
        choices=PRECISIONS,
    )
    device: str = setting("auto", "auto picks CUDA when available", choices=DEVICES)

    def validate(self) -> Config:
        """Raise :class:`ConfigError` (one line) for any value out of range: each field by its kind
        (:func:`setting`), then the rules that tie fields together."""
        for f in fields(self):
            check_value(f.name, getattr(self, f.name), f.metadata)
        if self.min_steps == 0 and self.eta_warmup >= self.epochs:  # with --min-steps the Trainer checks the length
            raise ConfigError(
                f"--eta-warmup must be a whole number of epochs in [0, --epochs {self.epochs}), got {self.eta_warmup!r}"
            )
        self.channels = [int(c) for c in self.channels]  # as config.json holds it, so a resumed run compares equal
        for name, net in NETWORK_FIELDS.items():
            if getattr(self, name) != getattr(_DEFAULTS, name) and self.network != net:
                raise ConfigError(
                    f"--{name} applies to --network {net} only, not {self.network}; drop it or add --network {net}"
                )
        if self.width_weight != _DEFAULTS.width_weight and not METHODS[self.inference].width_reward:
            raise ConfigError(
                f"--width-weight applies to --inference augerino only, not {self.inference}; drop it or "
                f"add --inference augerino"
            )
        if self.network == "mlp" and self.depth < 2:
            raise ConfigError(
                f"--depth {self.depth}: --network mlp has at least 2 hidden layers (--network relu is "
                f"the paper's single one)"
            )
        if METHODS[self.inference].eta_objective is not None and self.average != "logits":
            raise ConfigError(
                f"--inference {self.inference} needs --average logits: its curvature is that of W2 on the "
                f"features averaged over the transforms (Appendix A's reading)"
            )
        if self.laplace_layers != "last" and METHODS[self.inference].eta_objective is not LAPLACE:
            raise ConfigError(
                f"--laplace-layers {self.laplace_layers} applies to --inference laplace, not "
                f"{self.inference}; drop it or add --inference laplace"
            )
        if self.laplace_layers == "all" and not NETWORKS[self.network].layer_laplace:
            raise ConfigError(
                f"--laplace-layers all covers fully connected ReLU layers (--network "
                f"{', '.join(n for n, net in NETWORKS.items() if net.layer_laplace)}), not --network "
                f"{self.network}; use --laplace-layers last"
            )
        if self.w1_standardize and self.network not in STANDARDIZED_NETWORKS:
            raise ConfigError(
                f"--w1-standardize applies to the first layer of --network {' or '.join(STANDARDIZED_NETWORKS)}, "
                f"not {self.network}; drop it"
            )
        if self.w1_standardize and self.laplace_layers == "all":
            raise ConfigError(
                "--laplace-layers all puts its Gaussian on W1 itself, not on a standardised W1; drop "
                "--w1-standardize or use --laplace-layers last"
            )
        if self.guide != "cholesky" and self.elbo != "trace":
            raise ConfigError(
                f"--guide {self.guide} has no closed-form KL to the prior in Pyro; use --elbo trace, or "
                f"--guide cholesky with --elbo {self.elbo}"
            )
        if isinstance(self.init_eta, (list, tuple)):
            active = lie.PRESETS[self.invariance]
            if len(self.init_eta) != len(active):
                raise ConfigError(
                    f"--init-eta has {len(self.init_eta)} values but --invariance {self.invariance} has "
                    f"{len(active)} generators; give one value, or one per generator"
                )
        return self

    def eta_human(self) -> list[float]:
        """The initial (or fixed) eta of each active generator, in human units."""
        value = self.fixed_eta if self.fixed_eta is not None else self.init_eta
        if value is None:  # near, not at, no invariance
            return [lie.SMALL_START[k] for k in lie.PRESETS[self.invariance]]
        if isinstance(value, (list, tuple)):
            return [float(v) for v in value]
        return [float(value)] * len(lie.PRESETS[self.invariance])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def differences(self, saved: dict[str, Any]) -> list[str]:
        """Names of the settings in which a saved ``config.json`` differs from this one.

        Keys added to :class:`Config` since ``saved`` was written take the values that ran then (:meth:`from_dict`).
        """
        theirs, ours = Config.from_dict(saved).to_dict(), self.to_dict()
        return sorted(k for k in ours if theirs[k] != ours[k])

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Config:
        """The configuration a saved ``config.json`` describes. A setting added since it was written takes the value
        that ran then: its default, or for a setting whose default has changed since, :data:`VALUES_BEFORE_ADDED`."""
        if not isinstance(d, dict):
            raise ConfigError(f"a configuration must be a mapping of settings, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown configuration keys {sorted(unknown)}")
        return cls(**{**{k: v for k, v in VALUES_BEFORE_ADDED.items() if k not in d}, **d})

    def standardizes_w1(self, images: bool = True, own_body: bool = False) -> bool:
        """Whether the first layer is learned standardised: ``w1_standardize``, or where it is unset, wherever it
        applies (a network of :data:`STANDARDIZED_NETWORKS` on images, not ``laplace_layers="all"``, not a user's
        own body)."""
        if self.w1_standardize is not None:
            return self.w1_standardize
        return images and not own_body and self.network in STANDARDIZED_NETWORKS and self.laplace_layers != "all"

    def w1_warmup_steps(self, total_steps: int) -> int:
        """The steps of the warm-up of the network's own weights' rate in a run of ``total_steps``: ``w1_warmup``,
        or where it is unset :data:`W1_WARMUP_STEPS` or an eighth of the run, whichever is fewer."""
        if self.w1_warmup is not None:
            return self.w1_warmup
        return min(W1_WARMUP_STEPS, math.ceil(total_steps / 8))


_DEFAULTS = Config()
#: the settings whose default is ``None`` (optional: ``None`` is valid)
_OPTIONAL = {f.name for f in fields(Config) if f.default is None}
