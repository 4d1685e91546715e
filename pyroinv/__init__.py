"""pyroinv: learning invariant weights in neural networks with Pyro.

Importing pyroinv turns on Pyro's ``module_local_params`` setting: parameters of
``PyroModule`` objects live in the modules themselves (saved with ``state_dict``),
not in Pyro's global parameter store, so runs and tests never share parameters by name.

The public entry points, importable from the package itself::

    from pyroinv import Config, run_experiment, run_or_load, load_run, evaluate_run, eta_profile
"""
import pyro

pyro.settings.set(module_local_params=True)

__version__ = "0.1.0"

from .run.analysis import eta_profile, evaluate_run  # noqa: E402
from .config import Config  # noqa: E402
from .run.experiment import run_experiment, run_or_load  # noqa: E402
from .run.folder import load_run  # noqa: E402

__all__ = ["Config", "eta_profile", "evaluate_run", "load_run", "run_experiment", "run_or_load"]
