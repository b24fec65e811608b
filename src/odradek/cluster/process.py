"""What the local servers (ZooKeeper, brokers) share as background processes: state files
another process can read, the end of a log for errors, waiting for an exit, and telling a
live process of ours from one that reused its pid."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

POLL_INTERVAL_S = 0.05


def write_json(path: Path, value: object) -> None:
    """Replaces ``path`` atomically: another process reading it never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value) + "\n")
    tmp.replace(path)


def log_tail(path: Path, lines: int) -> str:
    with path.open(errors="replace") as log:
        return "".join(deque(log, lines))


def wait_for_exit(running: Callable[[], bool], timeout_s: float) -> bool:
    """Waits until ``running()`` is false; False if it still is after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while running():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL_S)
    return True


def command_line(pid: int) -> list[bytes]:
    """Process ``pid``'s arguments; empty when it is gone or a zombie."""
    try:
        return [arg for arg in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if arg]
    except OSError:
        return []
