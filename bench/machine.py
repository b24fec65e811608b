"""The machine's own limits, with no broker in the way: the "machine" rows of the suite.

    .venv/bin/python -m bench.machine [--runs 3] [--quick] [--scratch-dir DIR]

Each row is a ceiling on what a Python broker could do on this machine, so that a broker's
row can be read against it (a fetch path at 40% of loopback TCP is not the same finding as
one at 95%):

- loopback TCP: a thread ``sendall``s one 4 MiB buffer over and over to 127.0.0.1 while the
  calling thread ``recv_into``s a preallocated 4 MiB buffer, with SO_SNDBUF/SO_RCVBUF raised.
  Both calls release the GIL, so the two threads use both cores as two processes would.
  The "(sendfile)" row sends a page-cached file from the scratch dir with ``os.sendfile``
  instead: the zero-copy path a fetch from a log segment can take.
- disk sequential write: 1 MiB ``os.write``s into a new file, i.e. what the page cache
  absorbs (the ``fdatasync`` that follows is left out of the time); "+ fdatasync" keeps it
  in, i.e. what reaching the disk costs.
- fsync latency: 4 KiB appended then ``fdatasync``ed, again and again: what each produce
  costs a broker that flushes every batch (``flush.messages=1``).

MB is 10^6 bytes (so MB/s compare with the suite's other rows, not MiB/s). The disk rows mean
something only when the scratch dir is on the filesystem the broker's ``log.dirs`` would
use; every file made in it is deleted before returning.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.brokers import HOST
from bench.rows import Row, Run, describe, measure

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
MB = 1_000_000

# Large enough that the per-call cost of Python is lost in the copy; the kernel grants at most
# twice net.core.wmem_max / rmem_max of socket buffer, whatever is asked.
STREAM_CHUNK = 4 * MiB
SOCKET_BUFFER = 4 * MiB
WRITE_CHUNK = 1 * MiB
APPEND_BYTES = 4 * KiB  # one small produce batch


@dataclass(frozen=True)
class Sizes:
    """How much each row moves per run: the quick sizes keep three runs of all rows
    under ~15 s, the full ones under ~60 s, on a 2-core VM."""

    loopback_bytes: int
    sendfile_file_bytes: int  # sent over and over until loopback_bytes have gone
    write_bytes: int
    synced_write_bytes: int
    fsync_appends: int


FULL = Sizes(4 * GiB, 256 * MiB, 2 * GiB, 1 * GiB, 500)
QUICK = Sizes(1 * GiB, 64 * MiB, 256 * MiB, 128 * MiB, 100)


def machine_rows(runs: int, quick: bool, scratch_dir: Path) -> list[Row]:
    """The machine rows, each measured ``runs`` times; the disk ones in ``scratch_dir``."""
    sizes = QUICK if quick else FULL
    disk_note = f"in {scratch_dir} ({filesystem_type(scratch_dir)})"
    return [
        measure(_row("loopback TCP", "MB/s", "sendall -> recv_into, 4 MiB buffers"),
                runs, lambda: stream_sendall(sizes.loopback_bytes)),
        _sendfile_row(runs, sizes, scratch_dir),
        measure(_row("disk sequential write", "MB/s", disk_note), runs,
                lambda: sequential_write(scratch_dir, sizes.write_bytes, timed_sync=False)),
        measure(_row("disk sequential write + fdatasync", "MB/s", disk_note), runs,
                lambda: sequential_write(scratch_dir, sizes.synced_write_bytes, timed_sync=True)),
        measure(_row("fsync latency", "ms", disk_note, higher_is_better=False), runs,
                lambda: fsync_latency(scratch_dir, sizes.fsync_appends)),
    ]


def _row(name: str, unit: str, note: str, higher_is_better: bool = True) -> Row:
    return Row(section="machine", name=name, system="machine", unit=unit,
               higher_is_better=higher_is_better, note=note)


def _sendfile_row(runs: int, sizes: Sizes, scratch_dir: Path) -> Row:
    """The file is written once, before the runs: it stays in the page cache throughout.
    When it cannot be written (a full or missing scratch dir) the row gets one error run,
    as the disk rows do, instead of stopping the suite."""
    row = _row("loopback TCP (sendfile)", "MB/s",
               f"os.sendfile of a {sizes.sendfile_file_bytes // MiB} MiB page-cached file")
    try:
        with scratch_file(scratch_dir) as fd:
            _write_chunks(fd, sizes.sendfile_file_bytes)
            return measure(row, runs, lambda: stream_sendfile(fd, sizes.sendfile_file_bytes,
                                                              sizes.loopback_bytes))
    except OSError as exc:
        row.runs.append({"error": f"writing the file to send: {exc}"})
        return row


# --------------------------------------------------------------------------- loopback TCP


def stream_sendall(total_bytes: int) -> Run:
    """``total_bytes`` (rounded down to whole chunks) sent with ``sendall``."""
    chunk = memoryview(bytearray(STREAM_CHUNK))
    chunks = total_bytes // STREAM_CHUNK

    def send(sock: socket.socket) -> None:
        for _ in range(chunks):
            sock.sendall(chunk)

    return _stream(send, chunks * STREAM_CHUNK)


def stream_sendfile(fd: int, file_bytes: int, total_bytes: int) -> Run:
    """The first ``file_bytes`` of ``fd`` sent with ``os.sendfile`` until ``total_bytes``
    (rounded down to whole files) have gone."""
    passes = total_bytes // file_bytes

    def send(sock: socket.socket) -> None:
        for _ in range(passes):
            offset = 0
            while offset < file_bytes:
                sent = os.sendfile(sock.fileno(), fd, offset, file_bytes - offset)
                if sent == 0:  # the file is shorter than file_bytes: would spin forever
                    raise RuntimeError(f"sendfile: end of file at offset {offset}")
                offset += sent

    return _stream(send, passes * file_bytes)


def _stream(send: Callable[[socket.socket], None], expected_bytes: int) -> Run:
    """Times ``send`` (on another thread) until this thread has received all it sent."""
    buffer = memoryview(bytearray(STREAM_CHUNK))
    received = 0
    # The pool is left last: closing the sockets first unblocks a sender stuck in a send.
    with ThreadPoolExecutor(1, thread_name_prefix="loopback-sender") as pool:
        sender, receiver = _loopback_pair()
        with sender, receiver:
            started = time.perf_counter()
            sending = pool.submit(_send_then_shutdown, sender, send)
            while count := receiver.recv_into(buffer):
                received += count
            seconds = time.perf_counter() - started
            sending.result()  # raises what the sender raised
    if received != expected_bytes:
        raise RuntimeError(f"received {received} bytes of {expected_bytes}")
    return {"value": received / MB / seconds, "bytes": received, "seconds": seconds}


def _send_then_shutdown(sock: socket.socket, send: Callable[[socket.socket], None]) -> None:
    try:
        send(sock)
    finally:
        sock.shutdown(socket.SHUT_WR)  # the receiver's end of data, even when send failed


def _loopback_pair() -> tuple[socket.socket, socket.socket]:
    """A connected (sender, receiver) pair on 127.0.0.1 with raised socket buffers.

    The buffers are set before connecting: the TCP window scale is agreed in the handshake.
    """
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)  # inherited
        listener.bind((HOST, 0))
        listener.listen(1)
        sender = socket.socket()
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
        sender.connect(listener.getsockname())
        receiver, _ = listener.accept()
    return sender, receiver


# --------------------------------------------------------------------------- disk


def sequential_write(scratch_dir: Path, total_bytes: int, timed_sync: bool) -> Run:
    """``total_bytes`` written in 1 MiB chunks to a new file, then ``fdatasync``ed.

    The ``fdatasync`` is always done, timed or not: otherwise the next run would start
    while the kernel writes this one's dirty pages back.
    """
    with scratch_file(scratch_dir) as fd:
        started = time.perf_counter()
        written = _write_chunks(fd, total_bytes)
        written_at = time.perf_counter()
        os.fdatasync(fd)
        synced_at = time.perf_counter()
    seconds = (synced_at if timed_sync else written_at) - started
    return {"value": written / MB / seconds, "bytes": written, "seconds": seconds,
            "fdatasync_s": synced_at - written_at}


def fsync_latency(scratch_dir: Path, appends: int) -> Run:
    """Median, p99 and max milliseconds of one 4 KiB append plus its ``fdatasync``.

    The file grows with each append, so each ``fdatasync`` also commits the new size to the
    filesystem's journal, as a log segment's would.
    """
    block = os.urandom(APPEND_BYTES)
    latencies_ms = []
    with scratch_file(scratch_dir) as fd:
        for _ in range(appends):
            started = time.perf_counter_ns()
            os.write(fd, block)
            os.fdatasync(fd)
            latencies_ms.append((time.perf_counter_ns() - started) / 1e6)
    return {"value": statistics.median(latencies_ms),
            "p99_ms": statistics.quantiles(latencies_ms, n=100)[98],
            "max_ms": max(latencies_ms)}


def _write_chunks(fd: int, total_bytes: int) -> int:
    """Writes ``total_bytes`` (rounded down to whole 1 MiB chunks); returns the bytes written.

    The bytes are random so that nothing below (a compressing filesystem, a virtual disk that
    turns zeros into holes) can skip the writing.
    """
    chunk = memoryview(os.urandom(WRITE_CHUNK))
    written = sum(os.write(fd, chunk) for _ in range(total_bytes // WRITE_CHUNK))
    if written != total_bytes // WRITE_CHUNK * WRITE_CHUNK:
        raise OSError(f"short writes: {written} bytes of {total_bytes}")
    return written


@contextmanager
def scratch_file(scratch_dir: Path) -> Iterator[int]:
    """The descriptor of a new file in ``scratch_dir`` (read-write); closed and deleted on exit."""
    fd, name = tempfile.mkstemp(prefix="bench-machine-", dir=scratch_dir)
    try:
        yield fd
    finally:
        os.close(fd)
        os.unlink(name)


def filesystem_type(path: Path) -> str:
    """The type of the filesystem ``path`` is on ("ext4", "tmpfs", ...), from /proc/mounts:
    fdatasync on tmpfs or overlayfs is not fdatasync on a disk. "unknown" off Linux."""
    resolved = str(path.resolve())
    best, best_type = "", "unknown"
    try:
        with open("/proc/self/mounts") as mounts:
            for line in mounts:
                _device, mount_point, fs_type = line.split()[:3]
                # Mount points with spaces are written \040 and never match: the root does.
                inside = resolved == mount_point or resolved.startswith(
                    mount_point.rstrip("/") + "/")
                if inside and len(mount_point) >= len(best):
                    best, best_type = mount_point, fs_type
    except OSError:
        pass
    return best_type


# --------------------------------------------------------------------------- command line


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.machine",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per row (default 3)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (~15 s in all)")
    parser.add_argument("--scratch-dir", type=Path, default=Path("."),
                        help="where the disk rows' temporary directory is made (default: the "
                             "current directory, so its filesystem is measured; put it on "
                             "the filesystem of the broker's log.dirs)")
    args = parser.parse_args()
    scratch_dir = Path(tempfile.mkdtemp(prefix="bench-machine-", dir=args.scratch_dir))
    try:
        rows = machine_rows(args.runs, args.quick, scratch_dir)
    finally:
        shutil.rmtree(scratch_dir)
    for row in rows:
        print(describe(row))


if __name__ == "__main__":
    main()
