"""What a method maximises, as objects (as GPyTorch's ``VariationalELBO(likelihood, model, num_data)``).

Each :class:`Objective` names itself for the progress line and the plots and says how it stands to the
evidence ``log p(D | eta)``, the quantity by which the paper picks the invariance:

* :data:`ELBO`, ``E_q[sum_n log f_hat(x_n)_{y_n}] - KL(q || p)``: a lower bound (eq. (bound), Jensen over ``q``
  and over the S transforms);
* :data:`LAPLACE`, ``log p(D, W2_hat | eta) - 1/2 log det(alpha H)`` with ``H`` the generalised Gauss-Newton
  curvature of the output layer plus the prior's precision (:mod:`pyroinv.inference.laplace`): an approximation,
  neither a bound nor exact (exact in ``W2`` for a Gaussian likelihood; here the Gaussian fit at the mode);
* :data:`LOG_JOINT`, ``sum_n log f_hat(x_n)_{y_n} + log p(W2_hat)``: a point estimate's objective, no evidence;
* :data:`LOG_LIKELIHOOD`, ``sum_n log f_hat(x_n)_{y_n}`` (maximum likelihood), and :data:`AUGERINO`, the same plus
  Augerino's width reward.

A method (:mod:`pyroinv.model.methods`) pairs the objective its weights climb with the one its ``eta``
climbs (the same one, except for the Laplace method, whose weights climb the log joint).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Objective:
    """One training objective (per data point on the progress line).

    Attributes:
        name: identifier.
        short: the progress line's name of ``objective / N``.
        label: the same, for plot axes.
        bounds_evidence: the objective is a lower bound on ``log p(D | eta)``.
        approximates_evidence: the objective estimates ``log p(D | eta)`` (a bound or an approximation), so its
            values at different ``eta`` may be compared to pick an invariance.
    """

    name: str
    short: str
    label: str
    bounds_evidence: bool = False
    approximates_evidence: bool = False


ELBO = Objective("elbo", "ELBO/N", "ELBO / N (minibatch estimate)", bounds_evidence=True, approximates_evidence=True)
LAPLACE = Objective("laplace", "laplace/N", "Laplace log evidence / N", approximates_evidence=True)
LOG_JOINT = Objective("log-joint", "logjoint/N", "log joint / N")
LOG_LIKELIHOOD = Objective("log-likelihood", "loglik/N", "log-likelihood / N")
AUGERINO = Objective("log-likelihood+width", "loglik+reward/N", "log-likelihood / N + width reward")

__all__ = ["AUGERINO", "ELBO", "LAPLACE", "LOG_JOINT", "LOG_LIKELIHOOD", "Objective"]
