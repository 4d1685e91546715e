"""The allocator setting applies where the C library is glibc and is a no-op elsewhere; subnormal floats are
flushed to zero where the processor can."""
import platform
import subprocess
import sys

from pyroinv.run.runtime import keep_freed_memory


def test_keep_freed_memory_applies_on_glibc():
    expected = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is expected
    assert keep_freed_memory() is expected  # idempotent


def test_subnormal_floats_are_flushed_to_zero_in_the_training_processes():
    """In its own process (the setting is process-wide): a subnormal product is kept before and zero after."""
    code = ("import torch; from pyroinv.run.runtime import flush_denormals\n"
            "x = torch.tensor([1e-39])\n"
            "before = float(x * 1.0)\n"
            "applied = flush_denormals()\n"
            "print(before > 0, applied, float(x * 1.0) == 0.0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, applied, flushed = out.stdout.split()
    assert before == "True"
    if platform.machine() in ("x86_64", "AMD64"):
        assert applied == "True" and flushed == "True"
