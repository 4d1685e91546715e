"""Evaluation: posterior-predictive accuracy and NLL, and the ELBO per data point.

The posterior predictive averages probabilities over L draws ``W2 ~ q`` and S
transforms (one set of transforms, drawn once, so the warped weight bank is
computed once for the whole data set)::

    p(y | x) ~= (1 / L) sum_l f_hat(x; W2^(l))_y,   f_hat the transform average of model.average.

:func:`posterior_predictive` makes the one pass over the test set; the test metrics of a run and its
ArviZ file (:mod:`pyroinv.inference.arviz_export`) are both read off its result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..errors import ConfigError
from ..model.bnn import InvariantBNN, mc_log_predictive


def posterior_draws(guide, num_draws: int) -> torch.Tensor:
    """``(L, K, D)`` draws of ``W2`` from the guide (a point guide gives one)."""
    return guide.posterior_sample(num_draws)


@torch.no_grad()
def predictive_log_probs(
    model: InvariantBNN, W2: torch.Tensor, x: torch.Tensor, T: torch.Tensor | None = None, batch_size: int = 500
) -> torch.Tensor:
    """``log p(y | x)`` for every class, ``(N, K)``, under draws ``W2`` ``(L, K, D)``."""
    return model.chunked_log_predictive(x, W2, T, batch_size)


@torch.no_grad()
def classification_metrics(log_probs: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Accuracy and mean negative log-likelihood of predictive log-probabilities."""
    acc = (log_probs.argmax(-1) == y).float().mean().item()
    nll = -log_probs.gather(1, y.unsqueeze(1)).mean().item()
    return {"accuracy": acc, "nll": nll}


@torch.no_grad()
def most_confused(log_probs: torch.Tensor, y: torch.Tensor, top: int = 5) -> list[tuple[int, int, int]]:
    """The ``top`` most frequent errors of the predictive's choice ``argmax_k log p(k | x)``, as
    ``(true class, predicted class, count)``, most frequent first: the largest off-diagonal entries of the confusion
    matrix ``C[t, p] = #{n : y_n = t, argmax = p}``. Which pairs an invariance makes hard to tell apart (a 6 turned
    by 180 degrees is a 9) shows here."""
    K = log_probs.shape[-1]
    pred = log_probs.argmax(-1).cpu()
    C = torch.bincount(y.cpu() * K + pred, minlength=K * K).view(K, K)
    C.fill_diagonal_(0)
    counts, idx = C.flatten().topk(min(top, K * K))
    return [(int(i) // K, int(i) % K, int(c)) for c, i in zip(counts, idx) if c > 0]


@dataclass
class PosteriorPredictive:
    """One pass of the posterior predictive over a test set (tensors on the CPU).

    Attributes:
        W2: ``(L, K, D)``, the draws used.
        per_draw: ``(L, N, K)``, ``log f_hat(x_n; W2^(l))`` of every draw.
        log_probs: ``(N, K)``, the posterior predictive ``log (1/L) sum_l f_hat(x_n; W2^(l))``.
        y: ``(N,)``, the labels.
    """

    W2: torch.Tensor
    per_draw: torch.Tensor
    log_probs: torch.Tensor
    y: torch.Tensor

    def metrics(self) -> dict[str, float]:
        """Test accuracy and NLL of the predictive."""
        return classification_metrics(self.log_probs, self.y)

    def pointwise_log_likelihood(self) -> torch.Tensor:
        """``(L, N)``: ``log p(y_n | x_n, W2^(l))`` of the true labels."""
        return self.per_draw.gather(2, self.y.view(1, -1, 1).expand(self.per_draw.shape[0], -1, 1))[..., 0]


@torch.no_grad()
def per_draw_log_probs(
    model: InvariantBNN,
    W2: torch.Tensor,
    x: torch.Tensor,
    T: torch.Tensor | None = None,
    y: torch.Tensor | None = None,
    batch_size: int = 500,
) -> torch.Tensor:
    """``log f_hat(x_n; W2^(l))`` of every draw ``l`` of ``W2`` ``(L, K, D)``, on the CPU: ``(L, N, K)``, or with
    labels ``y`` the true class's only, ``(L, N)``. One set of S transforms (``T``, or drawn once); the features
    of each batch are computed once for all draws (and averaged once, under ``average="logits"``)."""
    T = model.sample_transforms() if T is None else T
    bank = model.features.weight_bank(T)
    logits = model.average == "logits"
    out = []
    for i in range(0, x.shape[0], batch_size):
        feats = model.features.apply_bank(x[i : i + batch_size], bank)  # (S, B, D)
        if logits:  # W2 is linear: average the features once, not once per draw (one "transform" left)
            feats = feats.mean(0, keepdim=True)
        logp = torch.stack([mc_log_predictive(feats, w, "probs" if logits else model.average) for w in W2])  # (L, B, K)
        if y is not None:
            logp = logp.gather(2, y[i : i + batch_size].view(1, -1, 1).expand(logp.shape[0], -1, 1))[..., 0]
        out.append(logp.cpu())
    return torch.cat(out, 1)


@torch.no_grad()
def posterior_predictive(
    model: InvariantBNN, guide, x: torch.Tensor, y: torch.Tensor, draws: int = 8, batch_size: int = 500
) -> PosteriorPredictive:
    """``draws`` draws of ``W2`` (one for a point guide), then one set of S transforms, over ``(x, y)``."""
    W2 = posterior_draws(guide, draws)
    per = per_draw_log_probs(model, W2, x, batch_size=batch_size)  # (L, N, K)
    return PosteriorPredictive(W2.cpu(), per, torch.logsumexp(per, 0) - math.log(W2.shape[0]), y.cpu())


@torch.no_grad()
def elbo_per_datapoint(
    model: InvariantBNN,
    guide,
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int = 500,
    T: torch.Tensor | None = None,
    num_data: int | None = None,
    draws: int = 1,
) -> dict[str, float]:
    """ELBO / N on ``(x, y)``: ``(sum_n E_q[log f_hat(x_n)_{y_n}] - KL(q || p)) / N``.

    One fresh draw of ``W2`` per batch and one set of S transforms per pass (each term stays
    unbiased); ``draws`` passes are averaged (fresh transforms each unless ``T`` is given) to
    lower the Monte-Carlo error of the log-likelihood term. For a point guide the KL is replaced
    by ``-log p(W2_hat)`` (MAP; zero under the flat prior of maximum likelihood), and the value is
    the (penalised) log-likelihood per data point, not a bound.

    ``num_data``: the size N of the training set the model was fitted to, when ``x`` is a
    subset of it (the log-likelihood is then averaged over the subset, the KL divided by N).
    """
    n = x.shape[0]
    loglik = 0.0
    for _ in range(draws):
        bank = model.features.weight_bank(model.sample_transforms() if T is None else T)
        for i in range(0, n, batch_size):
            W2 = posterior_draws(guide, 1)[0]
            logp = mc_log_predictive(model.features.apply_bank(x[i : i + batch_size], bank), W2, model.average)
            loglik += logp.gather(1, y[i : i + batch_size].unsqueeze(1)).sum().item() / draws
    penalty = guide.regulariser(model.prior(device=x.device)).item()
    N = num_data or n
    return {
        "elbo_per_datapoint": loglik / n - penalty / N,
        "loglik_per_datapoint": loglik / n,
        "kl_per_datapoint": penalty / N,
    }


@torch.no_grad()
def unit_activity(model: InvariantBNN, x: torch.Tensor, batch_size: int = 500) -> tuple[torch.Tensor, torch.Tensor]:
    """``(active, power)``, each ``(H,)`` over the output layer's inputs (the last hidden layer's units; the constant
    feature left out), on the images ``x`` under one set of S transforms (drawn as for a prediction): ``active``,
    whether the unit is non-zero on some image under some transform; ``power``, the mean of ``phi_h^2`` over the
    images and transforms."""
    if x.shape[0] == 0:
        raise ValueError("no images")
    bank = model.features.weight_bank(model.sample_transforms())
    active: torch.Tensor | None = None
    power: torch.Tensor | None = None
    rows = 0
    for i in range(0, x.shape[0], batch_size):
        phi = model.features.apply_bank(x[i : i + batch_size], bank)[..., :-1].flatten(0, -2).float()
        on, sq = (phi != 0).any(0), phi.pow(2).sum(0)
        active, power = (on, sq) if active is None or power is None else (active | on, power + sq)
        rows += phi.shape[0]
    assert active is not None and power is not None
    return active, power / rows


@torch.no_grad()
def active_units(model: InvariantBNN, x: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """``(H,)`` booleans: which of the output layer's inputs are non-zero for some image of ``x`` under some one of
    S transforms (:func:`unit_activity`)."""
    return unit_activity(model, x, batch_size)[0]


@torch.no_grad()
def inactive_units(model: InvariantBNN, x: torch.Tensor, batch_size: int = 500) -> float:
    """The fraction of the output layer's inputs that are zero for every image of ``x`` under every one of S
    transforms (:func:`active_units`): units that no prediction on these images reads. A ReLU unit whose
    pre-activation is negative on all the data gets no gradient and stays so; for cosine features (``rff``) the
    fraction is 0."""
    return 1.0 - active_units(model, x, batch_size).float().mean().item()


@torch.no_grad()
def units_under_q(model: InvariantBNN, guide, x: torch.Tensor, draws: int = 256) -> dict[str, float | None]:
    """Where q puts the output weights of the live and of the dead units, against the prior ``N(0, alpha)``.

    For unit ``h`` and class ``c``, ``m_ch`` and ``s_ch`` are the mean and standard deviation of ``W2[c, h]`` under
    q (estimated from ``draws`` draws, so that any guide can be read; a point estimate has ``s = 0``). Returned, for
    the live units (:func:`unit_activity` on ``x``) and for the dead ones: ``*_mean_rms``, the root mean square of
    ``m_ch`` over their ``(c, h)``, and ``*_sd_rms``, that of ``s_ch``, each divided by the prior's ``sqrt(alpha)``
    (``None`` where there is no such unit, or under the flat prior). A dead unit's weights do not enter the
    likelihood, so the bound's optimum for them is the prior itself (mean 0, sd 1 in these units), at no KL cost;
    a live unit whose weights q leaves near the prior adds only noise, ``s_ch^2 phi_h^2``, to the logits.
    ``units_for_99pct_power``: the smallest share of the units whose ``mean phi_h^2`` (over the images and
    transforms) sums to 99% of the layer's, which counts the units the bound has shrunk towards zero without
    switching off."""
    if draws < 2:
        raise ConfigError(f"units_under_q needs at least 2 draws of W2 to estimate q's sd, got {draws}; use draws=256")
    live, power = unit_activity(model, x)
    w = posterior_draws(guide, draws)[..., :-1].float()  # (L, K, H): the constant feature's weights left out
    mean = w.mean(0)
    sd = w.std(0) if w.shape[0] > 1 else torch.zeros_like(mean)  # a point estimate is one draw
    scale = math.sqrt(model.alpha) if model.prior_kind != "flat" else None
    share = power.sort(descending=True).values.cumsum(0) / power.sum().clamp_min(1e-30)
    out: dict[str, float | None] = {
        "inactive_units": 1.0 - live.float().mean().item(),
        "units_for_99pct_power": (int((share < 0.99).sum()) + 1) / power.numel(),
        "draws": draws,
    }
    for name, units in (("live", live), ("dead", ~live)):
        out[f"{name}_mean_rms"] = out[f"{name}_sd_rms"] = None
        if scale is not None and bool(units.any()):
            out[f"{name}_mean_rms"] = mean[:, units].pow(2).mean().sqrt().item() / scale
            out[f"{name}_sd_rms"] = sd[:, units].pow(2).mean().sqrt().item() / scale
    return out


@torch.no_grad()
def evaluate(
    model: InvariantBNN, guide, x_test: torch.Tensor, y_test: torch.Tensor, draws: int = 8, batch_size: int = 500
) -> dict[str, float]:
    """Test accuracy and NLL of the posterior predictive (``draws`` W2 draws x S transforms)."""
    return posterior_predictive(model, guide, x_test, y_test, draws, batch_size).metrics()


__all__ = [
    "PosteriorPredictive",
    "most_confused",
    "per_draw_log_probs",
    "posterior_draws",
    "posterior_predictive",
    "predictive_log_probs",
    "classification_metrics",
    "elbo_per_datapoint",
    "evaluate",
    "active_units",
    "inactive_units",
    "unit_activity",
    "units_under_q",
]
