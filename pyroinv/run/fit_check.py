"""A finished run that fits its training data no better than chance: the one-line warning it gets.

With ``K`` classes a classifier that predicts uniformly has training NLL ``log K`` per image (2.30 for MNIST). A
trained run whose training log-likelihood per image is within :data:`CHANCE_FRACTION` of that has learned almost
nothing. One way this happens with a learned invariance (``docs/results/beyond.md``, the data-efficiency grid): in the
first steps, before the network fits anything, the gradient in ``eta`` is noise that Adam turns into full-size
steps, ``eta`` runs wide (translation beyond the image, scale x2), and the network never fits the transformed
inputs. ``--eta-warmup`` holds ``eta`` while the network fits.
"""

from __future__ import annotations

import math

#: a run warns when its training NLL per image is at least this fraction of ``log K``
CHANCE_FRACTION = 0.9


def chance_fit_warning(
    train_loglik_per_datapoint: float | None,
    num_classes: int,
    learned_invariance: str | None,
) -> str | None:
    """The warning for a run whose training NLL ``-train_loglik_per_datapoint`` is at least
    ``CHANCE_FRACTION * log K``, else ``None``.

    Args:
        train_loglik_per_datapoint: ``(1/N) sum_n E[log p(y_n | x_n)]`` on the training set.
        num_classes: ``K``.
        learned_invariance: the learned invariance in words (``Invariance.describe()``), or ``None`` where ``eta`` was
            fixed or there is no invariance.
    """
    if train_loglik_per_datapoint is None or num_classes < 2 or not math.isfinite(train_loglik_per_datapoint):
        return None
    chance = math.log(num_classes)
    nll = -train_loglik_per_datapoint
    if nll < CHANCE_FRACTION * chance:
        return None
    head = (
        f"the network fits its training data no better than chance (training NLL {nll:.3f} per image; "
        f"predicting every class alike gives log {num_classes} = {chance:.3f})"
    )
    if learned_invariance:
        return (
            f"{head} with the learned invariance {learned_invariance}: if eta ran wide in the first steps, before "
            f"the network fitted anything, train again with --eta-warmup E (eta held for E epochs) or a lower "
            f"--eta-lr"
        )
    return f"{head}: train longer (--epochs, --min-steps) or check the labels"


__all__ = ["CHANCE_FRACTION", "chance_fit_warning"]
