"""The documentation site builds warning-free (bash scripts/docs.sh: Sphinx with warnings as errors), with the API
reference of the library and the notebooks rendered from their committed outputs."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_site_builds_warning_free(tmp_path):
    for name in ("sphinx", "myst_nb", "furo"):
        pytest.importorskip(name)
    out = tmp_path / "html"
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "docs.sh"), str(out)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr[-4000:]

    index = (out / "index.html").read_text()
    for page in ("api/classifier.html", "api/config.html", "notebooks/quickstart.html", "ARCHITECTURE.html"):
        assert f'href="{page}"' in index, page

    api = (out / "api" / "classifier.html").read_text()
    for member in ("fit", "predict_proba", "evaluate", "save", "load", "to_inference_data"):
        assert f'id="pyroinv.InvariantClassifier.{member}"' in api, member
    assert "the marginal likelihood" in api  # the class's docstring itself

    config = (out / "api" / "config.html").read_text()
    assert 'id="pyroinv.Config.batch_size"' in config and "--batch-size" in config  # a field, with its help

    notebook = (out / "notebooks" / "quickstart.html").read_text()
    assert "Quick start" in notebook
    images = re.findall(r'<img[^>]*src="([^"]+\.png)"', notebook)
    assert images, "no output figure on the quickstart notebook's page"
    assert all((out / "notebooks" / src).resolve().is_file() for src in images), images
