"""Baselines beside the invariant network: a sparse GP (:mod:`.sgpr`). The plain MLP is
``--invariance none``; the Augerino-style input augmentation is ``--inference augerino``."""
