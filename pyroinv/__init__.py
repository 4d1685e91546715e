"""pyroinv: learning invariant weights in neural networks with Pyro.

Importing pyroinv changes no Pyro setting. The package's own calls of its models and guides (training,
evaluation, export) run under Pyro's ``module_local_params`` setting, scoped to those calls
(:mod:`pyroinv.model.scope`): parameters live in the modules themselves (saved with ``state_dict``), so runs
never share parameters by name. Called from a user's own Pyro code, the same modules follow that code's
setting, e.g. Pyro's global parameter store under ``SVI``, like any ``PyroModule``.

The public entry points, importable from the package itself::

    from pyroinv import InvariantClassifier                  # the library: any body, any data
    from pyroinv import Config, run_experiment, run_or_load, load_run, evaluate_run, eta_profile  # run folders
"""

__version__ = "0.1.0"

from .classifier import InvariantClassifier  # noqa: E402
from .config import Config  # noqa: E402
from .run.analysis import eta_profile, evaluate_run  # noqa: E402
from .run.experiment import run_experiment, run_or_load  # noqa: E402
from .run.folder import load_run  # noqa: E402

__all__ = ["Config", "InvariantClassifier", "eta_profile", "evaluate_run", "load_run", "run_experiment", "run_or_load"]
