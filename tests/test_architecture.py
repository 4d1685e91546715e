"""The layers of docs/ARCHITECTURE.md: imports point down (model <- inference <- run <- cli, reproduce)."""
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pyroinv"
IMPORT = re.compile(r"^\s*from (\.+)([\w.]*) import", re.M)

#: sub-package -> the pyroinv sub-packages and top-level modules it must not import
FORBIDDEN = {
    "model": ("inference", "run", "data", "baselines", "reproduce", "cli", "config"),
    "inference": ("run", "reproduce", "cli"),
    "data": ("inference", "run", "baselines", "reproduce", "cli", "config"),
    "run": ("reproduce", "cli"),
}


def imported(path: Path) -> set[str]:
    """The first component below ``pyroinv`` of every relative import in ``path``."""
    here = path.relative_to(PACKAGE).parent.parts
    out = set()
    for dots, rest in IMPORT.findall(path.read_text()):
        base = list(here[:len(here) - (len(dots) - 1)])
        parts = base + [p for p in rest.split(".") if p]
        if parts:
            out.add(parts[0])
    return out


@pytest.mark.parametrize("layer", list(FORBIDDEN))
def test_imports_point_down(layer):
    wrong = {str(p.relative_to(PACKAGE)): sorted(imported(p) & set(FORBIDDEN[layer]))
             for p in (PACKAGE / layer).rglob("*.py")}
    assert {k: v for k, v in wrong.items() if v} == {}
