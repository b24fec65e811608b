"""Fixtures for the log tests: v2 batches as a producer would send them, and logs in a
temporary directory that are closed after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from producer_batches import produce_batch

from odradek.log import LogConfig, PartitionLog

MakeBatch = Callable[..., bytearray]


@pytest.fixture
def make_batch() -> MakeBatch:
    return produce_batch


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"


@pytest.fixture
def open_log(log_dir: Path) -> Iterator[Callable[..., PartitionLog]]:
    """Opens the log in ``log_dir`` (again, to test reopening); all are closed at the end."""
    opened: list[PartitionLog] = []

    def open_(config: LogConfig = LogConfig(), *, now_ms: int = 0, **kwargs) -> PartitionLog:
        log = PartitionLog.open(log_dir, config, now_ms=now_ms, **kwargs)
        opened.append(log)
        return log

    yield open_
    for log in opened:
        log.close()
