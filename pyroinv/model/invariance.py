"""The learnable distribution over transformations p_eta(T) (paper §3.3-3.5).

:class:`Invariance` holds the invariance parameters ``eta`` of the active generators
of a preset as a Pyro parameter (or a fixed buffer) and draws the S transforms
``T_i = expm(sum_k eps_ik eta_k G_k)`` used by one forward pass.
"""

from __future__ import annotations

import math
from typing import cast

import torch
from pyro.distributions import constraints
from pyro.nn import PyroParam
from torch.distributions import biject_to
from torch.distributions.constraints import Constraint

from ..errors import ConfigError
from . import lie
from .scope import PyroinvModule

CONSTRAINTS = ("none", "softplus", "tanh")


class Invariance(PyroinvModule):
    """``eta`` for one preset (``none``, ``rotation``, ``translation``, ``scale``, ``affine``,
    ``isotropic-scale``; tied generators share ``eta`` and ``eps``, :data:`pyroinv.model.lie.TIES`).

    Args:
        preset: which generators are active, see :data:`pyroinv.model.lie.PRESETS`.
        init: raw initial value of every active ``eta_k`` (radians, normalised units or
            log-scale); a sequence gives one value per active generator.
        learn: learn ``eta`` (a ``PyroParam``) or hold it fixed (a buffer), as for the
            paper's fixed-rotation baselines.
        constraint: ``"none"`` (the paper's default), ``"softplus"`` (eta > 0) or
            ``"tanh"`` (each eta in (-pi, pi) through a scaled sigmoid/tanh; Appendix E).
        image_size: width of the images in pixels, for human units (None for 2-D data).
    """

    eta_active: torch.Tensor  # a PyroParam when learned (read back as a tensor), else a buffer

    def __init__(
        self,
        preset: str = "rotation",
        init: float | list[float] = 0.0,
        learn: bool = True,
        constraint: str = "none",
        image_size: int | None = None,
    ) -> None:
        super().__init__()
        if preset not in lie.PRESETS:
            raise ConfigError(f"unknown invariance {preset!r}; choose one of {', '.join(lie.PRESETS)}")
        if constraint not in CONSTRAINTS:
            raise ConfigError(f"unknown eta constraint {constraint!r}; choose one of {', '.join(CONSTRAINTS)}")
        self.preset = preset
        self.active: tuple[int, ...] = lie.PRESETS[preset]
        self.image_size = image_size
        self.learn = learn and bool(self.active)
        values = [float(init)] * len(self.active) if not isinstance(init, (list, tuple)) else [float(v) for v in init]
        if len(values) != len(self.active):
            raise ConfigError(f"{preset} has {len(self.active)} generators but {len(values)} initial values were given")
        eta0 = torch.tensor(values, dtype=torch.float32)
        if constraint == "softplus" and (eta0 <= 0).any():
            raise ConfigError(f"a softplus-constrained eta needs a positive initial value, got init={values}")
        if self.learn and constraint == "tanh" and (eta0.abs() >= math.pi).any():
            raise ConfigError(
                f"a tanh-constrained eta needs |init| < pi (180 degrees for rotation), got init={values}; "
                f"start below it or use constraint='none'"
            )
        if self.learn:
            # cast: pyro's softplus_positive subclasses type(positive), which mypy cannot follow
            c = cast(
                Constraint,
                {
                    "none": constraints.real,
                    "softplus": constraints.softplus_positive,
                    "tanh": constraints.interval(-math.pi, math.pi),
                }[constraint],
            )
            self._constraint = c
            self.eta_active = PyroParam(eta0, constraint=c)  # type: ignore[assignment]
        else:
            self.register_buffer("eta_active", eta0)

    @property
    def eta(self) -> torch.Tensor:
        """All six ``eta`` (zeros for inactive generators), shape ``(6,)``."""
        eta_active = self.eta_active
        full = torch.zeros(6, dtype=eta_active.dtype, device=eta_active.device)
        if self.active:
            full = full.index_put((lie.index_tensor(self.active, eta_active.device),), eta_active)
        return lie.apply_ties(full, self.preset)

    def sample_transforms(self, num_samples: int, sampling: str = "stochastic") -> torch.Tensor:
        """S transforms ``(S, 3, 3)``: stochastic ``eps ~ U[-1,1]^k`` or the deterministic grid."""
        eta = self.eta
        if sampling == "stochastic":
            eps = lie.stochastic_eps(num_samples if self.active else 1, self.active, dtype=eta.dtype, device=eta.device)
        elif sampling == "deterministic":
            eps = lie.deterministic_grid(num_samples, tuple(self.active), eta.dtype, eta.device)
        else:
            raise ConfigError(f"unknown sampling {sampling!r}; choose one of {', '.join(lie.SAMPLINGS)}")
        return lie.transforms(eta, lie.apply_ties(eps, self.preset), self.active)

    @torch.no_grad()
    def set_eta(self, generator: int, raw: float) -> None:
        """Set one active ``eta_k`` to the raw value ``raw`` (through its constraint when learned)."""
        if generator not in self.active:
            raise ConfigError(f"generator {generator} is not active in the {self.preset} invariance")
        values = self.eta_active.detach().clone()
        values[self.active.index(generator)] = raw
        if self.learn:
            self.eta_active_unconstrained.copy_(biject_to(self._constraint).inv(values))
        else:
            self.eta_active.copy_(values)

    def human(self) -> dict[str, float]:
        """``eta`` in degrees, pixels and scale factors (see :func:`pyroinv.model.lie.to_human`)."""
        return lie.to_human(self.eta, self.image_size)

    def describe(self) -> str:
        return lie.describe(self.eta, self.active, self.image_size)
