"""The allocator setting applies where the C library is glibc and is a no-op elsewhere."""
import platform
import sys

from pyroinv.run.runtime import keep_freed_memory


def test_keep_freed_memory_applies_on_glibc():
    expected = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is expected
    assert keep_freed_memory() is expected  # idempotent
