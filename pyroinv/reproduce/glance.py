"""The reproduction at a glance: one table at the top of docs/results/tables/claims.md with the paper's number and
ours, per headline cell, per learned cell of Table 2 on its own data and per claim, at the paper's sizes (10 and 30
epochs) and under the cpu protocol.

It is a summary of sections of the tables' pages, not a new measurement: the headline, Table 2 and claims sections of
each protocol (written by :func:`pyroinv.reproduce.tables.write_report` from the cells' results, on ``headline.md``,
``table2.md`` and ``claims.md``) are read back from the Markdown, so the summary always agrees with those tables.
``python scripts/reproduce.py claims --protocol paper --report-only`` (or any report) rewrites it.
"""

from __future__ import annotations

GLANCE = "reproduce:glance"
#: the protocols summarised, as columns
COLUMNS = (
    ("paper", "paper protocol: 60,000 images, H = 1,024, S = 32, 10 epochs"),
    ("paper-e30", "paper-e30 protocol: the same, 30 epochs, bfloat16"),
    ("paper-e30-ws", "paper-e30-ws protocol: the same, with today's first layer (standardised, its rate warmed up)"),
    ("cpu", "cpu protocol: 20,000 images, H = 512, S = 16, 24 epochs"),
)
DATASETS = (("fully rotated", "fully rotated"), ("partially rotated", "partially rotated"), ("regular", "regular"))
#: (label, grid, row, column) of the cells summarised: the headline rows, and Table 2's learned translation and scale
#: on the data transformed by them
CELLS = [(f"learned rotation, {name}", "headline", "learned (5° init)", col) for name, col in DATASETS] + [
    ("maximum likelihood, fully rotated", "headline", "ML (5° init)", "fully rotated"),
    ("MLP without invariance (VI), fully rotated", "headline", "MLP (VI)", "fully rotated"),
    ("learned translation, translated (Table 2)", "table2", "+ translation", "translated"),
    ("learned scale, scaled (Table 2)", "table2", "+ scale", "scaled"),
]
#: the grids whose sections the cells are read from
GRIDS = tuple(dict.fromkeys(grid for _, grid, _, _ in CELLS))


def _block(text: str, marker: str) -> str:
    begin, end = f"<!-- {marker} begin -->", f"<!-- {marker} end -->"
    if begin not in text or end not in text:
        return ""
    return text[text.index(begin) + len(begin) : text.index(end)]


def _rows(block: str, caption: str) -> list[list[str]]:
    """The cells of the Markdown table that follows the line starting with ``caption`` (header row first)."""
    lines = block.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(caption)), None)
    if start is None:
        return []
    out = []
    for line in lines[start + (0 if caption.startswith("|") else 1) :]:
        if line.startswith("|"):
            if not set(line) <= set("|-: "):
                out.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif out:
            break
    return out


def _grid(block: str, caption: str) -> dict[tuple[str, str], str]:
    rows = _rows(block, caption)
    if not rows:
        return {}
    head = rows[0]
    return {(r[0], head[j]): r[j] for r in rows[1:] for j in range(1, min(len(r), len(head)))}


def _split(entry: str) -> tuple[str, str]:
    """``"97.34 / 96.88"`` -> ``("97.34", "96.88")``; an entry without the paper's number -> ``("–", entry)``."""
    if " / " in entry:
        paper, ours = entry.split(" / ", 1)
        return paper.strip(), ours.strip()
    return "–", entry.strip() or "–"


def glance_section(text: str) -> str:
    """The summary table, from the sections of :data:`GRIDS` and the claims sections in ``text`` (the pages
    ``headline.md``, ``table2.md`` and ``claims.md`` of docs/results/tables/, one after the other)."""
    blocks = {(g, p): _block(text, f"reproduce:{g}:{p}") for g in GRIDS for p, _ in COLUMNS}
    accuracy = {key: _grid(block, "Test accuracy") for key, block in blocks.items()}
    learned = {key: _grid(block, "Learned invariance") for key, block in blocks.items()}
    claims = {
        p: {r[0]: (r[1], r[2]) for r in _rows(_block(text, f"reproduce:claims:{p}"), "| claim")[1:]} for p, _ in COLUMNS
    }
    lines = [
        "## Reproduction at a glance",
        "",
        "The paper's number and ours, for the headline cells and Table 2's learned translation and scale (test "
        "accuracy; learned invariance) and for each of the paper's claims (verdict, and the measured value where it "
        "is short), at the paper's sizes (trained for 10 and for 30 epochs, and for 30 with today's first layer) and "
        "under the reduced cpu protocol. Summarised from the headline, Table 2 and claims sections below (rules in "
        '`pyroinv/reproduce/claims.py`); "not run": its cells have not run under that protocol.',
        "",
        "| | the paper | " + " | ".join(label for _, label in COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for label, grid, row, col in CELLS:
        papers = [_split(accuracy[grid, p].get((row, col), ""))[0] for p, _ in COLUMNS]
        paper = next((v for v in papers if v != "–"), "–")
        ours = []
        for p, _ in COLUMNS:
            acc = _split(accuracy[grid, p].get((row, col), "–"))[1]
            eta = learned[grid, p].get((row, col), "–")
            acc = acc.replace(" (", "% (", 1) if " (" in acc else acc + "%"  # "95.15 ± 0.13% (3)"
            ours.append("not run" if acc in ("–%", "%") else acc + (f", {eta}" if eta not in ("–", "none") else ""))
        lines.append(f"| {label} | {paper if paper == '–' else paper + '%'} | " + " | ".join(ours) + " |")
    fullest = max((p for p, _ in COLUMNS), key=lambda p: len(claims[p]))  # the claims in their own order
    names = list(dict.fromkeys([*claims[fullest], *(n for p, _ in COLUMNS for n in claims[p])]))
    for name in names:
        cells = []
        for p, _ in COLUMNS:
            measured, verdict = claims[p].get(name, ("", "not run"))
            verdict = verdict.split(":")[0]  # "undecided: ..." -> "undecided"
            cells.append(verdict if verdict == "not run" or len(measured) > 60 else f"{verdict}: {measured}")
        lines.append(f"| claim {name} | as claimed | " + " | ".join(cells) + " |")
    return "\n".join(lines)
