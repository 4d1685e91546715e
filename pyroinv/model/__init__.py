"""The paper's invariant model (§3): Lie-group transforms ``lie``, warps of images and points ``warp``, the
learnable distribution over transforms ``invariance``, the invariant feature map ``networks``, the prior
``priors``, the variational families ``guides``, the Pyro model ``bnn`` and the ELBO estimators' plates
``estimators``."""
