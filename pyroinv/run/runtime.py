"""Process-wide settings of the training processes: large temporary tensors kept on the heap (Linux), and
subnormal floats flushed to zero.

Every training step allocates and frees tensors of tens of megabytes (the ``S x B x H``
activations and their gradients). glibc's ``malloc`` serves blocks above its mmap threshold
with fresh ``mmap`` calls and returns them to the kernel on ``free``, so each step pays one page
fault per 4 KiB page touched again (about 10-20% of a step at the paper's settings on a 2-core
machine; see ``docs/results/engineering.md``). Raising the mmap and trim thresholds keeps freed memory in the
process for the next step. Peak memory is unchanged; the resident size stays at its peak.

Subnormal floats (below 1.2e-38 in float32) take a slow path in x86 arithmetic, tens of times slower than normal
ones. Weights held small by a strong prior, and Adam's moments as the cosine schedule runs out, drift into that
range late in training: a run of ``--laplace-layers all`` on 20,000 images slowed from 0.15 s to 1.7 s a step
after 1,800 steps. Flushing them to zero costs nothing and changes values only below that range.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

#: ``mallopt`` parameter codes from glibc's ``malloc.h``
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: keep blocks up to 1 GiB on the heap, and never trim freed memory back to the kernel below 2 GiB
MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES = 1 << 30, (1 << 31) - 1


def keep_freed_memory() -> bool:
    """Ask glibc's allocator to reuse freed memory instead of unmapping it; True if it applied.

    A no-op (False) where the C library is not glibc (macOS, Windows, musl).
    """
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )


def subnormals_kept() -> bool:
    """Whether the calling thread keeps subnormal floats (the processor's flush-to-zero mode is off)."""
    return bool(torch.tensor([1e-39]).ne(0).item())


@contextmanager
def subnormals_flushed() -> Iterator[bool]:
    """Flush subnormal floats to zero in CPU arithmetic (``torch.set_flush_denormal``) inside the block; yields True
    if it applied (x86 with SSE3), False where the processor cannot. The calling thread's setting is restored on
    exit.

    The setting belongs to a thread, and threads inherit it when they are created: entered at the start of a
    process, before torch starts its worker threads, it covers them all (the training and evaluation entry points
    do so)."""
    kept = subnormals_kept()
    for dtype in (np.float16, np.float32, np.float64):  # numpy < 2.4 measures these on first use: measured with
        np.finfo(dtype)  # subnormals flushed, it would warn that the smallest subnormal is zero; its cache keeps them
    applied = bool(torch.set_flush_denormal(True))
    try:
        yield applied
    finally:
        if kept:
            torch.set_flush_denormal(False)
