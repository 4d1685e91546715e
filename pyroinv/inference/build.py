"""Build the Pyro model, guide and ELBO of a :class:`~pyroinv.config.Config`."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pyro.infer
import torch
from pyro.nn import PyroModule

from ..config import Config
from ..errors import ConfigError
from ..model import kernels, lie
from ..model.bnn import InvariantBNN
from ..model.body import BodyFeatures
from ..model.estimators import ELBOS
from ..model.guides import ClassCholeskyGuide
from ..model.invariance import Invariance
from ..model.methods import method
from ..model.precision import resolve_precision, set_product_dtype
from ..model.registry import FeatureSettings, build_features
from ..model.scope import local_params
from .device_elbo import DeviceTrace_ELBO


def initial_eta(cfg: Config, image_size: int | None) -> list[float]:
    """Raw initial ``eta`` of the active generators from the human-unit ``init_eta``/``fixed_eta``."""
    return [lie.from_human(k, v, image_size) for k, v in zip(lie.PRESETS[cfg.invariance], cfg.eta_human())]


def check_inputs(cfg: Config, input_shape: tuple[int, ...]) -> None:
    """Refuse data the configuration cannot treat faithfully (one-line :class:`ConfigError`).

    The transforms act in PyTorch's normalised coordinates, which are pixel-true only for square images:
    on an ``H x W`` grid with ``H != W`` a "rotation" would also stretch the image and a translation's
    pixels would differ per axis.
    """
    if len(input_shape) == 3 and input_shape[1] != input_shape[2] and cfg.invariance != "none":
        raise ConfigError(
            f"--invariance {cfg.invariance} needs square images but these are {input_shape[1]} x "
            f"{input_shape[2]} pixels (in normalised coordinates a rotation of a non-square grid is also "
            f"a stretch); pad them to square, e.g. with numpy.pad, or use --invariance none"
        )


def build_model(
    cfg: Config,
    input_shape: tuple[int, ...],
    num_classes: int,
    body: torch.nn.Module | None = None,
    transforms_on: str = "auto",
    device: torch.device | str = "cpu",
) -> tuple[InvariantBNN, PyroModule]:
    """Model and guide for ``cfg`` (call after seeding: ``W1`` and RFF draws use the torch RNG).

    The method (:mod:`pyroinv.model.methods`) picks the prior, the guide and where the transforms act; the
    network (:mod:`pyroinv.model.registry`) the feature map, or, given a ``body`` (a user's ``nn.Module`` from inputs
    to features), :class:`~pyroinv.model.body.BodyFeatures` on it, the transforms on its first layer's weights or
    on its inputs (``transforms_on``; an input-space method such as Augerino always on the inputs)."""
    m = method(cfg.inference)
    image_size = input_shape[-1] if len(input_shape) == 3 else None
    check_inputs(cfg, input_shape)
    if cfg.sampling == "deterministic":
        lie.deterministic_eps(cfg.samples, lie.PRESETS[cfg.invariance])  # fail early if the grid is too large
    try:
        invariance = Invariance(
            cfg.invariance,
            init=initial_eta(cfg, image_size),
            learn=cfg.fixed_eta is None,
            constraint=cfg.eta_constraint,
            image_size=image_size,
        )
    except ConfigError as err:  # the module's own words, said of the flags that set it
        raise ConfigError(
            f"--init-eta {cfg.eta_human()} with --eta-constraint {cfg.eta_constraint}: {err} (init in "
            f"raw units: radians, normalised units, log-scale)"
        ) from None
    settings = FeatureSettings(
        hidden=cfg.hidden,
        depth=cfg.depth,
        channels=cast("tuple[int, int]", tuple(cfg.channels)),  # --channels takes two
        activation=cfg.activation,
        blur_sigma=cfg.blur_sigma,
        rff_sigma=cfg.rff_sigma,
        rff_lengthscale=cfg.rff_lengthscale,
        init_scale=cfg.w1_init_scale,
        jacobian=cfg.jacobian,
        standardize=cfg.standardizes_w1(images=image_size is not None, own_body=body is not None),
    )
    if body is not None and cfg.w1_standardize:
        raise ConfigError("--w1-standardize applies to the package's relu and mlp networks, not your own body; drop it")
    if body is None:
        features = build_features(cfg.network, input_shape, invariance, settings, on_inputs=m.transforms_on == "inputs")
    else:
        path = "inputs" if m.transforms_on == "inputs" else transforms_on
        features = BodyFeatures(body, input_shape, invariance, path=path, blur_sigma=cfg.blur_sigma)
    precision = resolve_precision(cfg.precision, device)
    set_product_dtype(features, precision)  # the products' dtype on ``device``
    model = InvariantBNN(
        features,
        num_classes,
        alpha=cfg.alpha,
        prior=m.prior,
        num_samples=cfg.samples,
        sampling=cfg.sampling,
        width_weight=cfg.width_weight if m.width_reward else 0.0,
        average=cfg.average,
        estimator=m.estimator(cfg.estimator),
    )
    guide = m.build_guide(
        num_classes, cast(int, features.num_features), cfg.guide_init_scale, cfg.estimator, cfg.guide, cfg.alpha
    )
    set_product_dtype(guide, precision)  # the draw's product ``L eps`` of the Cholesky guide
    return model, guide


def build_elbo(cfg: Config) -> pyro.infer.ELBO:
    """``Trace_ELBO`` (sampled KL; :class:`~pyroinv.inference.device_elbo.DeviceTrace_ELBO`, the same estimate
    without host reads) or ``TraceMeanField_ELBO`` (the closed-form KL of Appendix A)."""
    kinds = dict(zip(ELBOS, (DeviceTrace_ELBO, pyro.infer.TraceMeanField_ELBO)))
    if cfg.elbo not in kinds:
        raise ConfigError(f"unknown ELBO {cfg.elbo!r}; choose one of {', '.join(ELBOS)}")
    return kinds[cfg.elbo]()


class LocalLoss(torch.nn.Module):
    """Pyro's ELBO module of ``(model, guide)`` (``elbo(model, guide)``, whose forward is ``-ELBO``), called under
    :func:`~pyroinv.model.scope.local_params`: the parameters it steps are the modules' own."""

    def __init__(self, elbo_module: torch.nn.Module) -> None:
        super().__init__()
        self.elbo_module = elbo_module

    def forward(self, *args, **kwargs) -> torch.Tensor:
        with local_params():
            return self.elbo_module(*args, **kwargs)


def build_loss(cfg: Config, model: InvariantBNN, guide: torch.nn.Module) -> torch.nn.Module:
    """The loss module ``-ELBO`` of ``(model, guide)`` (``build_elbo(cfg)(model, guide)``, under the package's
    module-local parameters). Under ``Trace_ELBO`` with :mod:`~pyroinv.model.kernels` enabled, the guide's Gaussian
    ``W2`` is drawn through :class:`~pyroinv.model.kernels.CholeskyNoiseReparam` (no triangular solve; the same
    estimate)."""
    elbo = build_elbo(cfg)
    if kernels.enabled() and cfg.elbo == "trace" and isinstance(guide, ClassCholeskyGuide):
        # TraceMeanField_ELBO needs the MultivariateNormal for its KL; AutoGuides draw their own way
        guide = kernels.NoiseReparameterisedGuide(guide)
    return LocalLoss(elbo(model, guide))


def resolve_device(name: str | torch.device) -> torch.device:
    """``auto`` picks CUDA when available; ``cuda`` without CUDA is a one-line error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was asked for but CUDA is not available here; use --device cpu or auto")
    return torch.device(name)


def device_name(device: torch.device | str) -> str:
    """The card or processor that ``device`` is, e.g. ``NVIDIA H200`` or ``Intel(R) Xeon(R) ... (2 cores)``, for
    results that say which machine made them."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import os
    import platform

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} cores)"
