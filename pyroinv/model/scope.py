"""Where the package's Pyro parameters live, without changing any Pyro setting for anyone else.

Pyro keeps a ``PyroModule``'s parameters either in Pyro's global parameter store, by name (the default), or in
the module itself (the ``module_local_params`` setting). The package's own calls (training, evaluation, the
ELBO profile, export) run under :func:`local_params`, a context that turns the setting on for that call only:
two models in one process (two runs compared in a notebook, the tests) then never share a parameter because
their names agree. Importing pyroinv changes no setting. A user's own Pyro code calls the same modules under
its own setting: under the default, ``SVI`` with ``pyro.optim`` and the JIT ELBOs see the parameters in the
global store by name (``InvariantBNN.features.W1``, ``ClassCholeskyGuide.loc``, ...), as with any
``PyroModule`` (``pyro.clear_param_store()`` before training a second model, as usual in Pyro).

:class:`PyroinvModule` is the base of the package's modules: a ``PyroModule`` whose call context is made under
the local setting, so that it can be called under either setting afterwards (Pyro gives a module built under the
global setting no room for local parameters).
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import pyro
from pyro.nn import PyroModule


def local_params() -> AbstractContextManager:
    """Parameters of ``PyroModule`` objects live in the modules, for the calls inside this context only."""
    return pyro.settings.context(module_local_params=True)


class PyroinvModule(PyroModule):
    """A ``PyroModule`` usable under either ``module_local_params`` setting (see the module docstring).

    Its Pyro name is its class's (``name`` overrides it), as Pyro's AutoGuides prefix theirs (``AutoNormal.locs.x``):
    under the global parameter store the parameters are ``InvariantBNN.features.W1``, ``ClassCholeskyGuide.loc``,
    ..., never a user's own ``loc``. A submodule takes its parent's name and its attribute's, as in any
    ``PyroModule``."""

    def __init__(self, name: str = "") -> None:
        with local_params():
            super().__init__(name or type(self).__name__)


__all__ = ["PyroinvModule", "local_params"]
