#!/usr/bin/env bash
# Build pyroinv's wheel, install it with plain pip (no constraints) into a fresh virtual environment outside the
# checkout that already holds a user's own torch and torchvision, and train a tiny run with the `pyroinv` command
# on a user's .npz file from there. Fails if installing pyroinv replaced the torch or torchvision it found.
#
# The user's stack is the torch and torchvision of .venv (with what they need), hard-linked into the fresh
# environment where the file system allows (a copy otherwise): pip sees them as installed there, and an uninstall
# by pip would remove only the links. Needs .venv (bash scripts/bootstrap.sh). The folder it works in is removed
# afterwards (PYROINV_KEEP_WHEEL_CHECK=1 keeps it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
repo=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/pyroinv-wheel.XXXXXX")
[ "${PYROINV_KEEP_WHEEL_CHECK:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
SECONDS=0
echo "[wheel] building the wheel" >&2
.venv/bin/python -m build --wheel --no-isolation --outdir "$work/dist" "$repo" > "$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; exit 1; }
wheel=$(ls "$work"/dist/pyroinv-*.whl)
.venv/bin/python -m venv "$work/venv"
site=$("$work/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
.venv/bin/python - "$site" <<'EOF'
"""Link torch, torchvision and everything they require from this environment into the fresh one."""
import shutil, subprocess, sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

target = Path(sys.argv[1])
todo, seen = ["torch", "torchvision"], set()
while todo:
    name = todo.pop().lower().replace("_", "-")
    if name in seen:
        continue
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:  # an optional requirement that is not installed
        continue
    seen.add(name)
    for r in dist.requires or []:
        req = Requirement(r)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            todo.append(req.name)
    root = Path(dist.locate_file(""))
    tops = {Path(f).parts[0] for f in dist.files or [] if ".." not in Path(f).parts}
    for top in tops:
        src, dst = root / top, target / top
        if dst.exists() or not src.exists():
            continue
        try:
            subprocess.run(["cp", "-al", str(src), str(dst)], check=True, capture_output=True)
        except subprocess.CalledProcessError:  # another file system: a copy
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
print(f"[wheel] the user's stack: {len(seen)} distributions ({metadata.version('torch')} torch, "
      f"{metadata.version('torchvision')} torchvision)", file=sys.stderr)
EOF
versions() { "$work/venv/bin/python" -c "from importlib.metadata import version as v; print(v('torch'), v('torchvision'))"; }
before=$(versions)
echo "[wheel] installing $(basename "$wheel") beside torch and torchvision $before" >&2
"$work/venv/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check "$wheel"
echo "[wheel] installed (${SECONDS} s); training a tiny run from $work" >&2
after=$(versions)
if [ "$before" != "$after" ]; then
  echo "[wheel] FAILED: installing pyroinv replaced torch and torchvision $before with $after" >&2
  exit 1
fi
cd "$work"  # outside the checkout: the installed package, not the source tree, is what runs
"$work/venv/bin/python" - <<'EOF'
import numpy as np
rng = np.random.default_rng(0)
def blobs(n):  # two classes of 12x12 images: a faint or a bright disc (a class no rotation changes)
    yy, xx = np.mgrid[:12, :12]
    disc = ((yy - 5.5) ** 2 + (xx - 5.5) ** 2 < 16).astype(np.float32)
    y = rng.integers(0, 2, n)
    x = np.clip(rng.uniform(0, 0.2, (n, 12, 12)) + disc * (0.3 + 0.5 * y)[:, None, None], 0, 1).astype(np.float32)
    return x, y
(xa, ya), (xb, yb) = blobs(256), blobs(128)
np.savez("blobs.npz", x_train=xa, y_train=ya, x_test=xb, y_test=yb)
EOF
"$work/venv/bin/pyroinv" train --dataset blobs.npz --invariance rotation --hidden 32 --samples 4 --epochs 10 \
  --batch-size 64 --eval-draws 2 --export-draws 4 --out run --no-progress > train.log 2>&1 \
  || { cat train.log >&2; exit 1; }
"$work/venv/bin/python" - <<'EOF'
import json, pathlib
import pyroinv
assert "site-packages" in pyroinv.__file__, f"pyroinv imported from {pyroinv.__file__}, not the installed wheel"
r = json.loads(pathlib.Path("run/results.json").read_text())
assert 0.0 <= r["test_accuracy"] <= 1.0 and r["learned_invariance"].startswith("rotation")
print(f"[wheel] ok: the installed wheel trained a run: {r['learned_invariance']}, "
      f"test accuracy {100 * r['test_accuracy']:.1f}%, beside torch {r['versions']['torch']}")
EOF
echo "[wheel] done in ${SECONDS} s" >&2
