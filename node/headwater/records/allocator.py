"""glibc allocator settings for a process that moves MiB-sized buffers.

The broker and the clients handle record batches as ~1 MiB ``bytes`` (gRPC
messages, protobuf fields, encoded batches).  Kafka's Java client pools its
batch buffers for the same reason this module exists: allocating such a buffer
fresh each time costs page faults on every one of its pages.  Here the pool is
glibc's heap, kept from handing those buffers back to the kernel; see
:func:`tune_allocator`.  The broker calls it at start, the producer and the
consumer when they are created.
"""

from __future__ import annotations

import ctypes
import functools
import logging

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


@functools.cache
def tune_allocator(
    *, mmap_threshold: int = 32 << 20, trim_threshold: int = 128 << 20, top_pad: int = 16 << 20
) -> bool:
    """Keep MiB-sized buffers on glibc's heap instead of a fresh ``mmap`` each time.

    Every produce request and fetch response is a ~1 MiB buffer (gRPC's, the
    protobuf's, the ``bytes`` of the records).  By default glibc serves those with
    ``mmap`` and returns them with ``munmap``, so each one is page-faulted in anew,
    which doubles the CPU per MiB of both the broker and the producer
    (docs/performance.md, "Figures behind rules in the code").  A fixed mmap
    threshold (32 MiB) and a high trim threshold keep freed
    buffers for reuse.  Process-wide, applied once per
    distinct arguments; a no-op (False) where
    ``mallopt`` does not exist (non-glibc).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own libc
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = all(
        mallopt(param, value) == 1
        for param, value in (
            (_M_MMAP_THRESHOLD, mmap_threshold),
            (_M_TRIM_THRESHOLD, trim_threshold),
            (_M_TOP_PAD, top_pad),
        )
    )
    if not ok:
        log.info("mallopt refused the allocator settings; MiB buffers will be mmap'd")
    return ok
