"""The layers of docs/ARCHITECTURE.md: imports point down, read off every import statement of the package (relative
and absolute, at module level and inside functions) with ``ast``.

    errors, files  <-  model, data  <-  config  <-  inference  <-  classifier  <-  run, baselines  <-  reproduce
    <-  frontends  <-  __main__, the package's __init__
"""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pyroinv"

#: each part of the package -> its rank; an import may only reach a part of lower or equal rank
RANK = {"errors": 0, "files": 0, "paths": 0, "settings": 0, "model": 1, "data": 1, "config": 2, "inference": 3,
        "classifier": 4, "run": 5, "baselines": 5, "reproduce": 6, "frontends": 7, "__main__": 8,
        "__init__": 8}


def part(path: Path) -> str:
    """The part of the package a file belongs to: its sub-package, or its own module name at the top."""
    rel = path.relative_to(PACKAGE).parts
    return rel[0] if len(rel) > 1 else Path(rel[0]).stem


def imported_parts(path: Path, source: str | None = None) -> set[str]:
    """The first component below ``pyroinv`` of every import in ``path`` (``import pyroinv.x``, ``from pyroinv.x
    import``, ``from ..x import``, ``from . import x``); ``source``: its text, if not read from ``path``."""
    here = list(path.relative_to(PACKAGE).parent.parts)
    out = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        names: list[list[str]] = []
        if isinstance(node, ast.Import):
            names = [a.name.split(".") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)]
                mod = base + (node.module.split(".") if node.module else [])
                names = [mod + [a.name] for a in node.names] if not mod else [mod]
            elif node.module:
                names = [node.module.split(".") + [a.name] for a in node.names]
        for parts in names:
            if node.__class__ is ast.ImportFrom and node.level:
                if parts:
                    out.add(parts[0])
            elif parts[0] == "pyroinv" and len(parts) > 1:
                out.add(parts[1])
    return out


FILES = sorted(PACKAGE.rglob("*.py"))


def test_every_part_has_a_rank():
    assert {part(p) for p in FILES} <= set(RANK)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(PACKAGE)) for p in FILES])
def test_imports_point_down(path):
    mine = part(path)
    up = sorted(p for p in imported_parts(path) if p in RANK and RANK[p] > RANK[mine])
    assert up == [], f"{path.relative_to(PACKAGE)} ({mine}) imports {up}, above it"


def test_the_reader_sees_absolute_relative_and_function_level_imports():
    """The reader is checked on a text that holds each form (so a test of the rule cannot pass by seeing nothing)."""
    source = ("import pyroinv.run.folder\nfrom pyroinv.frontends.train import x\nfrom ..inference import y\n"
              "def f():\n    from ..reproduce.grids import z\nfrom . import lie\nimport torch\n")
    assert imported_parts(PACKAGE / "model" / "sample.py", source) == {"run", "frontends", "inference", "reproduce",
                                                                       "model"}
