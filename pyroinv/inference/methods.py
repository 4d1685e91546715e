"""Ways of learning the invariance ``eta``, each one object: the registry behind ``--inference``.

A :class:`Method` says which prior ``p(W2)`` the model uses, which guide ``q(W2)`` stands for the output
layer, which feature map carries the transforms, what its objective is called and whether that objective
is a bound on the marginal likelihood. Nothing else in the package branches on the method's name: add a
method by adding one entry to :data:`METHODS`.

* ``vi`` (the paper, §3.6-3.7): ``W2 ~ N(0, alpha I)``, ``q(W2) = prod_c N(mu_c, L_c L_c^T)``; maximise the
  ELBO ``E_q[sum_n log f_hat(x_n)_{y_n}] - KL(q || p) <= log p(D | eta)`` over ``q``, ``W1`` and ``eta``.
* ``map``: a point ``W2`` under the same prior; the log joint ``sum_n log f_hat(x_n)_{y_n} + log p(W2)``.
* ``ml`` (the §4.1 ablation): a point ``W2``, flat prior; the log-likelihood alone.
* ``augerino`` (Benton et al. 2020): the transforms act on the inputs
  (:class:`~pyroinv.baselines.augerino.InputAugmentedFeatures`), a point ``W2``, flat prior; the loss
  ``CE - width_weight * ||eta||_2``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pyro.nn import PyroModule

from ..baselines.augerino import InputAugmentedFeatures
from ..errors import ConfigError
from ..model.autoguides import AutoW2Guide
from ..model.guides import ClassCholeskyGuide, PointGuide
from ..model.networks import InvariantFeatures


@dataclass(frozen=True)
class Method:
    """One way of fitting the output layer and ``eta``.

    Attributes:
        name: the ``--inference`` value.
        summary: one line for ``--help``.
        prior: ``"normal"`` (``N(0, alpha I)``) or ``"flat"`` (improper uniform).
        bayesian: ``q(W2)`` is a Gaussian (the objective is the ELBO, the ``estimator`` applies and the
            posterior predictive averages draws); otherwise a point ``W2_hat`` (a ``Delta`` guide).
        features: the feature map class (weight-space invariance, or input augmentation).
        objective: short name of ``-loss / N`` for the progress line.
        objective_label: the same, for plot axes.
        width_reward: the loss carries Augerino's ``-width_weight * ||eta||_2``.
    """

    name: str
    summary: str
    prior: str
    bayesian: bool
    features: type[InvariantFeatures]
    objective: str
    objective_label: str
    width_reward: bool = False

    @property
    def reports_elbo(self) -> bool:
        """Whether ``-loss / N`` is a lower bound on ``log p(D | eta) / N`` (only for a Gaussian ``q``)."""
        return self.bayesian

    def estimator(self, requested: str) -> str:
        """The ELBO estimator to use: a point estimate of ``W2`` has nothing to draw per example."""
        return requested if self.bayesian else "shared"

    def build_guide(self, num_classes: int, dim: int, init_scale: float, estimator: str, guide: str = "cholesky",
                    alpha: float = 1.0) -> PyroModule:
        """The guide of ``W2`` (``K`` classes, ``D`` features): ``guide``'s family for a Bayesian method
        (``cholesky`` or a Pyro AutoGuide, :mod:`pyroinv.model.autoguides`), a point otherwise."""
        if not self.bayesian:
            return PointGuide(num_classes, dim)
        if guide == "cholesky":
            return ClassCholeskyGuide(num_classes, dim, init_scale=init_scale, estimator=self.estimator(estimator))
        return AutoW2Guide(guide, num_classes, dim, alpha=alpha, init_scale=init_scale,
                           estimator=self.estimator(estimator))


#: every method, by its ``--inference`` name
METHODS: dict[str, Method] = {m.name: m for m in [
    Method("vi", "Gaussian q(W2) on the ELBO", "normal", True, InvariantFeatures, "ELBO/N",
           "ELBO / N (minibatch estimate)"),
    Method("map", "point W2 with the prior", "normal", False, InvariantFeatures, "logjoint/N", "log joint / N"),
    Method("ml", "point W2, plain cross-entropy", "flat", False, InvariantFeatures, "loglik/N", "log-likelihood / N"),
    Method("augerino", "transforms on the inputs, point W2, cross-entropy minus --width-weight * ||eta|| "
           "(Benton et al. 2020)", "flat", False, InputAugmentedFeatures, "loglik+reward/N",
           "log-likelihood / N + width reward", width_reward=True),
]}


def method(name: str) -> Method:
    """The method called ``name``; a one-line :class:`ConfigError` names the choices otherwise."""
    try:
        return METHODS[name]
    except KeyError:
        raise ConfigError(f"--inference {name!r} is not one of {', '.join(METHODS)}") from None
