"""Affine Lie-algebra reparameterisation of transformations (paper §3.3, Appendix E).

A transformation is ``T = expm(sum_i eps_i eta_i G_i)`` with the six generators of
Appendix E, in its order: translate x, translate y, rotate, scale x, scale y, shear.
``eps`` is either stochastic, ``eps ~ U[-1, 1]^k`` (reparameterised, so gradients
reach ``eta``), or a deterministic grid of linearly spaced points (§3.4, a
quadrature over the active generators).

Units: the generators act on the normalised image coordinates of :mod:`pyroinv.model.warp`
(``[-1, 1]`` across the image), so ``eta_rot`` is in radians (``pi`` = full
rotational invariance), a translation ``eta`` of 1 is half the image width
(``W / 2`` pixels) and a scale ``eta`` of ``s`` covers factors ``exp(-s) .. exp(s)``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch

from ..errors import ConfigError

GENERATOR_NAMES: tuple[str, ...] = ("translate_x", "translate_y", "rotate", "scale_x", "scale_y", "shear")

#: Where a learned invariance starts by default, in human units (degrees, pixels, log-scale), one value per
#: generator of :data:`GENERATOR_NAMES`: near, not at, no invariance. At eta = 0 every transform is the
#: identity and the objective's gradient with respect to eta is zero in expectation, so a generator started
#: there can stay there; rotation starts at ±5° as in the paper's Table 1.
SMALL_START: tuple[float, ...] = (0.5, 0.5, 5.0, 0.05, 0.05, 0.05)

#: The invariance presets: which generators are active (indices into GENERATOR_NAMES).
PRESETS: dict[str, tuple[int, ...]] = {
    "none": (),
    "rotation": (2,),
    "translation": (0, 1),
    "scale": (3, 4),
    "affine": (0, 1, 2, 3, 4, 5),
    "isotropic-scale": (3,),
    "similarity": (0, 1, 2, 3),
}

#: Generators that share another's ``eta`` and noise ``eps`` (``{follower: leader}``). The paper's scale
#: preset draws x and y scale independently (Appendix E), so its transforms include stretches that change
#: a digit's aspect ratio; ``isotropic-scale`` ties scale y to scale x, ``T = expm(eps eta (G_4 + G_5))``, and
#: ``similarity`` is translation, rotation and that isotropic scale (the affine group without stretch or shear).
TIES: dict[str, dict[int, int]] = {"isotropic-scale": {4: 3}, "similarity": {4: 3}}


def apply_ties(values: torch.Tensor, preset: str) -> torch.Tensor:
    """Copy each leader's column of ``values`` (``(..., 6)``: ``eta`` or ``eps``) into its followers
    (:data:`TIES`); differentiable, and the identity for presets without ties."""
    ties = TIES.get(preset)
    if not ties:
        return values
    index = list(range(values.shape[-1]))
    for follower, leader in ties.items():
        index[follower] = leader
    return values.index_select(-1, index_tensor(tuple(index), values.device))


@functools.cache
def index_tensor(index: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """``torch.tensor(index)`` on ``device``, made once: indexing a device tensor with a Python list copies the list
    to the device at every call, and that copy waits for the device."""
    return torch.tensor(index, dtype=torch.long, device=device)


#: Deterministic grids larger than this are refused (the curse of dimensionality of §3.5).
MAX_GRID_POINTS = 4096


def generators(dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> torch.Tensor:
    """The six 3x3 generator matrices G_1..G_6 of Appendix E, shape ``(6, 3, 3)``."""
    return _generators(dtype, torch.device(device) if device is not None else torch.device("cpu")).clone()


@functools.cache
def _generators(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """One read-only copy per dtype and device (built once: ten small writes are ten kernel launches on a GPU)."""
    G = torch.zeros(6, 3, 3, dtype=dtype, device=device)
    G[0, 0, 2] = 1.0  # translate x
    G[1, 1, 2] = 1.0  # translate y
    G[2, 0, 1], G[2, 1, 0] = -1.0, 1.0  # rotate
    G[3, 0, 0] = 1.0  # scale x
    G[4, 1, 1] = 1.0  # scale y
    G[5, 0, 1], G[5, 1, 0] = 1.0, 1.0  # shear
    return G


def transforms(eta: torch.Tensor, eps: torch.Tensor, active: Sequence[int] | None = None) -> torch.Tensor:
    """``T_i = expm(sum_k eps[i, k] eta[k] G_k)``, shape ``(S, 3, 3)``.

    Args:
        eta: ``(6,)`` invariance parameters (zero for inactive generators).
        eps: ``(S, 6)`` noise in ``[-1, 1]``.
        active: the active generators, when known: off the CPU, rotation alone takes its closed form
            (:func:`rotation_matrices`, a few kernels where the general exponential takes dozens).
    """
    if active is not None and tuple(active) == (ROTATE,) and not on_host(eta):
        return rotation_matrices(eps[:, ROTATE] * eta[ROTATE])
    A = torch.einsum("sk,kij->sij", eps * eta, _generators(eta.dtype, eta.device))
    return expm(A)


#: the index of the rotation generator in :data:`GENERATOR_NAMES`
ROTATE = GENERATOR_NAMES.index("rotate")


def on_host(t: torch.Tensor) -> bool:
    """Whether ``t`` lives on the CPU, where the exponentials are ``torch.linalg.matrix_exp``'s (elsewhere they are
    computed without reading anything back to the host)."""
    return t.device.type == "cpu"


def expm(A: torch.Tensor) -> torch.Tensor:
    """``exp(A)`` of a batch of small matrices: ``torch.linalg.matrix_exp`` on the CPU (it costs microseconds there);
    elsewhere :func:`expm_taylor`, which stays on the device. ``matrix_exp`` on an accelerator launches dozens of
    kernels and reads the norm back to choose its degree, and copying ``A`` to the CPU waits for the device as
    well: either way a training step would stop for the device to catch up."""
    return torch.linalg.matrix_exp(A) if on_host(A) else expm_taylor(A)


def rotation_matrices(theta: torch.Tensor) -> torch.Tensor:
    """``exp(theta G_rot) = [[cos, -sin, 0], [sin, cos, 0], [0, 0, 1]]`` for each angle of ``theta``, shape
    ``(*theta.shape, 3, 3)``: the exponential of Appendix E's rotation generator in closed form."""
    c, s = torch.cos(theta), torch.sin(theta)
    zero, one = torch.zeros_like(theta), torch.ones_like(theta)
    return torch.stack([c, -s, zero, s, c, zero, zero, zero, one], dim=-1).reshape(*theta.shape, 3, 3)


#: :func:`expm_taylor`'s squarings s and Taylor degree m (see there)
TAYLOR_SQUARINGS, TAYLOR_DEGREE = 4, 14


def expm_taylor(A: torch.Tensor, squarings: int = TAYLOR_SQUARINGS, degree: int = TAYLOR_DEGREE) -> torch.Tensor:
    """``exp(A) = (T_m(A / 2^s))^(2^s)`` with ``T_m`` the degree-m Taylor polynomial, by Horner's rule: a fixed
    number of batched products (m + s kernels), with no branch on the data, so nothing is read back to the host.

    The truncation error of ``T_m(B)`` is at most ``||B||^(m+1) / (m+1)! e^||B||``: with s = 4 and m = 14 below
    ``1e-7`` relative for ``||A|| <= 32``, far beyond the transforms' range (``|eps eta| <= pi`` for rotation);
    each squaring doubles the rounding error, so float32 results differ from ``matrix_exp`` by up to ``2e-6``
    (``tests/model/test_lie.py``). Gradients flow through the products."""
    B = A / (2**squarings)
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand_as(A)
    P = eye
    for k in range(degree, 0, -1):  # P <- I + B P / k
        P = torch.baddbmm(eye, B, P, alpha=1.0 / k) if A.dim() == 3 else eye + B @ P / k
    for _ in range(squarings):
        P = P @ P
    return P


#: how the S values of ``eps`` are drawn: ``U[-1, 1]^k`` (:func:`stochastic_eps`) or a grid (:func:`deterministic_eps`)
SAMPLINGS = ("stochastic", "deterministic")


def stochastic_eps(
    num_samples: int,
    active: Sequence[int],
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``(S, 6)`` with ``U[-1, 1]`` noise in the active columns and zeros elsewhere, drawn on ``device`` (or on
    ``generator``'s device, then moved)."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    eps = torch.zeros(num_samples, 6, dtype=dtype, device=device)
    if active:
        u = torch.rand(
            num_samples,
            len(active),
            generator=generator,
            dtype=dtype,
            device=generator.device if generator is not None else device,
        )
        if u.device != device:
            u = u.to(device)
        eps = eps.index_copy(1, index_tensor(tuple(active), device), 2.0 * u - 1.0)
    return eps


def grid_points_per_axis(num_samples: int, num_active: int) -> int:
    """Points per active generator of a deterministic grid with about ``num_samples`` points."""
    if num_active == 0:
        return 1
    return max(1, round(num_samples ** (1.0 / num_active)))


def deterministic_eps(
    num_samples: int,
    active: Sequence[int],
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
    max_points: int = MAX_GRID_POINTS,
) -> torch.Tensor:
    """A product grid of midpoints ``eps_j = -1 + (2j + 1) / m`` over the active generators.

    With one active generator this is ``m = num_samples`` points; with ``k`` active,
    ``m = round(num_samples ** (1/k))`` points per axis and ``m ** k`` in all. Midpoints
    make a rotation grid with ``eta = pi`` exactly ``m`` equally spaced angles on the
    circle (spacing ``2 pi / m``, no duplicate at +-pi).

    Raises:
        ConfigError: the grid would exceed ``max_points`` transforms.
    """
    k = len(active)
    if k == 0:
        return torch.zeros(1, 6, dtype=dtype, device=device)
    m = grid_points_per_axis(num_samples, k)
    if m**k > max_points:
        raise ConfigError(
            f"a deterministic grid over {k} generators with {m} points each has {m**k} transforms "
            f"(limit {max_points}); use stochastic sampling or fewer samples"
        )
    axis = -1.0 + (2.0 * torch.arange(m, dtype=dtype) + 1.0) / m
    mesh = torch.cartesian_prod(*([axis] * k)).reshape(-1, k)
    eps = torch.zeros(mesh.shape[0], 6, dtype=dtype)
    eps[:, list(active)] = mesh
    return eps.to(device)


@functools.lru_cache(maxsize=64)
def deterministic_grid(
    num_samples: int, active: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """:func:`deterministic_eps` made once per setting and device, for the training step (building it on the CPU
    and copying it over at every step would wait for the device). Read only."""
    return deterministic_eps(num_samples, active, dtype=dtype, device=device)


def to_human(eta: torch.Tensor, image_size: int | None = None) -> dict[str, float]:
    """Invariance parameters in human units.

    Returns a dict with ``rotation_deg`` (``|eta_3|`` in degrees), ``translate_x_px`` /
    ``translate_y_px`` (``|eta| * W / 2`` pixels; normalised units if ``image_size`` is
    None), ``scale_x_factor`` / ``scale_y_factor`` (``exp(|eta|)``: the range is
    ``1/f .. f``) and ``shear`` (``|eta_6|``, dimensionless).
    """
    e = [abs(float(v)) for v in eta.detach().cpu().reshape(-1)]
    px = (image_size / 2.0) if image_size else 1.0
    return {
        "translate_x_px": e[0] * px,
        "translate_y_px": e[1] * px,
        "rotation_deg": math.degrees(e[2]),
        "scale_x_factor": math.exp(e[3]),
        "scale_y_factor": math.exp(e[4]),
        "shear": e[5],
    }


def from_human(index: int, value: float, image_size: int | None = None) -> float:
    """Raw ``eta_index`` from a human value: degrees (rotation), pixels (translation), log-scale otherwise."""
    if index == 2:
        return math.radians(value)
    if index in (0, 1):
        return value * 2.0 / image_size if image_size else value
    return value


def describe(eta: torch.Tensor, active: Sequence[int], image_size: int | None = None) -> str:
    """A short sentence such as ``"rotation ±178.2°"`` or ``"translation ±3.1 px x, ±2.9 px y"``."""
    h = to_human(eta, image_size)
    unit = "px" if image_size else "units"
    parts = []
    if 2 in active:
        parts.append(f"rotation ±{h['rotation_deg']:.1f}°")
    if 0 in active or 1 in active:
        parts.append(f"translation ±{h['translate_x_px']:.2f} {unit} x, ±{h['translate_y_px']:.2f} {unit} y")
    if 3 in active or 4 in active:
        parts.append(f"scale ×{h['scale_x_factor']:.3f} x, ×{h['scale_y_factor']:.3f} y")
    if 5 in active:
        parts.append(f"shear ±{h['shear']:.3f}")
    return ", ".join(parts) if parts else "no invariance"
