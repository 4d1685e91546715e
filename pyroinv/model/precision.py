"""The precision of the network's large products: float32, or bfloat16 with float32 accumulation.

A training step's time is mostly the first layer's product of the (transformed) inputs with ``W1``,
``(S B, D) @ (D, H)`` forward and its two products backward. On a processor with native bfloat16 products
(AVX512_BF16 or AMX on a CPU; a CUDA card with bfloat16 tensor cores) that product runs several times faster in
bfloat16. Under ``precision="bf16"`` the package computes those products, and those of the deeper layers, as

    mm(a, b) = float32(bf16(a) @ bf16(b))    (bfloat16 operands and result, float32 accumulation inside),

forward and backward (autograd casts the incoming gradient to bfloat16 for the two backward products and the
gradients of ``a`` and ``b`` back to float32). The Cholesky guide's draw ``W2 = mu + L eps`` takes its product
``L eps`` the same way: under the per-example estimator it is ``K D^2 B`` multiply-adds forward and as many
backward, as large as the first layer's product at the paper's sizes. Everything else stays in float32: the blur and
the warps, the bias, the activations, ``q(W2)``'s parameters and density, the KL, the log-likelihood, the Laplace
curvature, ``eta``'s transforms and Adam's state.
``"auto"`` is bfloat16 where the device has native bfloat16 products, float32 elsewhere.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, cast

import torch

#: the ``--precision`` choices
PRECISIONS = ("fp32", "bf16", "auto")
#: the dtype of the products under each resolved precision (``None``: float32, as the operands are)
PRODUCT_DTYPES = {"fp32": None, "bf16": torch.bfloat16}


@cache
def _cpu_flags() -> frozenset[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def native_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices natively: a CPU with AVX512_BF16 or AMX, a CUDA card that
    supports bfloat16."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool({"avx512_bf16", "amx_bf16"} & _cpu_flags())


def resolve_precision(precision: str, device: torch.device | str) -> str:
    """``fp32`` or ``bf16``: ``auto`` takes bfloat16 where :func:`native_bf16`."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    if precision == "bf16" and not native_bf16(device):
        warnings.warn(
            f"precision 'bf16' on {torch.device(device).type}, which has no native bfloat16 products (AVX512_BF16 or "
            "AMX on a CPU): the products are emulated and several times slower than float32; precision 'auto' "
            "picks float32 here",
            stacklevel=1,  # one location, so the default filter shows it once however many builders resolve it
        )
    return precision


def mm(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """``a @ b`` (any batch dimensions), its operands in ``dtype`` (``None``: as they are), the result in ``a``'s
    dtype."""
    if dtype is None:
        return torch.matmul(a, b)
    return torch.matmul(a.to(dtype), b.to(dtype)).to(a.dtype)


@contextlib.contextmanager
def products_in(dtype: torch.dtype | None, device_type: str) -> Iterator[None]:
    """Inside the block, a deeper body's products (linear layers, convolutions) in ``dtype`` by
    ``torch.autocast`` (``None``: nothing changes); the caller casts the result back to its inputs' dtype."""
    if dtype is None:
        yield
        return
    with torch.autocast(device_type, dtype=dtype):
        yield


def set_product_dtype(module: torch.nn.Module, precision: str) -> None:
    """Give every feature map (and Cholesky guide) inside ``module`` the product dtype of the resolved ``precision``."""
    dtype = PRODUCT_DTYPES[precision]
    for m in module.modules():
        if hasattr(type(m), "product_dtype"):
            cast(Any, m).product_dtype = dtype  # a feature map's own attribute, not a submodule or tensor


__all__ = ["PRECISIONS", "PRODUCT_DTYPES", "mm", "native_bf16", "products_in", "resolve_precision", "set_product_dtype"]
