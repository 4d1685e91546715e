"""The transformed data sets of the paper's Appendix D, made once, cached, reproducible.

Each image is transformed once, with parameters drawn from a numpy generator whose
seed depends only on the data set, the variant and the split (so train and test
use different seeds, and rebuilding gives identical bytes):

=============  ================================================================
variant        per-image transform of the content
=============  ================================================================
``regular``    none
``rot90``      rotation by theta ~ U[-pi/2, pi/2] ("partially rotated")
``rot``        rotation by theta ~ U[-pi, pi] ("fully rotated")
``trans``      translation by dx, dy ~ U[-8, 8] pixels
``scale``      scaling about the centre by exp(s), s ~ U[-log 2, log 2]
``rot-trans``  rotation (full) then translation
``rot-scale``  scaling then rotation (full)
``trans-scale`` scaling then translation
=============  ================================================================

The content transform is ``A = Translate(dx, dy) Rotate(theta) Scale(exp s)``
(scale first) in the normalised coordinates of :mod:`pyroinv.model.warp` (x right,
y down, so a positive theta turns the content clockwise on screen); the image is
resampled as ``out(p) = in(A^{-1} p)`` with bilinear interpolation, fill value 0
(black) outside the source image, computed in float64 and rounded to uint8.
The parameters are stored beside the images (``angle_*`` in radians, ``dx_*`` /
``dy_*`` in pixels, ``log_scale_*``).
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np
import torch

from ..errors import DataError
from .cache import load_arrays, save_arrays
from .splits import Split

VARIANTS: dict[str, tuple[str, ...]] = {
    "regular": (),
    "rot90": ("rot90",),
    "rot": ("rot",),
    "trans": ("trans",),
    "scale": ("scale",),
    "rot-trans": ("rot", "trans"),
    "rot-scale": ("rot", "scale"),
    "trans-scale": ("trans", "scale"),
}
MAX_SHIFT_PX = 8.0
MAX_LOG_SCALE = math.log(2.0)
FORMAT_VERSION = 1


def variant_seed(dataset: str, variant: str, split: str) -> int:
    """The fixed seed of one (data set, variant, split): a CRC32 of their names."""
    return zlib.crc32(f"pyroinv/{dataset}/{variant}/{split}".encode())


def sample_parameters(variant: str, n: int, seed: int) -> dict[str, np.ndarray]:
    """Per-image transform parameters of ``variant`` (angle in rad, shifts in px, log-scale)."""
    parts = VARIANTS[variant]
    rng = np.random.default_rng(seed)
    params = {"angle": np.zeros(n), "dx": np.zeros(n), "dy": np.zeros(n), "log_scale": np.zeros(n)}
    if "rot" in parts:
        params["angle"] = rng.uniform(-math.pi, math.pi, n)
    if "rot90" in parts:
        params["angle"] = rng.uniform(-math.pi / 2, math.pi / 2, n)
    if "trans" in parts:
        params["dx"] = rng.uniform(-MAX_SHIFT_PX, MAX_SHIFT_PX, n)
        params["dy"] = rng.uniform(-MAX_SHIFT_PX, MAX_SHIFT_PX, n)
    if "scale" in parts:
        params["log_scale"] = rng.uniform(-MAX_LOG_SCALE, MAX_LOG_SCALE, n)
    return params


def content_matrices(params: dict[str, np.ndarray], size: int) -> torch.Tensor:
    """``A = Translate Rotate Scale`` per image, ``(N, 3, 3)`` float64, normalised coordinates."""
    angle = torch.as_tensor(params["angle"], dtype=torch.float64)
    scale = torch.exp(torch.as_tensor(params["log_scale"], dtype=torch.float64))
    px = 2.0 / size
    A = torch.zeros(len(angle), 3, 3, dtype=torch.float64)
    c, s = torch.cos(angle) * scale, torch.sin(angle) * scale
    A[:, 0, 0], A[:, 0, 1], A[:, 1, 0], A[:, 1, 1] = c, -s, s, c
    A[:, 0, 2] = torch.as_tensor(params["dx"], dtype=torch.float64) * px
    A[:, 1, 2] = torch.as_tensor(params["dy"], dtype=torch.float64) * px
    A[:, 2, 2] = 1.0
    return A


def apply_content_transform(images: np.ndarray, A: torch.Tensor, batch: int = 5000) -> np.ndarray:
    """Resample images ``(N, C, H, W)`` so that their content moves by ``A``.

    uint8 images are rounded back to uint8; float images stay float32.
    """
    from ..model.warp import warp_images

    out = np.empty_like(images)
    Ainv = torch.linalg.inv(A)
    for i in range(0, len(images), batch):
        x = torch.as_tensor(images[i : i + batch], dtype=torch.float64)
        y = warp_images(x, Ainv[i : i + batch])
        if images.dtype == np.uint8:
            y = torch.clamp(torch.round(y), 0, 255)
        out[i : i + batch] = y.numpy().astype(images.dtype)
    return out


def make_variant(base: Split, variant: str, cache_dir: Path | None = None) -> Split:
    """``base`` transformed by ``variant`` (cached in ``cache_dir`` when given)."""
    if variant not in VARIANTS:
        raise DataError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    if variant == "regular":
        return base
    if not base.is_image:
        raise DataError(f"variant {variant!r} needs image data; {base.name} holds coordinates")
    name = f"{base.name}-{variant}"
    path = cache_dir / f"{name}.v{FORMAT_VERSION}.npz" if cache_dir is not None else None
    if path is not None and path.exists():
        a = load_arrays(path)
    else:
        a = {}
        for split, x in (("train", base.x_train), ("test", base.x_test)):
            params = sample_parameters(variant, len(x), variant_seed(base.name, variant, split))
            a[f"x_{split}"] = apply_content_transform(x, content_matrices(params, x.shape[-1]))
            for k, v in params.items():
                a[f"{k}_{split}"] = v
        if path is not None:
            save_arrays(path, **a)
    meta = {k: v for k, v in a.items() if not k.startswith("x_")}
    return Split(name, a["x_train"], base.y_train, a["x_test"], base.y_test, base.num_classes, meta)
