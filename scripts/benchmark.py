#!/usr/bin/env python
"""Time the weight-space invariant network's paths against each other and the matrix-product floor.

    python scripts/benchmark.py                 # paper settings: MNIST 28x28, H=1024, S=32, batch 128 and 1024
    python scripts/benchmark.py --device cuda   # the same on the GPU
    python scripts/benchmark.py --quick         # small settings, seconds (used by the tests)
    python scripts/benchmark.py --compile       # and the pyroinv step under torch.compile
    python scripts/benchmark.py --memory        # the memory estimate of a run against measured peaks

On the CPU every path is timed in its own process, so the peak memory column is that path's own;
on CUDA the allocator's peak is reset between paths. Every process first calls pyroinv.run.runtime.keep_freed_memory() (as the training scripts do) unless
--default-malloc is given.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyroinv.inference.benchmark_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
