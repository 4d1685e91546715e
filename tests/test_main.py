"""The ``pyroinv`` command: one entry point for the scripts, installed with the package."""
import pytest
import subprocess
import sys
import shutil
from pathlib import Path


@pytest.mark.slow
def test_the_pyroinv_command_dispatches_to_each_script(tmp_path):
    """``pyroinv COMMAND`` (the installed console script) and ``python -m pyroinv COMMAND``, from any folder."""
    console = shutil.which("pyroinv", path=str(Path(sys.executable).parent))
    assert console is not None, "pip install did not create the pyroinv command"
    for command in ("train", "evaluate", "reproduce", "sgpr", "benchmark"):
        done = subprocess.run([console, command, "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert done.returncode == 0 and "--help" in done.stdout, (command, done.stderr)
    bad = subprocess.run([sys.executable, "-m", "pyroinv", "trian"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    assert bad.returncode == 2 and bad.stderr == ("error: unknown command 'trian'; choose one of train, evaluate, "
                                                  "reproduce, sgpr, benchmark (see pyroinv --help)\n")
    none = subprocess.run([sys.executable, "-m", "pyroinv"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert none.returncode == 2 and none.stderr.startswith("usage: pyroinv {train,evaluate,reproduce,sgpr,benchmark}")


def test_defaults_are_the_checkouts_folders_or_else_the_working_directorys(tmp_path, monkeypatch):
    """From a checkout, runs/ and results/ are the repository's; installed in site-packages, the working directory's."""
    from pyroinv import paths

    root = Path(__file__).resolve().parents[1]
    assert paths.project_root() == root
    monkeypatch.setattr(paths, "_CHECKOUT", tmp_path / "site-packages")  # what an installed package sees above it
    monkeypatch.chdir(tmp_path)
    assert paths.project_root() == tmp_path
