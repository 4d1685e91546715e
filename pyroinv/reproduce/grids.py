"""The experiment grids of the paper, as cells of training commands, under two protocols.

A *cell* is one training run: a script (``svi_train.py`` or ``baseline_train.py``), its flags and a
seed. A *table* lays cells out as rows (models) × columns (data sets), next to the paper's numbers.

Protocols:

* ``paper``: the package's defaults, i.e. the paper's settings (§4) where it states them: all 60,000
  training and 10,000 test images, H = 1,024, S = 32, Adam lr 1e-3 cosine-annealed, batch 128, q
  initialised at mu = 0, L = I, alpha = 1; and, where it leaves them open or where they are changed
  (docs/RESULTS.md, "Deviations"), the per-example ELBO estimator, logits averaged over the transforms
  (Appendix A), mu and eta stepped at 0.05, eta_rot bounded by tanh, W1 started at 0.15 x Xavier, 10 epochs.
* ``cpu``: the same, reduced so a grid finishes on a 2-core CPU: 20,000 training and 2,000 test
  images (class-balanced), H = 512, S = 16, 24 epochs (3,768 steps). These are the settings
  of ``scripts/main.sh``. ``cpu-probs`` is the same with the probabilities averaged over the transforms
  (``--average probs``, the default before the measurements in docs/RESULTS.md chose the logits).
* ``cpu-q0.05``, ``paper-q0.05`` and ``paper-earlier``: the earlier protocol, kept so its tables can be regenerated:
  one W2 draw per batch, q started at L = 0.05 I for ReLU, every parameter at the one learning rate,
  W1 at Xavier, eta unconstrained; ``cpu-q0.05`` with 8 epochs at lr 5e-3 on the cpu sizes;
  ``paper-earlier`` the same at the paper's sizes with q started at L = I. Under it q
  collapses far below the prior and eta_rot stops near ±71° on fully rotated MNIST (docs/RESULTS.md).

Learned invariances start near no invariance (:data:`SMALL_START`): rotation at ±5° (the paper's Table 1),
translation at ±0.5 px, scale at ×exp(±0.05), affine at all of these and shear 0.05.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..model import lie
from . import paper

#: the earlier protocol's settings, on top of which the ``*-q0.05`` protocols sit
_EARLIER = ("--estimator", "shared", "--mean-lr", "{lr}", "--eta-lr", "{lr}", "--w1-init-scale", "1",
            "--eta-constraint", "none")
_CPU_SIZES = ("--train-size", "20000", "--test-size", "2000", "--hidden", "512", "--samples", "16")


def _earlier(lr: str, relu: bool) -> tuple[str, ...]:
    return tuple(a.format(lr=lr) for a in _EARLIER) + (("--guide-init-scale", "0.05") if relu else ())


PROTOCOLS: dict[str, dict[str, tuple[str, ...]]] = {
    "paper": {"relu": (), "rff": ()},
    "cpu": {"relu": (*_CPU_SIZES, "--epochs", "24"),
            "rff": (*_CPU_SIZES, "--epochs", "24")},
    "cpu-probs": {"relu": (*_CPU_SIZES, "--epochs", "24", "--average", "probs"),
                  "rff": (*_CPU_SIZES, "--epochs", "24", "--average", "probs")},
    "paper-q0.05": {"relu": _earlier("1e-3", True), "rff": _earlier("1e-3", False)},
    "paper-earlier": {"relu": _earlier("1e-3", False), "rff": _earlier("1e-3", False)},
    "cpu-q0.05": {"relu": (*_CPU_SIZES, "--epochs", "8", "--lr", "5e-3", *_earlier("5e-3", True)),
                  "rff": (*_CPU_SIZES, "--epochs", "8", "--lr", "5e-3", *_earlier("5e-3", False))},
}
#: Flags of the SGPR baseline (the same images; M and the steps are reduced for the CPU).
SGPR_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "paper": (),
    "paper-q0.05": (),
    "cpu": ("--train-size", "20000", "--test-size", "2000", "--inducing", "250", "--steps", "100"),
    "cpu-q0.05": ("--train-size", "20000", "--test-size", "2000", "--inducing", "250", "--steps", "100"),
    "cpu-probs": ("--train-size", "20000", "--test-size", "2000", "--inducing", "250", "--steps", "100"),
    "paper-earlier": (),
}

FIXED_LEVELS = (5, 45, 90, 135, 175)
INITS = (5, 45, 90, 135, 175)
AUGERINO_WEIGHTS = (0.01, 0.1, 1.0)


@dataclass(frozen=True)
class Cell:
    """One training run. ``args`` are the flags without protocol, seed and output folder."""

    script: str
    args: tuple[str, ...]
    kind: str  # "relu" | "rff" | "sgpr": picks the protocol flags

    def name(self, seed: int) -> str:
        """A folder name that says what the run is, e.g. ``relu-mnist-rot-rotation-vi-init5-s0``."""
        flags = dict(zip(self.args[::2], self.args[1::2]))
        parts = [self.kind, flags["--dataset"]]
        if self.kind in ("relu", "rff"):
            parts += [flags.get("--invariance", "rotation"), flags.get("--inference", "vi")]
            if "--fixed-eta" in flags:
                parts.append(f"fixed{flags['--fixed-eta']}")
            elif flags.get("--invariance") != "none":
                parts.append("init" + flags.get("--init-eta", "0").replace(" ", "_"))
            if "--width-weight" in flags:
                parts.append(f"w{flags['--width-weight']}")
        return "-".join(parts) + f"-s{seed}"

    def argv(self, protocol: str, seed: int, out: str) -> list[str]:
        if self.kind == "sgpr":
            extra = list(SGPR_PROTOCOLS[protocol])
        else:
            extra = ["--network", self.kind, *PROTOCOLS[protocol][self.kind]]
        args = [a for flag, value in zip(self.args[::2], self.args[1::2]) for a in (flag, *value.split(" "))]
        return [*args, *extra, "--seed", str(seed), "--out", out]


#: Where learned invariances start: near, not at, no invariance (η = 0 is a stationary point of the
#: objective in expectation; a generator started there can stay there). Human units: degrees, pixels,
#: log-scale; for translation, scale and affine one value per generator.
SMALL_START = {name: tuple(lie.SMALL_START[k] for k in active) for name, active in lie.PRESETS.items() if active}


def network(kind: str, dataset: str, invariance: str = "rotation", inference: str = "vi",
            init: float | Sequence[float] | None = None, fixed: float | None = None) -> Cell:
    """A ``svi_train.py`` cell; ``init`` defaults to :data:`SMALL_START` of the invariance."""
    args = ["--dataset", dataset, "--invariance", invariance, "--inference", inference]
    if fixed is not None:
        args += ["--fixed-eta", f"{fixed:g}"]
    elif invariance != "none":
        values = SMALL_START[invariance] if init is None else init
        values = values if isinstance(values, (list, tuple)) else (values,)
        args += ["--init-eta", " ".join(f"{v:g}" for v in values)]
    return Cell("svi_train.py", tuple(args), kind)


def sgpr(dataset: str) -> Cell:
    return Cell("sgpr_train.py", ("--dataset", dataset), "sgpr")


def augerino(dataset: str, weight: float, invariance: str = "rotation") -> Cell:
    """The Augerino-style baseline: ReLU network, transforms on the inputs, CE - weight * ||eta||."""
    base = network("relu", dataset, invariance, "augerino")
    return Cell(base.script, (*base.args, "--width-weight", f"{weight:g}"), "relu")


@dataclass
class Table:
    """Rows × data sets of cells, with the paper's numbers ``paper[(row, dataset)] = (acc, elbo)``."""

    key: str
    title: str
    datasets: tuple[str, ...]
    rows: dict[str, dict[str, Cell]]
    paper: dict[tuple[str, str], tuple[float, float | None]] = field(default_factory=dict)

    def cells(self, only: Sequence[str] | None = None) -> list[Cell]:
        """The distinct cells, row by row; ``only``: rows whose label contains one of these strings."""
        seen: dict[Cell, None] = {}
        for label, row in self.rows.items():
            if only and not any(s in label for s in only):
                continue
            for cell in row.values():
                seen.setdefault(cell)
        return list(seen)


def _rotation_rows(kind: str, inits: tuple[int, ...]) -> dict[str, dict[str, Cell]]:
    rows = {f"fixed {a}°": {d: network(kind, d, fixed=a) for d in paper.ROT} for a in FIXED_LEVELS}
    rows.update({f"learned ({a}° init)": {d: network(kind, d, init=a) for d in paper.ROT} for a in inits})
    return rows


def _transformation_rows(kind: str, datasets: tuple[str, ...]) -> dict[str, dict[str, Cell]]:
    rows = {"MLP": {d: network(kind, d, "none") for d in datasets}}
    for inv in ("rotation", "translation", "scale", "affine"):
        rows[f"+ {inv}"] = {d: network(kind, d, inv) for d in datasets}
    return rows


def tables() -> dict[str, Table]:
    """Every grid the driver knows, by the name used on the command line."""
    t2 = {"SGPR": {d: sgpr(d) for d in paper.T2}, "MLP (ML)": {d: network("relu", d, "none", "ml") for d in paper.T2}}
    t2.update(_transformation_rows("relu", paper.T2))
    rot = "mnist-rot"
    return {t.key: t for t in [
        Table("table1", "Table 1: RFF, fixed and learned rotation", paper.ROT, _rotation_rows("rff", (5,)),
              paper.TABLE_C1),
        Table("tableC1", "Table C.1 / Figure C.1: RFF, learned rotation from five starting points", paper.ROT,
              _rotation_rows("rff", INITS), paper.TABLE_C1),
        Table("tableC2", "Table C.2 / Figures 2 and C.2: ReLU, fixed rotation and learned from five starting points",
              paper.ROT, _rotation_rows("relu", INITS), paper.TABLE_C2),
        Table("figure6", "Figure 6 (§4.1): VI against maximum likelihood, ReLU, fully rotated MNIST", (rot,),
              {"VI": {rot: network("relu", rot, init=5)}, "ML": {rot: network("relu", rot, "rotation", "ml", init=5)},
               "MLP (VI)": {rot: network("relu", rot, "none")}}),
        Table("headline", "Headline rows: learned rotation, maximum likelihood and the MLP",
              paper.ROT, {"learned (5° init)": {d: network("relu", d, init=5) for d in paper.ROT},
                          "ML (5° init)": {rot: network("relu", rot, "rotation", "ml", init=5)},
                          "MLP (VI)": {rot: network("relu", rot, "none")}}, paper.TABLE_C2),
        Table("table2", "Table 2 / C.4: ReLU, learned transformations, with the SGPR and MLP baselines", paper.T2,
              t2, paper.TABLE_2),
        Table("tableC3", "Table C.3: RFF, learned transformations", paper.T2, _transformation_rows("rff", paper.T2),
              paper.TABLE_C3),
        Table("combinations", "Appendix C.4: ReLU on data with two transformations", paper.COMBO,
              _transformation_rows("relu", paper.COMBO), paper.TABLE_COMBO),
        Table("table3", "Table 3: ReLU on CIFAR-10 (needs the CIFAR-10 data; a GPU for the paper protocol)",
              paper.CIFAR, _transformation_rows("relu", paper.CIFAR), paper.TABLE_3),
        Table("augerino", "Learned input augmentation (Augerino-style) against the ELBO, ReLU, learned rotation",
              paper.ROT, {**{f"Augerino λ={w:g}": {d: augerino(d, w) for d in paper.ROT} for w in AUGERINO_WEIGHTS},
                          "pyroinv VI": {d: network("relu", d, init=5) for d in paper.ROT}}),
    ]}
