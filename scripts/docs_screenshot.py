"""Screenshots of the built documentation site, with a headless Chromium: the front page and the
InvariantClassifier API page (and a notebook page), to check that the site renders.

    .venv/bin/python scripts/docs_screenshot.py [OUT_DIR] [--site docs/_build/html]

OUT_DIR defaults to /tmp/pyroinv-docs-shots. Build the site first (bash scripts/docs.sh). Chromium is
$CHROMIUM, else chromium, chromium-browser or google-chrome on the PATH (Debian: apt-get install chromium).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = {
    "index.png": "index.html",
    "invariant-classifier.png": "api/classifier.html",
    "notebook-quickstart.png": "notebooks/quickstart.html",
}
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def find_chromium() -> str | None:
    given = os.environ.get("CHROMIUM")
    if given:
        return shutil.which(given) or (given if Path(given).is_file() else None)
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def shoot(browser: str, page: Path, png: Path, size: str, timeout: float) -> None:
    with tempfile.TemporaryDirectory(prefix="pyroinv-chromium-") as profile:
        cmd = [browser, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={size}"]
        subprocess.run([*cmd, page.as_uri()], check=True, capture_output=True, timeout=timeout)
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot of {page}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default="/tmp/pyroinv-docs-shots", help="folder for the PNGs")
    ap.add_argument("--site", default=str(ROOT / "docs" / "_build" / "html"), help="the built site's folder")
    ap.add_argument("--window-size", default="1280,1600", help="WIDTH,HEIGHT of the page in pixels")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per screenshot")
    args = ap.parse_args(argv)
    browser = find_chromium()
    if browser is None:
        print("chromium not found: install it (Debian: apt-get install chromium) or set CHROMIUM=/path/to/chrome")
        return 2
    site = Path(args.site)
    if not (site / "index.html").is_file():
        print(f"no built site at {site}: run bash scripts/docs.sh first")
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, rel in PAGES.items():
        page = site / rel
        if not page.is_file():
            print(f"skipped {rel}: not in the site")
            continue
        try:
            shoot(browser, page.resolve(), (out / name).resolve(), args.window_size, args.timeout)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, RuntimeError) as err:
            print(f"screenshot of {rel} failed: {err}")
            return 1
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
