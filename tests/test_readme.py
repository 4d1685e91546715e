"""The README's Python example of the library runs as written (in a scratch folder: it saves ``clf.pt``)."""
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def library_example() -> str:
    section = README.read_text().split("## Your own network and data", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_the_readme_example_runs_as_written(tmp_path, cache_dir, mnist, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYROINV_CACHE", cache_dir)
    scope: dict = {}
    exec(compile(library_example(), str(README), "exec"), scope)
    assert (tmp_path / "clf.pt").exists() and os.path.getsize(tmp_path / "clf.pt") > 0
    assert scope["probs"].shape == (1000, 10)
    assert scope["again"].invariance == scope["clf"].invariance
    assert "rotation_deg" in capsys.readouterr().out


def test_the_readmes_reproduction_table_quotes_the_generated_tables():
    """Every measured figure of "Does it reproduce?" is in the tables scripts/reproduce.py writes."""
    section = README.read_text().split("## Does it reproduce?", 1)[1].split("\n## ", 1)[0]
    root = README.parent / "docs" / "results" / "tables"
    pages = ("claims.md", "headline.md", "tableC2.md", "table2.md")
    generated = "\n".join((root / page).read_text() for page in pages)
    rows = [row.split("|") for row in section.splitlines() if row.startswith("| ") and row.count("|") >= 6][1:]
    ours = [row[i] for row in rows for i in (3, 4)]  # 10 epochs (the paper protocol), 30 epochs (paper-e30-ws)
    figures = [f for cell in ours for f in re.findall(r"[−-]?\d+\.\d+(?: ± \d+\.\d+)?", cell)]
    assert len(figures) >= 18
    missing = [f for f in figures if f.replace("−", "-") not in generated.replace("−", "-")]
    assert not missing, f"README figures not in docs/results/tables: {missing}"
