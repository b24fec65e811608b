"""Running a broker as a process: the allocator, the event loop, signals and a clean
shutdown."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import signal

import uvloop

from odradek.server.broker import Broker
from odradek.server.config import BrokerConfig

log = logging.getLogger(__name__)

# glibc's mallopt() parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# A produce of large records holds a few buffers of its size at once (the frame, the records
# kio parses out of it, the batch stamped before it is written) and frees them once written.
# By default glibc maps such buffers afresh, or gives the top of its heap back to the kernel
# as soon as twice the largest buffer freed so far lies free there, so every request faults
# its pages in again: 1.4-1.8 ms of broker CPU per MiB of 1 MiB records produced, against
# 0.63-0.70 ms with buffers below 16 MiB kept in the heap and its top given back only past
# 64 MiB free (bench/profile.md). The cost is up to that much freed memory kept mapped.
MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024


def reuse_freed_buffers() -> bool:
    """Makes glibc's allocator keep freed buffers below ``MMAP_THRESHOLD_BYTES`` for reuse
    instead of handing their memory back to the kernel; False where the C library has no
    such setting (not glibc), and the process then runs as it would anyway."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
            and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1)


async def serve(config: BrokerConfig) -> None:
    """Runs a broker until SIGINT or SIGTERM, then shuts it down cleanly."""
    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    # What starting built (modules, configs, the partitions and their logs) lives as long as
    # the process. Left in the collector's view, every full collection walks all of it: 14 ms
    # with an empty broker, a pause that shows in the latency tail. Frozen, it is skipped.
    gc.freeze()
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await broker.stop()


def run_broker(config: BrokerConfig) -> None:
    if not reuse_freed_buffers():
        log.info("the C library's allocator keeps its defaults (not glibc)")
    uvloop.run(serve(config))
