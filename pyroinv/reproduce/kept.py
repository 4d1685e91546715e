"""Cell outputs kept in the repository, so that results outlive the machine that made them.

A finished cell of a kept protocol (``paper``: its cells cost minutes on a GPU that is handed back after a short
lease, or an hour on a CPU; ``cpu``: minutes to an hour on a CPU) leaves ``results/PROTOCOL/CELL/`` in the repository:
``results.json``,
``config.json``, ``meta.json`` and ``metrics.jsonl`` thinned to at most :data:`MAX_RECORDS` records of the fields
the tables and figures read (about 10 kB a cell; no checkpoints). :func:`pyroinv.reproduce.results.finished`
reads a cell from its run folder or, where that is missing, from here, so ``scripts/reproduce.py`` counts a kept
cell as finished and the tables accumulate across machines. ``$PYROINV_KEPT_RESULTS`` names another folder.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import settings
from ..files import read_jsonl, write_bytes
from ..paths import project_root
from ..run.folder import CONFIG, META, METRICS, RESULTS

ROOT = project_root()
#: protocols whose finished cells are kept in the repository (the cpu protocol's cost minutes to an hour each on
#: a 2-core machine, and its grids take more than one machine's session)
KEPT_PROTOCOLS = ("paper", "paper-e30", "paper-e30-ws", "cpu")
#: metric records kept per cell (evenly spaced, the last one always), and their fields
MAX_RECORDS = 50
FIELDS = ("step", "epoch", "elbo_per_datapoint", "nll", "eta", "eta_human", "lr", "inactive_units", "wall_time")


def kept_root() -> Path:
    """``$PYROINV_KEPT_RESULTS``, else the repository's ``results/``."""
    return Path(settings.get("kept_results") or ROOT / "results")


def kept_folder(protocol: str, name: str) -> Path:
    return kept_root() / protocol / name


def thinned(records: list[dict], most: int = MAX_RECORDS) -> list[dict]:
    """At most ``most`` records (``most >= 2``), evenly spaced over training, the first and last included, with
    :data:`FIELDS` only."""
    n = len(records)
    picked = records if n <= most else [records[round(i * (n - 1) / (most - 1))] for i in range(most)]
    return [{k: r[k] for k in FIELDS if k in r} for r in picked]


def keep(run: Path, protocol: str) -> Path | None:
    """Copy the small outputs of the finished run folder ``run`` to ``results/PROTOCOL/NAME/``; ``None`` (nothing
    copied) for a protocol that is not kept or a run that has not finished."""
    run = Path(run)
    if protocol not in KEPT_PROTOCOLS or not (run / RESULTS).exists():
        return None
    dest = kept_folder(protocol, run.name)
    for name in (CONFIG, META):
        if (run / name).exists():
            write_bytes(dest / name, (run / name).read_bytes())
    lines = "".join(json.dumps(r) + "\n" for r in thinned(read_jsonl(run / METRICS)))
    write_bytes(dest / METRICS, lines.encode())
    write_bytes(dest / RESULTS, (run / RESULTS).read_bytes())  # last: a kept cell is one with results.json
    return dest
