"""Every relative link of the documentation resolves: README.md, docs/**/*.md and the notebooks' Markdown cells.

A link's file must exist (relative to the page that holds it), and a ``#anchor`` into a Markdown page or a notebook
must be one of that page's anchors: a heading's GitHub-style slug (:func:`github_slug`, with ``-1``, ``-2``, ... for
repeated headings, which MyST's ``myst_heading_anchors`` makes the same way), or an explicit MyST target
``(name)=`` or HTML ``id``/``name``. Links with a scheme (``https:``, ``mailto:``) are not followed.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")  # indented too: fences inside list items
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
#: ``[text](target)`` and ``![alt](target "title")``; the text may hold one level of brackets (``[a [b] c](x)``)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'][^\"']*[\"'])?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+[\"'(].*)?$", re.M)
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.I)
HTML_ID = re.compile(r"<[a-z][^>]*?\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
MYST_TARGET = re.compile(r"^\(([^()\s]+)\)=\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def github_slug(text: str) -> str:
    """GitHub's anchor of a heading's text: lowercase, every character but letters, marks, numbers, ``-``, ``_``
    and spaces dropped, each space a ``-`` (github-slugger)."""
    keep = [c for c in text.strip().lower() if c in " -_" or unicodedata.category(c)[0] in "LMN"]
    return "".join("-" if c == " " else c for c in keep)


def heading_text(markdown: str) -> str:
    """The text a heading renders: links and images by their text, code spans by their content, no HTML tags."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", markdown)
    text = INLINE_CODE.sub(lambda m: m.group(2), text)
    return re.sub(r"<[^>]+>", "", text)


def prose_lines(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks (a fenced line becomes empty, so line numbers stay)."""
    out, fence = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append("")
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):]:
                fence = None
            out.append("")
        else:
            out.append(line)
    return out


def anchors(text: str) -> set[str]:
    """Every anchor of a Markdown text: heading slugs (repeats numbered as GitHub does), MyST targets, HTML ids."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(text):
        if m := HEADING.match(line):
            base = slug = github_slug(heading_text(m.group(2)))
            while slug in seen:
                seen[base] += 1
                slug = f"{base}-{seen[base]}"
            seen[slug] = 0
            found.add(slug)
        elif m := MYST_TARGET.match(line.strip()):
            found.add(m.group(1))
        found.update(HTML_ID.findall(line))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """``(line, target)`` of every link outside code: inline (its text may run over lines), reference-style and
    HTML."""
    prose = "\n".join(INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line) for line in prose_lines(text))
    found = [(m.start(), m.group(1)) for pattern in (LINK, REFERENCE, HTML_LINK) for m in pattern.finditer(prose)]
    return [(prose.count("\n", 0, start) + 1, target) for start, target in sorted(found)]


def markdown_of(path: Path) -> str:
    """A page's Markdown; a notebook's Markdown cells, one after the other."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return path.read_text()


def broken_links(text: str, where: Path) -> list[str]:
    """What is wrong with the relative links of ``text``, read as if it were the file ``where``."""
    problems = []
    for number, target in links(text):
        if not target or SCHEME.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (where.parent / unquote(path_part)).resolve() if path_part else where
        if path_part and not dest.exists():
            problems.append(f"{where.name}:{number}: {target}: no such file")
        elif anchor and dest.suffix in (".md", ".ipynb"):
            own = text if dest == where else markdown_of(dest)
            if unquote(anchor) not in anchors(own):
                problems.append(f"{where.name}:{number}: {target}: no heading or target #{anchor} in {dest.name}")
    return problems


def documents() -> list[Path]:
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md")) if "_build" not in p.relative_to(ROOT).parts]
    return [ROOT / "README.md", *docs, *sorted((ROOT / "notebooks").glob("*.ipynb"))]


def test_github_slugs():
    assert github_slug("Reproduction at a glance") == "reproduction-at-a-glance"
    assert github_slug("Table C.2 / Figures 2: ReLU (cpu protocol)") == "table-c2--figures-2-relu-cpu-protocol"
    assert github_slug("How good is q: NUTS on W₂") == "how-good-is-q-nuts-on-w₂"
    assert github_slug(heading_text("bfloat16 products (`--precision`)")) == "bfloat16-products---precision"
    assert github_slug("Learned η_rot: ±5° to ±175°") == "learned-η_rot-5-to-175"
    text = "# Title\n\n## Same\n\n## Same\n\n```\n# not a heading\n```\n\n(my-target)=\n<a id=\"x\"></a>\n"
    assert anchors(text) == {"title", "same", "same-1", "my-target", "x"}


def test_the_checker_finds_broken_links_and_anchors(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## A section\n")
    page = tmp_path / "page.md"
    text = ("# Page\n\n[fine](other.md#a-section) [fine too](#page) ![image](other.md) [web](https://example.org/x)\n"
            "[gone](missing.md) [no such section](other.md#b-section) [nor here](#nowhere)\n"
            "`[in code](missing.md)`\n\n```\n[in a fence](missing.md)\n```\n\n"
            "[a link whose text\nruns on](gone/x.md)\n")
    assert broken_links(text, page) == [
        "page.md:4: missing.md: no such file",
        "page.md:4: other.md#b-section: no heading or target #b-section in other.md",
        "page.md:4: #nowhere: no heading or target #nowhere in page.md",
        "page.md:11: gone/x.md: no such file",
    ]
    assert broken_links("[ok](other.md#a-section)\n", page) == []


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    assert broken_links(markdown_of(path), path) == []
