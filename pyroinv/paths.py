"""Where the package's default folders are: the repository it runs from, or the working directory.

From a checkout (or an editable install) ``runs/``, ``results/`` and ``docs/`` are the repository's. Installed
with ``pip install .`` the package sits in ``site-packages``, where nothing should be written: the defaults are
then relative to the working directory, like any command-line tool's.
"""

from __future__ import annotations

from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]


def project_root() -> Path:
    """The repository holding this package, if it runs from one; else the current working directory."""
    pyproject = _CHECKOUT / "pyproject.toml"
    if pyproject.is_file() and 'name = "pyroinv"' in pyproject.read_text(errors="replace"):
        return _CHECKOUT
    return Path.cwd()
