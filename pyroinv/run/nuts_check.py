"""How good is q? NUTS on ``W2`` as the gold standard, and the ELBO against estimates of ``log p(D | eta)``.

On a problem small enough for Pyro's NUTS: the random-Fourier-feature network (``W1`` fixed), ``eta`` fixed, the
S transforms on the deterministic grid and the logits averaged (Appendix A), the model's likelihood depends on
``W2`` only through the averaged features ``phi_bar(x) = (1/S) sum_i phi(W1 T_i x)``:

    log p(D | W2) = sum_n log softmax(W2 phi_bar(x_n))_{y_n},   W2 ~ N(0, alpha I),

a multinomial logistic regression whose posterior NUTS samples exactly (up to Monte-Carlo error). For each ``eta``:

* **q**: the package's trainer fits the Cholesky guide (``Trainer`` with ``fixed_eta``); its ELBO is computed with
  the full data set per draw, ``E_q[log p(D | W2)] - KL(q || p)`` (M draws, exact KL);
* **NUTS**: Pyro's ``NUTS`` on the potential ``-log p(D | W2) - log p(W2)``, started at the MAP;
* **log p(D | eta)**, two estimates: the Laplace approximation at the MAP ``W*`` with the exact Hessian
  ``H = sum_n (diag p_n - p_n p_n^T) (x) phi_bar_n phi_bar_n^T + I / alpha`` (the log-likelihood is concave in
  ``W2``, so ``W*`` is unique), ``log p(D | W*) + log p(W*) + (KD/2) log 2 pi - (1/2) log |H|``; and importance
  sampling with q as the proposal, ``log (1/M) sum_m p(D, W_m) / q(W_m)``, a stochastic lower bound that tightens
  towards ``log p(D | eta)`` as q approaches the posterior (and is above the ELBO);
* the two posterior predictives on the test images (accuracy, NLL), and their logits ``W2 phi_bar(x)``: the
  correlation of the posterior means over test points and classes, and the mean ratio of q's variance to NUTS's.

``scripts/nuts_check.py`` runs it and prints the table.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from ..config import Config
from ..data import load_dataset
from ..inference.arviz_export import import_arviz
from ..inference.laplace import averaged_features as model_averaged_features
from ..inference.laplace import laplace_log_evidence
from ..inference.train import Trainer


@dataclass
class NutsCheck:
    """One fixed ``eta``: the trained q against NUTS (per data point where marked ``_n``)."""

    eta_deg: float
    elbo_n: float
    laplace_log_z_n: float
    is_log_z_n: float
    q_accuracy: float
    nuts_accuracy: float
    q_nll: float
    nuts_nll: float
    logit_mean_corr: float
    logit_var_ratio: float
    nuts_min_ess: float
    nuts_seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def averaged_features(trainer: Trainer, x: torch.Tensor) -> torch.Tensor:
    """``phi_bar(x)``, ``(N, D)``: the features averaged over the model's S (deterministic) transforms."""
    return model_averaged_features(trainer.model, x)


def log_joint(W2: torch.Tensor, phi: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """``log p(D | W2) + log p(W2)`` for ``W2`` ``(..., K, D)``; batch dimensions are kept."""
    logp = torch.log_softmax(torch.matmul(phi, W2.transpose(-1, -2)), -1)  # (..., N, K)
    loglik = logp.gather(-1, y.expand(*logp.shape[:-2], -1).unsqueeze(-1)).squeeze(-1).sum(-1)
    d = W2.shape[-1] * W2.shape[-2]
    return loglik - 0.5 * W2.pow(2).sum((-1, -2)) / alpha - 0.5 * d * math.log(2 * math.pi * alpha)


def check_eta(
    cfg: Config, data, eta_deg: float, draws: int = 1000, nuts_samples: int = 300, nuts_warmup: int = 300, seed: int = 0
) -> NutsCheck:
    """Train q at ``eta_deg`` (``cfg`` with ``fixed_eta``), run NUTS, and compare (see the module docstring)."""
    import pyro
    from pyro.infer.mcmc import MCMC, NUTS

    run_cfg = Config(**{**cfg.to_dict(), "fixed_eta": float(eta_deg)}).validate()
    trainer = Trainer(run_cfg, data)
    for _ in trainer.steps():
        pass
    x, y = trainer.x_train, trainer.y_train
    x_test, y_test = trainer.x_test, trainer.y_test
    phi, phi_test = averaged_features(trainer, x), averaged_features(trainer, x_test)
    alpha, N = run_cfg.alpha, x.shape[0]
    prior = trainer.model.prior()
    with torch.no_grad():
        q = trainer.guide.distribution()
        W_q = q.sample((draws,))  # (M, K, D)
        loglik = (
            log_joint(W_q, phi, y, alpha)
            + 0.5 * W_q.pow(2).sum((-1, -2)) / alpha
            + 0.5 * W_q[0].numel() * math.log(2 * math.pi * alpha)
        )  # log p(D | W)
        kl = float(trainer.guide.regulariser(prior))
        elbo = float(loglik.mean()) - kl
        log_w = log_joint(W_q, phi, y, alpha) - q.log_prob(W_q).sum(-1)
        is_log_z = float(torch.logsumexp(log_w, 0) - math.log(draws))
    W_map, lap_log_z = laplace_log_evidence(phi, y, W_q.shape[1], alpha)

    def potential(params: dict) -> torch.Tensor:
        return -log_joint(params["W2"], phi, y, alpha)

    pyro.set_rng_seed(seed)
    t0 = time.perf_counter()
    mcmc = MCMC(
        NUTS(potential_fn=potential, max_tree_depth=8),
        num_samples=nuts_samples,
        warmup_steps=nuts_warmup,
        initial_params={"W2": W_map.clone()},
        disable_progbar=True,
    )
    mcmc.run()
    nuts_seconds = time.perf_counter() - t0
    W_nuts = mcmc.get_samples()["W2"]  # (L, K, D)
    az = import_arviz()
    ess = az.ess(az.convert_to_dataset({"W2": W_nuts.unsqueeze(0).numpy()}))["W2"].min()  # bulk ESS, one chain

    with torch.no_grad():

        def predictive(W: torch.Tensor) -> tuple[float, float, torch.Tensor]:
            logits = torch.matmul(phi_test, W.transpose(-1, -2))  # (L, N, K)
            logp = torch.logsumexp(torch.log_softmax(logits, -1), 0) - math.log(W.shape[0])
            acc = float((logp.argmax(-1) == y_test).float().mean())
            nll = float(-logp.gather(1, y_test.unsqueeze(1)).mean())
            return acc, nll, logits

        q_acc, q_nll, q_logits = predictive(W_q)
        n_acc, n_nll, n_logits = predictive(W_nuts)
        mq, mn = q_logits.mean(0).flatten(), n_logits.mean(0).flatten()
        corr = float(torch.corrcoef(torch.stack([mq, mn]))[0, 1])
        ratio = float((q_logits.var(0) / n_logits.var(0).clamp_min(1e-12)).mean())
    return NutsCheck(
        eta_deg,
        elbo / N,
        lap_log_z / N,
        is_log_z / N,
        q_acc,
        n_acc,
        q_nll,
        n_nll,
        corr,
        ratio,
        float(ess.min()),
        nuts_seconds,
    )


def nuts_table(rows: Sequence[NutsCheck]) -> str:
    """The checks as a Markdown table."""
    lines = [
        "| η_rot | ELBO / N | log Z / N, Laplace | log Z / N, IS with q | test acc. q / NUTS | test NLL q / NUTS | "
        "logit means, corr. | logit var. q / NUTS | NUTS min ESS |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.eta_deg:g}° | {r.elbo_n:.4f} | {r.laplace_log_z_n:.4f} | {r.is_log_z_n:.4f} | "
        f"{100 * r.q_accuracy:.1f}% / {100 * r.nuts_accuracy:.1f}% | {r.q_nll:.3f} / {r.nuts_nll:.3f} | "
        f"{r.logit_mean_corr:.3f} | {r.logit_var_ratio:.2f} | {r.nuts_min_ess:.0f} |"
        for r in rows
    ]
    return "\n".join(lines)


def run(
    etas: Sequence[float],
    train_size: int = 1000,
    test_size: int = 1000,
    hidden: int = 64,
    samples: int = 16,
    epochs: int = 100,
    draws: int = 1000,
    nuts_samples: int = 300,
    nuts_warmup: int = 300,
    seed: int = 0,
    dataset: str = "mnist-rot",
    report=print,
) -> list[NutsCheck]:
    """Every ``eta`` of ``etas`` (degrees) on one data subset; ``report`` gets each row's line as it finishes."""
    cfg = Config(
        dataset=dataset,
        network="rff",
        hidden=hidden,
        samples=samples,
        sampling="deterministic",
        train_size=train_size,
        test_size=test_size,
        epochs=epochs,
        seed=seed,
        fixed_eta=0.0,
    ).validate()
    data = load_dataset(dataset, train_size=train_size, test_size=test_size, seed=seed)
    rows = []
    for eta in etas:
        row = check_eta(cfg, data, eta, draws, nuts_samples, nuts_warmup, seed)
        rows.append(row)
        report(
            f"η {eta:g}°: ELBO/N {row.elbo_n:.4f}, Laplace {row.laplace_log_z_n:.4f}, IS {row.is_log_z_n:.4f}; "
            f"acc. q {100 * row.q_accuracy:.1f}% NUTS {100 * row.nuts_accuracy:.1f}% ({row.nuts_seconds:.0f} s)"
        )
    return rows
