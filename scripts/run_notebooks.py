#!/usr/bin/env python
"""Execute the notebooks at full size and save them with their outputs (finished runs are read back).

    python scripts/run_notebooks.py                          # every notebook in notebooks/
    python scripts/run_notebooks.py notebooks/vi_vs_ml.ipynb
"""
import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/*.ipynb")
    p.add_argument("--timeout", type=int, default=3600, help="seconds a cell may take")
    args = p.parse_args()
    import nbformat
    from nbclient import NotebookClient

    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        if not path.is_file():
            sys.stderr.write(f"error: {path} is not a notebook file\n")
            return 2
        t0 = time.time()
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=args.timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.resolve().parent)}}).execute()
        nbformat.write(nb, path)
        print(f"{path}: executed in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
