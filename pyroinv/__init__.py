"""pyroinv: learning invariant weights in neural networks with Pyro.

Importing pyroinv turns on Pyro's ``module_local_params`` setting: parameters of
``PyroModule`` objects live in the modules themselves (saved with ``state_dict``),
not in Pyro's global parameter store, so runs and tests never share parameters by name.
"""
import pyro

pyro.settings.set(module_local_params=True)

__version__ = "0.1.0"
