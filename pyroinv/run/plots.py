"""Figures of a run: eta over training (paper Fig. 2), training curves, filter banks (Figs. 3-5)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch  # noqa: E402
from matplotlib import colormaps
from matplotlib.figure import Figure  # figures without pyplot: no backend is chosen, notebooks are left alone
from matplotlib.lines import Line2D

from ..files import atomic_path  # noqa: E402
from ..model import lie  # noqa: E402

HUMAN_LABELS = {
    "rotation_deg": "rotation η₃ (± degrees)",
    "translate_x_px": "translation η₁ (± pixels, x)",
    "translate_y_px": "translation η₂ (± pixels, y)",
    "scale_x_factor": "scale exp(η₄) (factor, x)",
    "scale_y_factor": "scale exp(η₅) (factor, y)",
    "shear": "shear η₆",
}
HUMAN_KEYS = {
    0: "translate_x_px",
    1: "translate_y_px",
    2: "rotation_deg",
    3: "scale_x_factor",
    4: "scale_y_factor",
    5: "shear",
}


def save_figure(fig: Figure, path: Path, dpi: int) -> None:
    """Write ``fig`` to ``path`` atomically (a full disk is a one-line :class:`~.checkpoint.RunWriteError`); the
    bounding box takes in whatever is drawn outside the axes (a legend of long labels)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png", bbox_inches="tight")


def _eta_axes(ax, key: str, top: float = 0.0) -> None:
    """Labels and limits of an eta-over-training panel (rotation from 0 to at least 185 degrees, a line at 180)."""
    ax.set_xlabel("training step")
    ax.set_ylabel(HUMAN_LABELS[key])
    if key == "rotation_deg":
        ax.set_ylim(0, max(185.0, top * 1.03))
        ax.axhline(180, color="grey", lw=0.8, ls="--")
    ax.grid(alpha=0.3)


def plot_eta(records: Sequence[dict], active: Sequence[int], path: Path, title: str = "") -> None:
    """Learned invariance in human units against training step, one panel per kind of generator."""
    keys = [HUMAN_KEYS[k] for k in active] or ["rotation_deg"]
    fig = Figure(figsize=(4.2 * len(keys), 3.4))
    axes = fig.subplots(1, len(keys), squeeze=False)
    steps = [r["step"] for r in records]
    for ax, key in zip(axes[0], keys):
        values = [r["eta_human"][key] for r in records]
        ax.plot(steps, values, color="C0", lw=1.8)
        _eta_axes(ax, key, max(values))
    fig.suptitle(title or "learned invariance over training")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


#: the regime panels of ``curves.png``: metrics key, axis label
REGIME_PANELS = (
    ("kl_per_datapoint", "KL(q || p) / N"),
    ("q_scale", "scale of q (mean diagonal of L)"),
    ("mu_norm", "||mu|| (||W2|| for a point estimate)"),
    ("inactive_units", "inactive units (share of the last hidden layer)"),
)


def _smoothed(ax, steps: Sequence[int], values: torch.Tensor, color: str = "C0") -> None:
    """Each value (faint) and a running mean over a 25th of the record (solid)."""
    ax.plot(steps, values.numpy(), color=color, alpha=0.3, lw=0.8, label="per step")
    k = max(1, len(values) // 25)
    if len(values) >= k:
        smooth = values.unfold(0, k, 1).mean(-1)
        ax.plot(steps[k - 1 :], smooth.numpy(), color=color, lw=1.8, label=f"mean of {k}")
    ax.legend(fontsize=8)


def plot_curves(records: Sequence[dict], path: Path, objective: str = "ELBO / N (minibatch estimate)") -> None:
    """Seven panels against the training step: the objective per data point (``-loss / N``), the training-batch
    NLL, the regime of q (KL/N, its scale, ``||mu||``: a collapsed q shows as a scale far below 1 with a
    large KL), the share of inactive hidden units and the learning rate. A diagnostic that a record does not hold (a
    point estimate has no
    KL or scale) leaves its panel saying so."""
    steps = [r["step"] for r in records]
    fig = Figure(figsize=(17, 6.4))
    axes = fig.subplots(2, 4).ravel()
    for ax, key, label in ((axes[0], "elbo_per_datapoint", objective), (axes[1], "nll", "training-batch NLL")):
        _smoothed(ax, steps, torch.tensor([r[key] for r in records], dtype=torch.float64))
        ax.set_ylabel(label)
    lo = min(float(torch.tensor([r["elbo_per_datapoint"] for r in records]).quantile(0.05)), -0.05)
    axes[0].set_ylim(lo * 1.1, 0)
    for ax, (key, label) in zip(axes[2:6], REGIME_PANELS):
        have = [(s, r[key]) for s, r in zip(steps, records) if key in r]
        if have:
            ax.plot([s for s, _ in have], [v for _, v in have], color="C1", lw=1.5)
        else:
            ax.text(0.5, 0.5, "not recorded for this run", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylabel(label)
    axes[3].axhline(1.0, color="grey", lw=0.8, ls="--")  # the prior's scale (alpha = 1) and the paper's L = I
    axes[6].plot(steps, [r["lr"] for r in records], color="C2")
    axes[6].set_ylabel("--lr, cosine-annealed (mu, eta: their own)")
    axes[7].axis("off")
    for ax in axes[:7]:
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


@torch.no_grad()
def plot_filter_banks(features, path: Path, rows: int = 6, columns: int = 7, seed: int = 0) -> None:
    """A few rows of ``W1`` under transforms: deterministic (left) and sampled (right).

    Deterministic: ``eps = t (1, ..., 1)`` over the active generators for ``columns`` values
    of ``t`` equally spaced in [-1, 1] (the paper's Fig. 3 sweep between -eta and eta).
    Sampled: ``columns`` draws ``eps ~ U[-1, 1]^k`` (Figs. 4-5).
    """
    inv = features.invariance
    eta = inv.eta.detach().cpu()
    rows = min(rows, features.hidden)  # a network with fewer hidden units than rows shows them all
    t = torch.linspace(-1, 1, columns)
    eps_det = torch.zeros(columns, 6)
    g = torch.Generator().manual_seed(seed)
    eps_rand = torch.zeros(columns, 6)
    if inv.active:
        eps_det[:, list(inv.active)] = t.unsqueeze(1)
        eps_rand[:, list(inv.active)] = torch.rand(columns, len(inv.active), generator=g) * 2 - 1
    C, h, w = features.input_shape
    fig = Figure(figsize=(1.0 * (2 * columns + 1), 1.05 * rows + 0.6))
    axes = fig.subplots(rows, 2 * columns + 1, squeeze=False)
    for half, eps in ((0, eps_det), (1, eps_rand)):
        T = lie.transforms(eta, lie.apply_ties(eps, inv.preset)).to(features.W1.device)
        with torch.no_grad():  # the weights the network uses: blurred, warped, times |det A| with --jacobian
            warped = features.weight_bank(T)[0][:, :rows].cpu().reshape(columns, rows, C, h, w)
        for j in range(rows):
            lim = float(warped[:, j].abs().max()) or 1.0
            for i in range(columns):
                ax = axes[j, i + half * (columns + 1)]
                img = warped[i, j].mean(0) if C > 1 else warped[i, j, 0]
                ax.imshow(img.numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.spines[:].set_visible(False)
    for j in range(rows):
        axes[j, 0].set_ylabel(f"unit {j}", fontsize=8)
    for i in range(columns):
        axes[0, i].set_title(f"ε={t[i]:+.2f}", fontsize=7)
        axes[0, i + columns + 1].set_title("sample", fontsize=7)
    fig.suptitle(f"W₁ filter banks: deterministic sweep (left), sampled (right) — {inv.describe()}", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def plot_eta_runs(
    runs: Sequence[tuple[str, Sequence[dict]]], path: Path, key: str = "rotation_deg", title: str = ""
) -> None:
    """Several runs' ``eta`` (human units) against step in one panel (the paper's Figures 2 and 6)."""
    plot_eta_panels(
        {"": [(label, 0, records) for label, records in runs]},
        path,
        title=title or "learned invariance over training",
        key=key,
    )


def distinct_colours(labels: Sequence[str]) -> dict[str, str | tuple[float, float, float, float]]:
    """A colour per distinct label, in order: matplotlib's ten ``C0``-``C9`` while they suffice, else the twenty of
    ``tab20`` (so up to twenty lines stay apart; beyond that colours repeat)."""
    names = list(dict.fromkeys(labels))
    if len(names) <= 10:
        return {name: f"C{i}" for i, name in enumerate(names)}
    cmap = colormaps["tab20"]
    return {name: cmap(i % 20) for i, name in enumerate(names)}


def plot_eta_panels(
    panels: Mapping[str, Sequence[tuple[str, int, Sequence[dict]]]],
    path: Path,
    title: str = "",
    key: str = "rotation_deg",
) -> None:
    """One panel per data set, one line per run ``(label, seed, records)``: the paper's Figures 2, 6, C.1-C.2.

    A label keeps its colour in every panel; seeds 0, 1, 2, ... are drawn solid, dashed, dotted, ...
    """
    fig = Figure(figsize=(4.0 * len(panels) + 1.8, 3.4))
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)
    colours = distinct_colours([label for runs in panels.values() for label, _, _ in runs])
    styles = ("-", "--", ":", "-.")
    top = 0.0
    for ax, (name, runs) in zip(axes[0], panels.items()):
        for label, seed, records in runs:
            colour = colours[label]
            values = [r["eta_human"][key] for r in records]
            top = max([top, *values])
            ax.plot([r["step"] for r in records], values, lw=1.5, color=colour, ls=styles[seed % len(styles)])
        ax.set_title(name, fontsize=10)
    for ax in axes[0]:
        _eta_axes(ax, key, top)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    handles = [Line2D([], [], color=c, lw=1.5) for c in colours.values()]
    seeds = sorted({seed for runs in panels.values() for _, seed, _ in runs})
    labels = list(colours)
    if len(seeds) > 1:
        handles += [Line2D([], [], color="k", lw=1.2, ls=styles[s % len(styles)]) for s in seeds]
        labels += [f"seed {s}" for s in seeds]
    right = 1 - 1.7 / (4.0 * len(panels) + 1.8)
    fig.legend(handles, labels, fontsize=8, loc="center left", bbox_to_anchor=(right, 0.5))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, right, 1))
    save_figure(fig, path, dpi=100)


def plot_eta_profile(
    rows: Sequence[dict],
    path: Path,
    generator: str = "rotate",
    title: str = "",
    profiles: dict[str, Sequence[dict]] | None = None,
) -> None:
    """The ELBO/N and the Laplace evidence/N (where the rows have it) against one ``eta`` (:func:`eta_profile`), one
    panel per profile: ``rows`` alone, or ``profiles`` (panel title -> rows)."""
    panels = profiles or {title: rows}
    fig = Figure(figsize=(4.2 * len(panels), 3.4))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    series = (
        ("elbo_per_datapoint", "ELBO / N", "C0", "o"),
        ("laplace_per_datapoint", "Laplace / N (Kronecker)", "C1", "s"),
        ("laplace_full_per_datapoint", "Laplace / N (exact)", "C2", "^"),
    )
    for ax, (name, panel) in zip(axes, panels.items()):
        xs = [r["eta_human"] for r in panel]
        for key, label, color, marker in series:
            ys = [r.get(key) for r in panel]
            if all(v is not None for v in ys):
                ax.plot(xs, ys, marker=marker, color=color, label=label)
        ax.set_xlabel(f"{generator} η (human units)")
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("per data point (nats)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D")


def curve_styles(names: Sequence[str]) -> dict[str, dict]:
    """A line style per curve, the same in every panel. Names ``"family, kind"`` (e.g. ``"cnn, ELBO"``) take their
    colour from the kind and their line style and marker from the family, so a method keeps its colour across
    networks; other names take a colour each."""
    names = sorted(set(names))
    if names and all(", " in n for n in names):
        parts = {n: n.split(", ", 1) for n in names}
        families = sorted({f for f, _ in parts.values()})
        kinds = sorted({k for _, k in parts.values()})
        return {
            n: dict(
                color=f"C{kinds.index(k) % 10}",
                ls=LINESTYLES[families.index(f) % len(LINESTYLES)],
                marker=MARKERS[families.index(f) % len(MARKERS)],
            )
            for n, (f, k) in parts.items()
        }
    return {
        n: dict(color=f"C{i % 10}", ls=LINESTYLES[i // 10 % len(LINESTYLES)], marker="o") for i, n in enumerate(names)
    }


def plot_curves_panels(
    panels: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]],
    path: Path,
    xlabel: str,
    ylabel: str,
    title: str = "",
) -> None:
    """One panel per key of ``panels``, one line per curve of ``(x, y)`` points (x on a log axis); each curve is
    drawn alike in every panel (:func:`curve_styles`) and named once, in a legend under the panels."""
    styles = curve_styles([c for curves in panels.values() for c in curves])
    ncol = 4 if len(panels) < 3 else 8
    legend_rows = math.ceil(len(styles) / ncol)
    fig = Figure(figsize=(3.6 * len(panels), 3.6 + 0.16 * legend_rows))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (name, curves) in zip(axes, panels.items()):
        for curve, points in sorted(curves.items()):
            xs, ys = zip(*sorted(points))
            ax.plot(xs, ys, ms=3, lw=1.2, **styles[curve])
        ax.set_xscale("log")
        xs_all = sorted({x for points in curves.values() for x, _ in points})
        ax.set_xticks(xs_all, [f"{x:,.0f}" for x in xs_all])
        ax.minorticks_off()
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    handles = [Line2D([], [], ms=3, lw=1.2, **style) for style in styles.values()]
    fig.legend(handles, list(styles), fontsize=7, loc="lower center", ncol=min(len(styles), ncol), frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.045 * legend_rows + 0.02, 1, 1))
    save_figure(fig, path, dpi=110)
