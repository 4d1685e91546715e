"""The allocator setting applies where the C library is glibc and is a no-op elsewhere; subnormal floats are
flushed to zero where the processor can."""
import platform
import sys

import torch

from pyroinv.run.runtime import keep_freed_memory


def test_keep_freed_memory_applies_on_glibc():
    expected = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is expected
    assert keep_freed_memory() is expected  # idempotent


def test_subnormal_floats_are_flushed_inside_the_block_and_kept_after_it():
    """The entry points flush subnormal floats while they train or evaluate; the caller's setting comes back."""
    from pyroinv.run.runtime import subnormals_flushed, subnormals_kept

    x = torch.tensor([1e-39])
    assert subnormals_kept() and float(x * 1.0) > 0
    with subnormals_flushed() as applied:
        if platform.machine() in ("x86_64", "AMD64"):
            assert applied and not subnormals_kept() and float(x * 1.0) == 0.0
    assert subnormals_kept() and float(x * 1.0) > 0


def test_the_training_entry_point_leaves_subnormals_as_it_found_them(tmp_path):
    """In-process callers (tests, notebooks) of ``train_main`` get their setting back, on success and on error."""
    from pyroinv.frontends.train import train_main
    from pyroinv.run.runtime import subnormals_kept

    assert train_main(["--dataset", "nope", "--out", str(tmp_path / "x")]) == 2
    assert subnormals_kept()
