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
