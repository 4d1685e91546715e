"""The Laplace approximation of the evidence ``log p(D | eta)`` over the output layer ``W2`` (LILA's method).

With the logits averaged over the transforms (Appendix A), ``f(x) = W2 phi_bar(x)`` is linear in ``W2``, so the
Hessian of the negative log-likelihood in ``vec(W2)`` (``K x D``, row-major) is exactly the generalised
Gauss-Newton (GGN) matrix::

    H_lik = sum_n Lambda_n (x) phi_bar_n phi_bar_n^T,     Lambda_n = diag(p_n) - p_n p_n^T,

and with the prior ``W2 ~ N(0, alpha I)`` the posterior precision is ``P = H_lik + I / alpha``. The Laplace
approximation at the mode ``W2_hat`` is::

    log p(D | eta) ~ log p(D | W2_hat) - ||W2_hat||^2 / (2 alpha) - 1/2 log det(alpha P).

Two curvature structures:

* ``full``: ``P`` exactly, ``(KD x KD)``, a Cholesky log-determinant (:func:`full_ggn`);
* ``kron``: the Kronecker factorisation of laplace-torch and LILA, ``H_lik ~ G (x) A / N`` with
  ``G = sum_n Lambda_n`` and ``A = sum_n phi_bar_n phi_bar_n^T``, so that with the eigenvalues ``g_i`` of ``G``
  and ``a_j`` of ``A``, ``log det P = sum_ij log(g_i a_j / N + 1 / alpha)`` (:func:`kron_logdet`).

Learning ``eta`` (:class:`LaplaceEtaGradient`): as in LILA, the weights (``W2_hat`` and the body) follow the log
joint and ``eta`` the Laplace evidence at the current weights, which are held fixed in its gradient (no implicit
differentiation of the mode). The curvature is refreshed at an interval on (a subset of) the training set, without
autograd, and between refreshes ``eta``'s gradient of ``-1/2 log det(alpha P)`` is the first-order one at the
refresh, taken through the training batch's own features::

    d log det P = tr(M_A dA) + tr(M_G dG),
    M_A = U diag(sum_i (g_i / N) / (g_i a_j / N + 1/alpha)) U^T,  M_G = V diag(sum_j (a_j / N) / (...)) V^T,

with ``dA`` and ``dG`` the batch's contributions scaled by ``N / B`` (an unbiased estimate of the full data's).
laplace-torch (``laplace.Laplace(..., subset_of_weights="all", hessian_structure="kron" | "full")`` on a linear layer
over the averaged features) gives the same value at fixed ``eta`` to seven digits (``tests/inference/test_laplace.py``
checks both structures); its release cannot differentiate the evidence in ``eta`` through the curvature (LILA used
a fork of it and of ASDL for that), so the package computes the value and the gradient itself from the formulas
above, which also spares a run the import of laplace-torch's backends. LILA differs in two places: its prior precision
is learned with ``eta`` (here ``alpha`` is the paper's fixed 1), and
its Laplace covers every layer (here the output layer, the part of the network that the ELBO treats as random);
:mod:`pyroinv.inference.laplace_layers` (``--laplace-layers all``) takes both from LILA for the body's layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..model.bnn import InvariantBNN

#: training examples on which the curvature is refreshed (all of them when the training set is smaller)
REFRESH_SIZE = 4000
#: the exact (``full``) evidence is computed at the end of a run up to this many output weights ``K D``
FULL_MAX = 6000
STRUCTURES = ("kron", "full")


@torch.no_grad()
def averaged_features(
    model: InvariantBNN, x: torch.Tensor, T: torch.Tensor | None = None, batch_size: int = 500
) -> torch.Tensor:
    """``phi_bar(x)``, ``(N, D)``: the features averaged over the model's S transforms (drawn once, or ``T``)."""
    bank = model.features.weight_bank(model.sample_transforms() if T is None else T)
    return torch.cat(
        [model.features.apply_bank(x[i : i + batch_size], bank).mean(0) for i in range(0, x.shape[0], batch_size)]
    )


def log_likelihood(phi: torch.Tensor, y: torch.Tensor, W2: torch.Tensor) -> torch.Tensor:
    """``sum_n log softmax(W2 phi_bar_n)_{y_n}``."""
    return torch.log_softmax(phi @ W2.T, -1).gather(-1, y.unsqueeze(-1)).sum()


def symmetric_eigh(M: torch.Tensor, values_only: bool = False):
    """``torch.linalg.eigh`` (or ``eigvalsh``) of a symmetric positive semi-definite factor, in float64: a factor of
    fewer examples than features (312 images, 513 features) has hundreds of zero eigenvalues, on which float32's
    solver can fail to converge. Should float64's fail too, it is retried with a jitter of 1e-10 of the mean
    diagonal (far below the prior's precision, which every eigenvalue is added to)."""
    M = M.double()
    fn = torch.linalg.eigvalsh if values_only else torch.linalg.eigh
    try:
        return fn(M)
    except torch.linalg.LinAlgError:
        jitter = 1e-10 * float(M.diagonal().abs().mean()) + 1e-300
        return fn(M + jitter * torch.eye(M.shape[0], dtype=M.dtype, device=M.device))


def kron_factors(phi: torch.Tensor, probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``A = sum_n phi_n phi_n^T`` ``(D, D)`` and ``G = sum_n diag(p_n) - p_n p_n^T`` ``(K, K)``."""
    return phi.T @ phi, torch.diag(probs.sum(0)) - probs.T @ probs


def kron_logdet(A: torch.Tensor, G: torch.Tensor, num_data: float, alpha: float) -> torch.Tensor:
    """``log det(alpha P)`` with ``P = G (x) A / N + I / alpha`` (differentiable through ``A`` and ``G``)."""
    a = symmetric_eigh(A, values_only=True).clamp(min=0)
    g = symmetric_eigh(G, values_only=True).clamp(min=0)
    return torch.log1p(alpha * torch.outer(g, a) / num_data).sum().to(A.dtype)


def full_ggn(phi: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """``H_lik = sum_n Lambda_n (x) phi_n phi_n^T``, ``(KD, KD)``: ``blockdiag_k(Phi^T diag(p_k) Phi) - Psi^T Psi``
    with ``Psi = [diag(p_1) Phi, ..., diag(p_K) Phi]``."""
    N, D = phi.shape
    K = probs.shape[1]
    H = phi.new_zeros(K * D, K * D)
    for i in range(0, N, 1000):  # Psi a thousand rows at a time
        psi = (probs[i : i + 1000].unsqueeze(2) * phi[i : i + 1000].unsqueeze(1)).reshape(-1, K * D)  # (n, K D)
        H -= psi.T @ psi
    for k in range(K):
        H[k * D : (k + 1) * D, k * D : (k + 1) * D] += (phi * probs[:, k : k + 1]).T @ phi
    return H


def full_logdet(phi: torch.Tensor, probs: torch.Tensor, alpha: float) -> torch.Tensor:
    """``log det(alpha P) = log det(alpha H_lik + I)`` exactly (Cholesky)."""
    H = alpha * full_ggn(phi, probs)
    H.diagonal().add_(1.0)
    return 2 * torch.linalg.cholesky(H).diagonal().log().sum()


def log_evidence(
    phi: torch.Tensor,
    y: torch.Tensor,
    W2: torch.Tensor,
    alpha: float,
    structure: str = "kron",
    num_data: int | None = None,
) -> torch.Tensor:
    """The Laplace estimate of ``log p(D | eta)`` at ``W2`` (the mode, for the estimate to mean what it says).

    ``num_data``: the training set's size when ``phi``/``y`` are a subset of it (the log-likelihood and the
    curvature are scaled by ``N / n``; ``kron`` only)."""
    if structure not in STRUCTURES:
        raise ValueError(f"unknown structure {structure!r}; choose one of {', '.join(STRUCTURES)}")
    n = phi.shape[0]
    N = num_data or n
    probs = torch.softmax(phi @ W2.T, -1)
    penalty = 0.5 * W2.pow(2).sum() / alpha
    if structure == "full":
        if N != n:
            raise ValueError("the full curvature is computed on the whole training set; pass num_data=None")
        return log_likelihood(phi, y, W2) - penalty - 0.5 * full_logdet(phi, probs, alpha)
    A, G = kron_factors(phi, probs)
    return (N / n) * log_likelihood(phi, y, W2) - penalty - 0.5 * kron_logdet(A * (N / n), G * (N / n), N, alpha)


def map_w2(
    phi: torch.Tensor,
    y: torch.Tensor,
    num_classes: int,
    alpha: float,
    iters: int = 200,
    init: torch.Tensor | None = None,
) -> torch.Tensor:
    """The mode ``W2_hat`` of ``log p(D | W2) + log p(W2)`` (concave: unique), by L-BFGS in float64."""
    phi = phi.double().detach()
    W = (
        torch.zeros(num_classes, phi.shape[1], dtype=torch.float64, device=phi.device)
        if init is None
        else init.detach().double().clone()
    )
    W.requires_grad_(True)
    opt = torch.optim.LBFGS(
        [W], max_iter=iters, tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe"
    )

    def closure():
        opt.zero_grad()
        loss = -(log_likelihood(phi, y, W) - 0.5 * W.pow(2).sum() / alpha)
        loss.backward()
        return loss

    with torch.enable_grad():  # L-BFGS needs autograd, also when called under no_grad
        opt.step(closure)
    return W.detach().to(torch.float32)


@torch.no_grad()
def importance_log_evidence(
    phi: torch.Tensor,
    y: torch.Tensor,
    W2: torch.Tensor,
    alpha: float,
    draws: int = 1000,
    seed: int = 0,
    batch: int = 25,
) -> dict[str, float]:
    """``log p(D | eta)`` by importance sampling, the Laplace posterior ``N(W2_hat, P^-1)`` (exact ``P``) as the
    proposal: a check of the Laplace estimate that does not assume the posterior is Gaussian::

        log p(D | eta) >=~ log (1/M) sum_m p(D | W_m) p(W_m) / N(W_m; W2_hat, P^-1),   W_m ~ N(W2_hat, P^-1),

    a stochastic lower bound (Jensen) that is exact as ``M`` grows. Returns the estimate per data point
    (``importance_per_datapoint``), the weights' effective sample size (``importance_ess``: near ``M`` when the
    Laplace posterior is the posterior; near 1 when the estimate rests on a few draws) and the standard deviation
    of the log weights per data point (``importance_log_weight_sd_per_datapoint``: the scale on which the proposal
    and the posterior differ; with a small ESS the estimate is trustworthy to about this much).
    ``W2`` must be the mode (:func:`map_w2`); float64 throughout."""
    phi, W2 = phi.double(), W2.double()
    K, D = W2.shape
    P = full_ggn(phi, torch.softmax(phi @ W2.T, -1))
    P.diagonal().add_(1.0 / alpha)  # H_lik + I / alpha
    L = torch.linalg.cholesky(P)
    half_logdet = L.diagonal().log().sum()
    gen = torch.Generator(device="cpu").manual_seed(seed)
    log_ws: list[torch.Tensor] = []
    for start in range(0, draws, batch):
        z = torch.randn(min(batch, draws - start), K * D, generator=gen, dtype=torch.float64).to(phi.device)
        # W = W2_hat + L^-T z has covariance P^-1 (P = L L^T)
        W = W2 + torch.linalg.solve_triangular(L.T, z.T, upper=True).T.reshape(-1, K, D)
        loglik = (
            torch.log_softmax(torch.einsum("nd,mkd->mnk", phi, W), -1)
            .gather(-1, y.expand(W.shape[0], -1).unsqueeze(-1))
            .sum((1, 2))
        )
        log_prior = -0.5 * W.pow(2).sum((1, 2)) / alpha - 0.5 * K * D * math.log(2 * math.pi * alpha)
        log_q = -0.5 * z.pow(2).sum(1) + half_logdet - 0.5 * K * D * math.log(2 * math.pi)
        log_ws.append(loglik + log_prior - log_q)
    log_w = torch.cat(log_ws)
    weights = torch.softmax(log_w, 0)
    estimate = torch.logsumexp(log_w, 0) - math.log(draws)
    N = phi.shape[0]
    return {
        "importance_per_datapoint": float(estimate) / N,
        "importance_ess": float(1 / weights.pow(2).sum()),
        "importance_log_weight_sd_per_datapoint": float(log_w.std()) / N,
    }


def laplace_log_evidence(
    phi: torch.Tensor, y: torch.Tensor, num_classes: int, alpha: float, iters: int = 200, structure: str = "full"
) -> tuple[torch.Tensor, float]:
    """The mode ``W2_hat`` (L-BFGS) and the Laplace estimate of ``log p(D | eta)`` at fixed features ``phi``."""
    W = map_w2(phi, y, num_classes, alpha, iters)
    with torch.no_grad():
        return W, float(log_evidence(phi.double(), y, W.double(), alpha, structure))


def w2_at_mode(
    model: InvariantBNN, x: torch.Tensor, y: torch.Tensor, alpha: float, init: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The averaged features ``phi_bar`` of a trained network (its body and ``eta`` as they are) and the mode
    ``W2_hat`` on them (L-BFGS from ``init``), both in float64."""
    phi = averaged_features(model, x).double()
    return phi, map_w2(phi, y, model.num_classes, alpha, init=init).double()


def evidence_at_mode(
    model: InvariantBNN,
    x: torch.Tensor,
    y: torch.Tensor,
    alpha: float,
    init: torch.Tensor | None = None,
    mode: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict[str, float | None]:
    """The Laplace estimates of ``log p(D | eta) / N`` of a trained network: its body and ``eta`` as they are,
    ``W2`` at its mode (:func:`w2_at_mode`, or ``mode`` when already found), the Kronecker-factored curvature
    (``laplace_per_datapoint``) and, up to :data:`FULL_MAX` output weights, the exact one
    (``laplace_full_per_datapoint``, else ``None``)."""
    phi, W = mode if mode is not None else w2_at_mode(model, x, y, alpha, init)
    N, D = phi.shape
    with torch.no_grad():
        kron = float(log_evidence(phi, y, W, alpha, "kron")) / N
        full = float(log_evidence(phi, y, W, alpha, "full")) / N if model.num_classes * D <= FULL_MAX else None
    return {"laplace_per_datapoint": kron, "laplace_full_per_datapoint": full}


@dataclass
class KronOccam:
    """What a refresh keeps of one layer's Kronecker-factored Occam term ``1/2 log det(P / delta)``: its gradients
    in the factors (``M_A``, ``M_G``), its value ``logdet`` (float64), the prior precision ``delta`` it used and the
    layer's squared norm (``None`` when the precision was fixed)."""

    M_A: torch.Tensor
    M_G: torch.Tensor
    logdet: torch.Tensor
    precision: float
    sq_norm: float | None = None


def mackay_precision(
    a: torch.Tensor, g: torch.Tensor, num_data: float, sq_norm: float, precision: float, iterations: int = 20
) -> float:
    """The evidence's fixed point in a layer's prior precision (MacKay): ``delta = gamma / ||theta||^2`` with
    ``gamma = sum_ij lambda_ij / (lambda_ij + delta)`` its effective number of parameters, ``lambda_ij = g_i a_j /
    N`` (``iterations`` steps from ``precision``)."""
    lam = torch.outer(g, a) / num_data
    if not bool((lam > 0).any()):  # no curvature yet (W2 = 0 at the start): nothing to learn from
        return precision
    for _ in range(iterations):
        precision = max(float((lam / (lam + precision)).sum()) / max(sq_norm, 1e-12), 1e-8)
    return precision


def kron_occam_factors(
    A: torch.Tensor,
    G: torch.Tensor,
    num_data: float,
    alpha: float | None,
    sq_norm: float | None = None,
    precision: float = 1.0,
) -> KronOccam:
    """``log det(P / delta) = sum_ij log(1 + g_i a_j / (N delta))`` for ``P = G (x) A / N + delta I`` and its
    first-order gradients ``d log det = tr(M_A dA) + tr(M_G dG)``::

        M_A = U diag(sum_i (g_i / N) / (g_i a_j / N + delta)) U^T,  M_G = V diag(sum_j (a_j / N) / (...)) V^T.

    ``alpha``: the prior variance, ``delta = 1 / alpha``; ``None``: ``delta`` learned (:func:`mackay_precision`
    from ``precision``, given the layer's ``sq_norm``)."""
    a, U = symmetric_eigh(A)
    g, V = symmetric_eigh(G)
    a, g = a.clamp(min=0), g.clamp(min=0)
    if alpha is None:
        if sq_norm is None:
            raise ValueError("a learned prior precision needs the layer's squared norm")
        precision = mackay_precision(a, g, num_data, sq_norm, precision)
    else:
        precision = 1.0 / alpha
    lam = torch.outer(g, a) / num_data  # (out, in), float64
    denom = lam + precision
    return KronOccam(
        M_A=(U * ((g / num_data).unsqueeze(1) / denom).sum(0)) @ U.T,
        M_G=(V * ((a / num_data).unsqueeze(0) / denom).sum(1)) @ V.T,
        logdet=torch.log1p(lam / precision).sum(),
        precision=precision,
        sq_norm=sq_norm,
    )


class LaplaceEtaGradient:
    """``eta``'s gradient of the Kronecker-factored Laplace evidence of ``W2`` during training (module docstring).

    Args:
        model: the invariant network with a point ``W2``.
        x, y: the training set (the curvature is refreshed on :attr:`refresh_size` of its examples).
        alpha: the prior variance of ``W2``.
        seed: picks the refresh subsets.
    """

    #: examples per refresh; the refresh comes every epoch, but not more often than every ``refresh_steps`` steps
    refresh_size = REFRESH_SIZE
    refresh_steps = 1
    #: the name of its value among a run's metrics
    metric = "laplace_per_datapoint"

    def __init__(self, model: InvariantBNN, x: torch.Tensor, y: torch.Tensor, alpha: float, seed: int = 0) -> None:
        self.model, self.x, self.y, self.alpha = model, x, y, alpha
        self.num_data = x.shape[0]
        self.generator = torch.Generator().manual_seed(seed + 7919)
        self.M_A: torch.Tensor | None = None
        self.M_G: torch.Tensor | None = None
        self.log_evidence: float = float("nan")

    def state_dict(self) -> dict:
        """The curvature of the last refresh and the subset generator (plain tensors, for a checkpoint)."""
        return {
            "M_A": self.M_A,
            "M_G": self.M_G,
            "log_evidence": self.log_evidence,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.M_A, self.M_G = state["M_A"], state["M_G"]
        self.log_evidence = float(state["log_evidence"])
        self.generator.set_state(state["generator"])

    @property
    def ready(self) -> bool:
        return self.M_A is not None

    def weight_penalty(self) -> torch.Tensor | float:
        """The body's negative log prior for the training loss: none here (the body is a hyper-parameter)."""
        return 0.0

    def _refresh_output(self, phi: torch.Tensor, y: torch.Tensor, W2: torch.Tensor, scale: float) -> float:
        """Keep ``W2``'s ``M_A``, ``M_G`` at the averaged features ``phi`` of a subset (``scale = N / n``); returns
        the Kronecker-factored Laplace estimate of ``log p(D | eta)`` (not per datapoint)."""
        probs = torch.softmax(phi @ W2.T, -1)
        A, G = kron_factors(phi, probs)
        occam = kron_occam_factors(A * scale, G * scale, self.num_data, self.alpha)
        self.M_A, self.M_G = occam.M_A.to(phi.dtype), occam.M_G.to(phi.dtype)
        return float(scale * log_likelihood(phi, y, W2) - 0.5 * W2.pow(2).sum() / self.alpha - 0.5 * occam.logdet)

    @torch.no_grad()
    def refresh(self, W2: torch.Tensor) -> float:
        """Recompute the curvature at the current weights and point ``W2``; returns (and keeps) the Kronecker-factored
        Laplace estimate of ``log p(D | eta) / N`` there."""
        N = self.num_data
        idx = torch.randperm(N, generator=self.generator)[: self.refresh_size].to(self.x.device)
        phi = averaged_features(self.model, self.x[idx])
        self.log_evidence = self._refresh_output(phi, self.y[idx], W2, N / phi.shape[0]) / N
        return self.log_evidence

    def half_logdet_surrogate(self, x: torch.Tensor, phi: torch.Tensor, W2: torch.Tensor) -> torch.Tensor:
        """A scalar whose gradient (in the batch's averaged features ``phi``, ``(B, D)``) is that of
        ``1/2 log det(alpha P)`` at the refresh: ``(N / 2B) sum_b [phi_b^T M_A phi_b + tr(M_G Lambda_b)]``
        (``x``, the batch's inputs, is not needed here)."""
        assert self.M_A is not None and self.M_G is not None, "refresh before the surrogate"
        p = torch.softmax(phi @ W2.detach().T, -1)
        quad_a = ((phi @ self.M_A) * phi).sum(-1)
        tr_g = (p * self.M_G.diagonal()).sum(-1) - ((p @ self.M_G) * p).sum(-1)
        return 0.5 * (self.num_data / phi.shape[0]) * (quad_a + tr_g).sum()

    def diagnostics(self) -> dict[str, float]:
        """The value of the last refresh, under :attr:`metric`."""
        return {self.metric: self.log_evidence}


__all__ = [
    "FULL_MAX",
    "KronOccam",
    "LaplaceEtaGradient",
    "REFRESH_SIZE",
    "STRUCTURES",
    "averaged_features",
    "evidence_at_mode",
    "full_ggn",
    "full_logdet",
    "importance_log_evidence",
    "kron_factors",
    "kron_logdet",
    "kron_occam_factors",
    "laplace_log_evidence",
    "log_evidence",
    "log_likelihood",
    "mackay_precision",
    "map_w2",
    "symmetric_eigh",
    "w2_at_mode",
]
