"""The broker process's allocator: large buffers freed by one request are reused by the next
without the kernel mapping their pages in again."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Four 1 MiB buffers held at once and freed, a hundred times: what a few produce requests of
# 1 MiB records do to the heap. Prints the minor page faults per round.
ROUNDS = textwrap.dedent("""
    import resource, sys
    from odradek.server.runner import reuse_freed_buffers
    if sys.argv[1] == "tuned" and not reuse_freed_buffers():
        sys.exit("reuse_freed_buffers() did not apply")
    def requests():
        buffers = [bytearray(1 << 20) for _ in range(4)]
        for buffer in buffers:
            buffer[::4096] = bytes(256)
    requests()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(100):
        requests()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 100)
""")
PAGES_PER_ROUND = 4 * (1 << 20) // 4096


def faults_per_round(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True,
                          timeout=60, check=True)
    return float(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_large_buffers_freed_by_the_broker_process_are_reused_without_page_faults():
    # The default allocator gives the memory back and faults every page in again; the
    # broker's keeps it.
    assert faults_per_round("default") > PAGES_PER_ROUND / 2
    assert faults_per_round("tuned") < 10
