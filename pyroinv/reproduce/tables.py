"""Markdown for docs/results/tables/: each grid next to the paper's numbers, and the claims with verdicts.

Every number comes from the ``results.json`` / ``metrics.jsonl`` of a cell folder written by
:mod:`.runner`; a cell that has not run shows ``–``. Where a cell ran with several seeds the entry is
``mean ± sd (n)``. Each grid has a page of its own, ``KEY.md`` (the claims ``claims.md``, with the summary of
:mod:`.glance` at its top), with a section per protocol; a section is rewritten between its
``<!-- reproduce:KEY:PROTOCOL begin/end -->`` markers, so the rest of the page is left as it is, and these pages
are the only files the reports write (beside the figures, in ``img/`` next to them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..files import read_jsonl, write_bytes
from ..run.fit_check import CHANCE_FRACTION
from ..run.plots import plot_curves_panels, plot_eta_panels
from .claims import CLAIM_TABLES, claims_section
from .glance import GLANCE, glance_section
from .glance import GRIDS as GLANCE_GRIDS
from .grids import Table, protocol_flags, tables
from .results import LABELS, at_chance, cell_results, finished, mean_sd

#: the mark of an accuracy entry with a seed at chance, and the note under the table that says so
CHANCE_MARK = "†"
CHANCE_NOTE = (
    f"{CHANCE_MARK} a seed of this cell fitted its training data no better than chance (training NLL at "
    f"least {CHANCE_FRACTION} log K; `pyroinv.run.fit_check`): a failed run, not a measurement of the method."
)


def _metric(rs: list[dict], name: str) -> list[float]:
    return [r[name] for r in rs if r.get(name) is not None]


def _invariance(rs: list[dict]) -> str:
    if not rs or rs[0]["invariance"] == "none":
        return "–" if not rs else "none"
    if rs[0]["invariance"] == "rotation":
        return "±" + mean_sd([r["eta_human"]["rotation_deg"] for r in rs], "{:.1f}", "°")
    return " / ".join(r["learned_invariance"] for r in rs)


def _grid(table: Table, protocol: str, root: Path, entry: Callable[[str, str, list[dict]], str]) -> list[str]:
    head = "| model | " + " | ".join(LABELS.get(d, d) for d in table.datasets) + " |"
    lines = [head, "|---|" + "---|" * len(table.datasets)]
    for row, cells in table.rows.items():
        values = [entry(row, d, cell_results(cells[d], protocol, root)) if d in cells else "" for d in table.datasets]
        lines.append(f"| {row} | " + " | ".join(values) + " |")
    return lines


def _paper(table: Table, row: str, dataset: str, which: int, fmt: str) -> str:
    value = table.paper.get((row, dataset), (None, None))[which]
    return "–" if value is None else fmt.format(value)


def command(key: str, protocol: str, seeds: Sequence[int]) -> str:
    seed_flag = "" if list(seeds) == [0] else " --seeds " + " ".join(map(str, seeds))
    return f"python scripts/reproduce.py {key} --protocol {protocol}{seed_flag} --jobs 2"


def seeds_found(table: Table, protocol: str, root: Path) -> list[int]:
    return sorted({seed for cell in table.cells() for seed, _ in finished(cell, protocol, root)})


def eta_figure(table: Table, protocol: str, root: Path, path: Path) -> bool:
    """η_rot over training of the learned-rotation rows (every seed), one panel per data set."""
    panels: dict[str, list] = {}
    for d in table.datasets:
        runs = []
        for row, cells in table.rows.items():
            cell = cells.get(d)
            if (
                cell is None
                or cell.kind == "sgpr"
                or cell.setting("fixed_eta") is not None
                or cell.setting("invariance") != "rotation"
            ):
                continue
            runs += [
                (row, seed, read_jsonl(folder / "metrics.jsonl")) for seed, folder in finished(cell, protocol, root)
            ]
        if runs:
            panels[LABELS.get(d, d)] = runs
    if not panels:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    plot_eta_panels(panels, path, title=f"{table.title.split(':')[0]}: learned η_rot over training ({protocol})")
    return True


def machines(table: Table, protocol: str, root: Path) -> str:
    """``NVIDIA H200 (12 cells), Intel(R) Xeon(R) Processor (2 cores) (3 cells)``: where the finished cells ran
    (``device_name`` of their results; older results name the device type only)."""
    counts: dict[str, int] = {}
    for cell in table.cells():
        for r in cell_results(cell, protocol, root):
            name = r.get("device_name") or f"{r.get('device', 'unrecorded')} (card or processor not recorded)"
            counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{k} ({v} cell{'s' if v > 1 else ''})" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def section(table: Table, protocol: str, root: Path, img_dir: Path) -> str:
    """The Markdown section of one grid."""
    seeds = seeds_found(table, protocol, root) or [0]
    kinds = sorted({c.kind for c in table.cells() if c.kind != "sgpr"})
    flags = "; ".join(f"`{' '.join(protocol_flags(protocol, k))}`" for k in kinds)
    paper = bool(table.paper)  # a grid beyond the paper shows its measurements alone, the objectives to 3 decimals
    entries = "paper / measured; measured = mean ± sd" if paper else "mean ± sd"
    out = [
        f"### {table.title} ({protocol} protocol)",
        "",
        "```bash",
        command(table.key, protocol, seeds),
        "```",
        "",
        f"Each cell is one `svi_train.py` run with {flags} plus the flags of its row and column, which take "
        f"precedence (`--dry-run` prints every command). Entries: {entries} (number of seeds) "
        f"where several seeds ran; – = not run"
        + (
            "; empty = not in the grid."
            if any(set(cells) != set(table.datasets) for cells in table.rows.values())
            else "."
        ),
    ]
    if any(c.kind == "sgpr" for c in table.cells()):
        out[-1] += f" SGPR: `sgpr_train.py {' '.join(protocol_flags(protocol, 'sgpr'))}`."
    out += ["", "Test accuracy (%):", ""]

    def with_paper(row: str, d: str, which: int, measured: str) -> str:
        return f"{_paper(table, row, d, which, '{:.2f}')} / {measured}" if paper else measured

    nats = "{:.2f}" if paper else "{:.3f}"

    def accuracy(rs: list[dict]) -> str:
        return mean_sd([100 * a for a in _metric(rs, "test_accuracy")]) + (
            CHANCE_MARK if any(map(at_chance, rs)) else ""
        )

    out += _grid(table, protocol, root, lambda row, d, rs: with_paper(row, d, 0, accuracy(rs)))
    if any(CHANCE_MARK in line for line in out[-len(table.rows) :]):
        out += ["", CHANCE_NOTE]
    if any(v[1] is not None for v in table.paper.values()) or not table.paper:
        out += [
            "",
            "ELBO / N (training set; for rows with a point W2 (ML, Laplace, Augerino) the training "
            "log-likelihood / N):",
            "",
        ]
        out += _grid(
            table,
            protocol,
            root,
            lambda row, d, rs: with_paper(
                row, d, 1, mean_sd(_metric(rs, "elbo_per_datapoint") or _metric(rs, "train_loglik_per_datapoint"), nats)
            ),
        )
    if any(_metric(cell_results(c, protocol, root), "laplace_per_datapoint") for c in table.cells()):
        out += [
            "",
            "Laplace log evidence / N (training set; Kronecker-factored curvature of W2 at its mode, the body "
            "and η as trained; runs with the logits averaged and a proper prior):",
            "",
        ]
        out += _grid(table, protocol, root, lambda row, d, rs: mean_sd(_metric(rs, "laplace_per_datapoint"), nats))
    if any(_metric(cell_results(c, protocol, root), "laplace_layers_per_datapoint") for c in table.cells()):
        out += [
            "",
            "Laplace log evidence over every layer / N (training set, 1,000 images; Kronecker-factored curvature "
            "of every fully connected layer, W2 at its mode, the body and η as trained, each layer's prior "
            "precision at the evidence's fixed point; --network relu and mlp):",
            "",
        ]
        out += _grid(
            table, protocol, root, lambda row, d, rs: mean_sd(_metric(rs, "laplace_layers_per_datapoint"), nats)
        )
    out += ["", "Learned invariance (η in human units; – for fixed rows and baselines):", ""]
    out += _grid(
        table, protocol, root, lambda row, d, rs: "–" if row.startswith(("fixed", "SGPR")) else _invariance(rs)
    )
    ran_on = machines(table, protocol, root)
    if ran_on:
        out += ["", f"Ran on: {ran_on}."]
    img = img_dir / f"reproduce-{table.key}-{protocol}.png"
    if eta_figure(table, protocol, root, img):
        out += ["", f"![{table.key}](img/{img.name})"]
    curves = img_dir / f"reproduce-{table.key}-{protocol}-accuracy.png"
    if curves_figure(table, protocol, root, curves):
        out += ["", f"![{table.key}: test accuracy against the training-set size](img/{curves.name})"]
    return "\n".join(out)


def curves_figure(table: Table, protocol: str, root: Path, path: Path) -> bool:
    """Test accuracy (mean over seeds) against the x of :attr:`Table.curves`, a panel per data set, a line per curve."""
    if not table.curves:
        return False
    panels: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for row, (curve, x) in table.curves.items():
        for d, cell in table.rows[row].items():
            accs = _metric(cell_results(cell, protocol, root), "test_accuracy")
            if accs:
                panels.setdefault(LABELS.get(d, d), {}).setdefault(curve, []).append((x, 100 * sum(accs) / len(accs)))
    if not panels:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    plot_curves_panels(
        panels,
        path,
        xlabel="training images",
        ylabel="test accuracy (%)",
        title=f"{table.title.split(':')[0]} ({protocol})",
    )
    return True


def replace_section(text: str, marker: str, body: str, heading: str | None = None) -> str:
    """``text`` with the section between ``marker``'s begin and end comments replaced by ``body``; a section not
    there yet is appended, after ``heading`` where given."""
    begin, end = f"<!-- {marker} begin -->", f"<!-- {marker} end -->"
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        return text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    return text.rstrip("\n") + "\n\n" + (f"{heading}\n\n" if heading else "") + block + "\n"


#: the page of the claims (and of the summary at its top, :data:`~.glance.GLANCE`), beside a page per grid
CLAIMS_PAGE = "claims.md"
CLAIMS_TITLE = "The paper's claims, measured"


def page_path(tables_dir: Path, key: str) -> Path:
    """The page of grid ``key`` (or ``"claims"``) in ``tables_dir``."""
    return tables_dir / (CLAIMS_PAGE if key == "claims" else f"{key}.md")


def new_page(title: str, key: str) -> str:
    """The head of a page not written before: its title and what writes it."""
    return (
        f"# {title}\n\nWritten by `scripts/reproduce.py` from the cells' `results.json`, a section per protocol "
        f"(`python scripts/reproduce.py {key} --protocol PROTOCOL --report-only` rewrites one; the protocols are "
        f"described in `docs/reproducing.md`). Edit outside the `reproduce:` markers only.\n"
    )


def write_section(page: Path, title: str, key: str, protocol: str, body: str) -> None:
    """Write ``body`` as the section of ``protocol`` on ``page`` (the page of ``key``, titled ``title`` when it is
    new), under a heading of its own where the section is new; the rest of the page is kept."""
    text = page.read_text() if page.exists() else new_page(title, key)
    text = replace_section(text, f"reproduce:{key}:{protocol}", body, heading=f"## {protocol} protocol")
    write_bytes(page, text.encode())


def write_report(keys: Sequence[str], protocol: str, root: Path, tables_dir: Path) -> list[str]:
    """Rewrite the sections of ``keys`` under ``protocol``, each on its grid's page in ``tables_dir``
    (:func:`page_path`; the figures in ``tables_dir/img``), and the claims, when ``keys`` name them or a grid they
    read (:data:`~.claims.CLAIM_TABLES`); then the summary at the top of the claims page, where that page has one.
    Returns what was written."""
    grid = tables()
    written = []
    for key in keys:
        if key == "claims":
            continue
        body = section(grid[key], protocol, root, tables_dir / "img")
        write_section(page_path(tables_dir, key), grid[key].title, key, protocol, body)
        written.append(key)
    if "claims" in keys or any(key in CLAIM_TABLES for key in keys):  # a grid beyond the paper leaves them alone
        write_section(page_path(tables_dir, "claims"), CLAIMS_TITLE, "claims", protocol, claims_section(protocol, root))
        written.append("claims")
    claims_page = page_path(tables_dir, "claims")
    text = claims_page.read_text() if claims_page.exists() else ""
    if GLANCE in text:  # the summary at the top, from the claims sections and the grids' sections just written
        pages = [page_path(tables_dir, grid) for grid in GLANCE_GRIDS]
        grids = "".join(page.read_text() for page in pages if page.exists())
        write_bytes(claims_page, replace_section(text, GLANCE, glance_section(grids + text)).encode())
    return written
