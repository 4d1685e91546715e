"""Sphinx configuration of the pyroinv documentation site (built by ``bash scripts/docs.sh``).

The pages are Markdown (MyST), the API reference is autodoc on the package's docstrings (napoleon reads their
Google-style sections), and the notebooks in ``notebooks/`` are pages through the relative symlink
``docs/notebooks -> ../notebooks``, rendered with their committed outputs (never executed here).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # the checkout's pyroinv, installed or not

import pyroinv  # noqa: E402

project = "pyroinv"
author = "pyroinv contributors"
copyright = "the pyroinv contributors"
release = version = pyroinv.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx.ext.mathjax",
    "myst_nb",
]

# -- sources ---------------------------------------------------------------------------------------------------------
# myst_nb registers .md (MyST) and .ipynb; .rst is Sphinx's own.
root_doc = "index"
exclude_patterns = [
    "_build",
    "logs",  # the kept logs of runs: linked to from the pages, not pages themselves
    "img",
    "**/.ipynb_checkpoints",
    "Thumbs.db",
    ".DS_Store",
]

# -- MyST and notebooks -----------------------------------------------------------------------------------------------
myst_enable_extensions = [
    "amsmath",
    "colon_fence",
    "deflist",
    "dollarmath",
]
# GitHub-style anchors for every heading level, so that `page.md#some-heading` links written for GitHub resolve.
myst_heading_anchors = 6
# notebooks render with their committed outputs: executing them takes minutes and a data set
nb_execution_mode = "off"
nb_merge_streams = True

# -- autodoc ------------------------------------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = True
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = True
napoleon_use_rtype = False


# -- HTML -------------------------------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"pyroinv {release}"
html_static_path: list[str] = []


# -- the package's docstrings ---------------------------------------------------------------------------------------


def _plain_attribute_docstring(self) -> list[str]:
    """Napoleon reads the first line of an attribute's or property's docstring as Google's inline ``type:
    description``; the package's are prose ("the Pyro model: ``model(x, y)``"), so they are parsed as any
    other docstring, without an inline type (the annotation still gives the type)."""
    return self.__class__(self._dedent(self._consume_to_end()), self._config).lines()


def _rst_text(text: str) -> str:
    """``text`` as literal RST prose: the markup characters of help texts (``*``, ``|det|``, ``_``) escaped,
    ``--flags`` as literals."""
    text = re.sub(r"([\\*`|_])", r"\\\1", text)
    return re.sub(r"(?<![\w-])(--[a-z][a-z0-9-]*)", r"``\1``", text)  # a flag stays literal (no en dash)


def _config_fields(app, what, name, obj, options, lines) -> None:
    """The fields of :class:`pyroinv.Config`, appended to its docstring, each documented by its own metadata: the
    help text (the command line's ``--help``), the flag and the choices. One source for the reference and the
    command line."""
    if what != "class" or name != "pyroinv.Config":
        return
    from pyroinv.config import flag

    lines += ["", "**Fields**", ""]
    for field in dataclasses.fields(obj):
        meta = field.metadata
        default = field.default_factory() if field.default is dataclasses.MISSING else field.default
        text = _rst_text(meta.get("help", ""))
        kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
        extra = f"Command line: ``{flag(field.name)}``"
        if meta.get("choices"):
            extra += "; one of " + ", ".join(f"``{c}``" for c in meta["choices"])
        if meta.get("unit"):
            extra += f"; in {meta['unit']}"
        lines += [
            f".. py:attribute:: {field.name}",
            f"   :type: {kind}",
            f"   :value: {default!r}",
            "",
            f"   {text}{'' if text.endswith('.') else '.'} {extra}.",
            "",
        ]


def setup(app) -> None:
    from sphinx.ext.napoleon.docstring import GoogleDocstring

    GoogleDocstring._parse_attribute_docstring = _plain_attribute_docstring
    app.connect("autodoc-process-docstring", _config_fields)
