"""The paper's own numbers (van der Ouderaa & van der Wilk, 2022), copied from its tables.

Keys: ``(table, row, dataset) -> (test accuracy %, ELBO/N)``; ELBO is ``None`` where the paper
gives none. Rows use the names of :mod:`pyroinv.reproduce.grids`.
"""

from __future__ import annotations

ROT = ("mnist-rot", "mnist-rot90", "mnist")
T2 = ("mnist-rot", "mnist-trans", "mnist-scale", "mnist")
COMBO = ("mnist-rot-trans", "mnist-rot-scale", "mnist-trans-scale", "mnist")
CIFAR = ("cifar10-rot", "cifar10-trans", "cifar10-scale", "cifar10")


def _rows(datasets: tuple[str, ...], rows: dict[str, tuple[tuple[float, ...], tuple[float, ...] | None]]):
    out = {}
    for row, (acc, elbo) in rows.items():
        for i, d in enumerate(datasets):
            out[(row, d)] = (acc[i], None if elbo is None else elbo[i])
    return out


#: Table C.1 (RFF; Table 1 is its fixed rows and the 5° learned row).
TABLE_C1 = _rows(
    ROT,
    {
        "fixed 5°": ((79.29, 86.71, 96.00), (-1.07, -0.80, -0.36)),
        "fixed 45°": ((87.35, 91.13, 95.93), (-0.63, -0.49, -0.26)),
        "fixed 90°": ((90.33, 91.69, 94.69), (-0.52, -0.44, -0.30)),
        "fixed 135°": ((91.19, 91.04, 92.13), (-0.45, -0.45, -0.36)),
        "fixed 175°": ((91.57, 90.47, 90.97), (-0.43, -0.47, -0.45)),
        "learned (5° init)": ((91.72, 92.34, 96.40), (-0.43, -0.42, -0.26)),
        "learned (45° init)": ((91.65, 92.31, 96.42), (-0.43, -0.42, -0.26)),
        "learned (90° init)": ((91.65, 92.37, 96.40), (-0.43, -0.42, -0.26)),
        "learned (135° init)": ((91.66, 92.37, 96.10), (-0.43, -0.42, -0.26)),
        "learned (175° init)": ((91.68, 91.69, 95.64), (-0.43, -0.43, -0.26)),
    },
)

#: Table C.2 (ReLU). The paper's first learned row starts at 0°; the grids here start it at 5°.
TABLE_C2 = _rows(
    ROT,
    {
        "fixed 5°": ((87.21, 90.68, 96.76), (-0.28, -0.20, -0.02)),
        "fixed 45°": ((95.24, 96.46, 98.13), (-0.09, -0.06, -0.02)),
        "fixed 90°": ((96.50, 97.11, 98.14), (-0.07, -0.06, -0.03)),
        "fixed 135°": ((97.15, 97.31, 97.79), (-0.06, -0.06, -0.04)),
        "fixed 175°": ((97.53, 97.30, 97.15), (-0.07, -0.06, -0.06)),
        "learned (5° init)": ((97.34, 97.13, 98.40), (-0.07, -0.06, -0.02)),
        "learned (45° init)": ((97.23, 97.36, 98.27), (-0.07, -0.05, -0.02)),
        "learned (90° init)": ((97.28, 97.22, 98.19), (-0.07, -0.06, -0.02)),
        "learned (135° init)": ((97.45, 97.29, 98.33), (-0.06, -0.05, -0.02)),
        "learned (175° init)": ((97.23, 97.23, 98.03), (-0.06, -0.06, -0.03)),
    },
)

#: Table 2 / C.4 (ReLU, learned transformations) with the SGPR row of Table 2.
TABLE_2 = _rows(
    T2,
    {
        "SGPR": ((91.19, 89.22, 72.10, 97.52), None),
        "MLP": ((90.35, 89.34, 96.61, 98.10), (-0.06, -0.06, -0.03, -0.02)),
        "+ rotation": ((98.05, 94.08, 97.62, 98.64), (-0.05, -0.06, -0.03, -0.02)),
        "+ translation": ((93.59, 97.87, 97.98, 98.76), (-0.09, -0.06, -0.03, -0.02)),
        "+ scale": ((93.80, 94.30, 98.06, 98.35), (-0.06, -0.06, -0.03, -0.02)),
        "+ affine": ((98.14, 97.66, 98.31, 98.93), (-0.05, -0.06, -0.03, -0.02)),
    },
)

#: Table C.3 (RFF, learned transformations).
TABLE_C3 = _rows(
    T2,
    {
        "MLP": ((79.29, 66.07, 89.25, 95.16), (-1.14, -1.49, -0.69, -0.39)),
        "+ rotation": ((92.59, 75.06, 88.66, 96.59), (-0.43, -1.08, -0.62, -0.26)),
        "+ translation": ((83.66, 87.81, 86.15, 96.78), (-0.82, -0.64, -0.72, -0.24)),
        "+ scale": ((82.77, 75.48, 91.31, 96.52), (-0.84, -1.08, -0.49, -0.26)),
        "+ affine": ((92.64, 87.77, 90.58, 97.38), (-0.43, -0.64, -0.54, -0.21)),
    },
)

#: Appendix C.4, combinations of two transformations (ReLU).
TABLE_COMBO = _rows(
    COMBO,
    {
        "MLP": ((53.36, 80.71, 75.50, 98.10), (-0.26, -0.10, -0.12, -0.02)),
        "+ rotation": ((85.35, 95.66, 85.42, 98.64), (-0.31, -0.10, -0.27, -0.02)),
        "+ translation": ((83.84, 83.40, 91.77, 98.76), (-0.42, -0.16, -0.19, -0.02)),
        "+ scale": ((55.63, 89.81, 86.04, 98.35), (-0.39, -0.12, -0.17, -0.02)),
        "+ affine": ((89.37, 95.88, 91.95, 98.93), (-0.37, -0.09, -0.18, -0.02)),
    },
)

#: Table 3 (CIFAR-10, ReLU; accuracy only).
TABLE_3 = _rows(
    CIFAR,
    {
        "MLP": ((41.24, 40.75, 46.56, 54.49), None),
        "+ rotation": ((46.04, 40.71, 46.77, 54.72), None),
        "+ translation": ((40.99, 45.20, 47.44, 55.79), None),
        "+ scale": ((40.92, 41.22, 49.28, 54.72), None),
        "+ affine": ((46.12, 45.77, 48.81, 55.44), None),
    },
)
