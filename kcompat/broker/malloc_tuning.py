"""glibc malloc settings for the broker process.

A produce request is one frame of up to ``message.max.bytes`` (1 MB by default), received into a
buffer of its size. glibc serves allocations above its mmap threshold (128 KiB at first, raised
dynamically) with mmap and returns freed memory at the top of the heap to the kernel above its
trim threshold (128 KiB): a stream of 1 MB frames then costs a mmap/munmap or a heap trim, and the
page faults of touching fresh pages, per request. Measured with ``bench/produce_consume.py``
(1 KiB records, one partition) that roughly doubled the broker's CPU per produced GB, depending on
the heap's layout at the time. Fixing both thresholds keeps such buffers in the reused heap, as a
JVM broker keeps its heap: at most ``trim_threshold`` bytes of freed memory stay with the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("kcompat.broker")

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def tune_malloc(mmap_threshold: int = 16 << 20, trim_threshold: int = 32 << 20) -> bool:
    """Set glibc's mmap and trim thresholds (bytes) for this process; False where the C library is
    not glibc (musl, macOS), which is left as it is."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1 and mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1
    if not ok:
        log.info("malloc thresholds not set (mallopt refused)")
    return ok
