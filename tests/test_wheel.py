"""The built wheel installs into a fresh environment outside the checkout, beside a torch that is already there,
and trains a tiny run with the ``pyroinv`` command (``scripts/wheel_check.sh``)."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("python3") is None, reason="needs a python3 to make the fresh environment")
def test_the_wheel_installs_beside_an_existing_torch_and_trains_from_outside_the_checkout():
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "wheel_check.sh")], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "[wheel] ok: the installed wheel trained a run: rotation" in proc.stdout
