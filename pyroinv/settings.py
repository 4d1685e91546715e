"""The package's switches in one place, as ``pyro.settings`` holds Pyro's::

    import pyroinv.settings
    pyroinv.settings.get()                      # every setting and its value now
    pyroinv.settings.set(kernels=False)         # for the rest of the process
    with pyroinv.settings.context(cuda_graph=False):
        ...                                     # for the block only

Each setting has a default, and may take it from an environment variable (read when the setting is read, so that
``PYROINV_OFFLINE=1 python ...`` and a test's ``monkeypatch.setenv`` both apply); a value given by :func:`set` or
:func:`context` takes precedence over both.

==================  =============================  =============================================================
setting             environment variable           what it does
==================  =============================  =============================================================
``kernels``         --                             the fast computations of the same numbers
                                                   (:mod:`pyroinv.model.kernels`); off: the plain formulas
``cuda_graph``      ``PYROINV_CUDA_GRAPH`` (0/1)   replay the training step as a CUDA graph on a GPU
                                                   (:mod:`pyroinv.inference.step_graph`)
``cache_dir``       ``PYROINV_CACHE``              where converted data sets are cached (``~/.cache/pyroinv``)
``data_root``       ``PYROINV_DATA_ROOT``          a folder with the user's own copies of the data sets
``offline``         ``PYROINV_OFFLINE`` (0/1)      never try to download a data set
``kept_results``    ``PYROINV_KEPT_RESULTS``       the folder of kept reproduction cells (the repository's
                                                   ``results/``)
==================  =============================  =============================================================
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class _Setting:
    default: Any
    env: str | None = None
    parse: Callable[[str], Any] = str


def _flag(default: bool) -> Callable[[str], bool]:
    def parse(text: str) -> bool:
        text = text.strip().lower()
        return True if text in _TRUE else False if text in _FALSE else default

    return parse


_SETTINGS: dict[str, _Setting] = {
    "kernels": _Setting(True),
    "cuda_graph": _Setting(True, "PYROINV_CUDA_GRAPH", _flag(True)),
    "cache_dir": _Setting(None, "PYROINV_CACHE"),
    "data_root": _Setting(None, "PYROINV_DATA_ROOT"),
    "offline": _Setting(False, "PYROINV_OFFLINE", _flag(False)),
    "kept_results": _Setting(None, "PYROINV_KEPT_RESULTS"),
}
_GIVEN: dict[str, Any] = {}


def _check(names) -> None:
    unknown = sorted(n for n in names if n not in _SETTINGS)
    if unknown:
        raise KeyError(f"unknown pyroinv setting(s) {', '.join(unknown)}; the settings are {', '.join(_SETTINGS)}")


def get(name: str | None = None) -> Any:
    """The value of setting ``name`` (given, else from its environment variable, else its default); without a
    name, every setting's as a dict."""
    if name is None:
        return {n: get(n) for n in _SETTINGS}
    if name in _GIVEN:
        return _GIVEN[name]
    if name not in _SETTINGS:
        _check([name])
    s = _SETTINGS[name]
    text = os.environ.get(s.env) if s.env else None
    return s.parse(text) if text else s.default


def set(**values: Any) -> None:  # noqa: A001 (pyro.settings' name)
    """Give settings a value for the rest of the process."""
    _check(values)
    _GIVEN.update(values)


@contextlib.contextmanager
def context(**values: Any) -> Iterator[None]:
    """Give settings a value inside the block; the values before are restored after it."""
    _check(values)
    before = {k: _GIVEN[k] for k in values if k in _GIVEN}
    _GIVEN.update(values)
    try:
        yield
    finally:
        for k in values:
            _GIVEN.pop(k, None)
        _GIVEN.update(before)


__all__ = ["context", "get", "set"]
