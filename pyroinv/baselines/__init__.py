"""Baselines beside the invariant network: a sparse GP (:mod:`.sgpr`) and the input augmentation of
Augerino (:mod:`.augerino`, ``--inference augerino``). The plain MLP is ``--invariance none``."""
