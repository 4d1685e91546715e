"""Ways of learning the invariance ``eta``, each one object: the registry behind ``--inference``.

A :class:`Method` says which prior ``p(W2)`` the model uses, whether ``q(W2)`` is a Gaussian or a point, where
the transforms act (on the weights, or on the inputs), and which :class:`~pyroinv.model.objectives.Objective`
the weights and ``eta`` climb. Nothing else in the package branches on the method's name, nor on the network's
(:mod:`pyroinv.model.registry`): add a method by adding one entry to :data:`METHODS`.

* ``vi`` (the paper, §3.6-3.7): ``W2 ~ N(0, alpha I)``, ``q(W2) = prod_c N(mu_c, L_c L_c^T)``; maximise the
  ELBO ``E_q[sum_n log f_hat(x_n)_{y_n}] - KL(q || p) <= log p(D | eta)`` over ``q``, the body and ``eta``.
* ``laplace`` (LILA's, Immer et al. 2022, on the output layer): a point ``W2`` and the body on the log joint
  (MAP); ``eta`` on the Laplace approximation of ``log p(D | eta)`` with the Kronecker-factored generalised
  Gauss-Newton curvature of ``W2`` (:mod:`pyroinv.inference.laplace`).
* ``map``: a point ``W2`` under the same prior; the log joint ``sum_n log f_hat(x_n)_{y_n} + log p(W2)``.
* ``ml`` (the §4.1 ablation): a point ``W2``, flat prior; the log-likelihood alone.
* ``augerino`` (Benton et al. 2020): the transforms act on the inputs, a point ``W2``, flat prior; the loss
  ``CE - width_weight * ||eta||_2``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyro.nn import PyroModule

from ..errors import ConfigError
from . import objectives
from .autoguides import AutoW2Guide
from .guides import ClassCholeskyGuide, PointGuide
from .objectives import Objective

POSTERIORS = ("gaussian", "point")
TRANSFORMS_ON = ("weights", "inputs")


@dataclass(frozen=True)
class Method:
    """One way of fitting the output layer and ``eta``.

    Attributes:
        name: the ``--inference`` value.
        summary: one line for ``--help``.
        prior: ``"normal"`` (``N(0, alpha I)``) or ``"flat"`` (improper uniform).
        posterior: ``"gaussian"``: ``q(W2)`` is a Gaussian (the ``estimator`` applies and the posterior
            predictive averages draws); ``"point"``: a point ``W2_hat`` (a ``Delta`` guide).
        transforms_on: ``"weights"`` (the paper's weight-space invariance, where the network allows it) or
            ``"inputs"`` (input augmentation).
        objective: what the weights climb; ``-loss / N`` of a step is its estimate.
        eta_objective: what ``eta`` climbs, when that is not ``objective``.
        width_reward: the loss carries Augerino's ``-width_weight * ||eta||_2``.
    """

    name: str
    summary: str
    prior: str
    posterior: str
    objective: Objective
    transforms_on: str = "weights"
    eta_objective: Objective | None = None
    width_reward: bool = False

    def __post_init__(self) -> None:
        if self.posterior not in POSTERIORS or self.transforms_on not in TRANSFORMS_ON:
            raise ValueError(f"method {self.name!r}: posterior in {POSTERIORS}, transforms_on in {TRANSFORMS_ON}")

    @property
    def bayesian(self) -> bool:
        """``q(W2)`` is a Gaussian."""
        return self.posterior == "gaussian"

    @property
    def eta_climbs(self) -> Objective:
        """The objective whose gradient moves ``eta``."""
        return self.eta_objective or self.objective

    @property
    def reports_elbo(self) -> bool:
        """Whether ``-loss / N`` is a lower bound on ``log p(D | eta) / N``."""
        return self.objective.bounds_evidence

    def estimator(self, requested: str) -> str:
        """The ELBO estimator to use: a point estimate of ``W2`` has nothing to draw per example."""
        return requested if self.bayesian else "shared"

    def build_guide(
        self, num_classes: int, dim: int, init_scale: float, estimator: str, guide: str = "cholesky", alpha: float = 1.0
    ) -> PyroModule:
        """The guide of ``W2`` (``K`` classes, ``D`` features): ``guide``'s family for a Bayesian method
        (``cholesky`` or a Pyro AutoGuide, :mod:`pyroinv.model.autoguides`), a point otherwise."""
        if not self.bayesian:
            return PointGuide(num_classes, dim)
        if guide == "cholesky":
            return ClassCholeskyGuide(num_classes, dim, init_scale=init_scale, estimator=self.estimator(estimator))
        return AutoW2Guide(
            guide, num_classes, dim, alpha=alpha, init_scale=init_scale, estimator=self.estimator(estimator)
        )


#: every method, by its ``--inference`` name
METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method("vi", "Gaussian q(W2) on the ELBO", "normal", "gaussian", objectives.ELBO),
        Method(
            "laplace",
            "point W2 and body on the log joint, eta on the Laplace evidence of W2 (Kronecker-factored "
            "GGN, LILA's method)",
            "normal",
            "point",
            objectives.LOG_JOINT,
            eta_objective=objectives.LAPLACE,
        ),
        Method("map", "point W2 with the prior", "normal", "point", objectives.LOG_JOINT),
        Method("ml", "point W2, plain cross-entropy", "flat", "point", objectives.LOG_LIKELIHOOD),
        Method(
            "augerino",
            "transforms on the inputs, point W2, cross-entropy minus --width-weight * ||eta|| (Benton et al. 2020)",
            "flat",
            "point",
            objectives.AUGERINO,
            transforms_on="inputs",
            width_reward=True,
        ),
    ]
}


def method(name: str) -> Method:
    """The method called ``name``; a one-line :class:`ConfigError` names the choices otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        raise ConfigError(f"--inference {name!r} is not one of {', '.join(METHODS)}") from None
