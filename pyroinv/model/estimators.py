"""How the expected log-likelihood of the ELBO is estimated: one ``W2`` draw per batch or per example.

The bound (paper §3.6-3.7, Appendix A) is, for a minibatch of M of the N points::

    L = (N / M) sum_b E_q[ log p(y_b | x_b, W2) ] - KL(q(W2) || p(W2)).

Both estimators below are unbiased for *the same* L; they differ in their variance.

* ``shared`` (the paper's L = 1): one draw ``W2 ~ q`` for the whole batch,
  ``z_ibc = phi_ib . (mu_c + L_c eps_c)``. The logit noise of all M examples comes from the same
  ``eps``, so it does not average out over the batch: near the prior (``L = I``) the gradient's noise is
  several nats of logit per example, shared by all of them.
* ``local``: an independent draw per example (Kingma, Salimans & Welling 2015, "local
  reparameterisation"), ``z_ibc = phi_ib . (mu_c + L_c eps_bc)``: the S logits of example b share that
  example's draw (so the average over the S transforms is taken under one ``W2``, as the model says),
  and the noise of different examples is independent. Since ``E_q`` is taken per example, the sum
  over the batch of per-example single-draw estimates has the same expectation as the shared one.

In Pyro's idiom the per-example draws are an extra plate ``"W2_draws"`` of size M around the ``W2``
site, in the model and in the guide alike, scaled by ``1 / M``: the site's ``log p(W2) - log q(W2)``
is then the mean over the M draws, an unbiased estimate of ``-KL`` (exact under
``TraceMeanField_ELBO``), and the likelihood pairs draw b with example b.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pyro
import pyro.poutine as poutine

ESTIMATORS = ("local", "shared")
#: how the KL term is estimated: sampled (``Trace_ELBO``) or in closed form (``TraceMeanField_ELBO``, Appendix A)
ELBOS = ("trace", "closed-form")
#: the plate of the per-example draws (batch dimension -2, left of the ``classes`` plate)
DRAWS_PLATE = "W2_draws"


def num_draws(estimator: str, batch_size: int, observed: bool = True) -> int:
    """Draws of ``W2`` for a batch: one per example (``local``) or one (``shared``).

    The per-example draw estimates the ELBO's expected log-likelihood; it is not part of the model. Without
    labels (``observed=False``: prediction, e.g. ``pyro.infer.Predictive``) a call draws one ``W2`` for all
    its examples, a sample of the posterior predictive, whatever the estimator."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")
    return batch_size if estimator == "local" and observed else 1


@contextlib.contextmanager
def w2_plates(num_classes: int, draws: int = 1) -> Iterator[None]:
    """The plates of the ``W2`` site: ``classes`` (dim -1) and, for ``draws > 1``, ``W2_draws`` (dim -2)
    with its log-densities scaled by ``1 / draws``. Used by the model and the guide alike."""
    with pyro.plate("classes", num_classes, dim=-1):
        if draws == 1:
            yield
            return
        with pyro.plate(DRAWS_PLATE, draws, dim=-2), poutine.scale(scale=1.0 / draws):
            yield
