"""``load_segments``: a partition directory's segments, recovered as needed (Kafka's ``LogLoader``).

After a clean shutdown (the log dir's ``.kafka_cleanshutdown`` marker) every segment is
trusted: its indexes are loaded, sanity-checked (Kafka's cheap check: the last entry points
inside the segment) and only rebuilt if missing or failing it. Otherwise every segment that
may hold data at or above the partition's *recovery point* (offsets below it were fsynced)
is recovered: each batch's length, CRC and offsets are checked and the file is cut at the
first invalid byte, with a log line saying what was cut. Since a crash can only tear the
end of what was being written, data after a cut cannot be trusted either: every later
segment is deleted, as Kafka's ``recoverLog`` does. Example, recovery point 1200 and
segments 0, 1000, 2000: segment 0 is trusted, 1000 and 2000 are recovered; a cut inside
1000 deletes 2000.

Files a crash can leave behind are removed: ``*.deleted`` segment files whose delayed
removal never ran, and index files whose ``.log`` is gone. A cleaner swap a crash
interrupted is settled first, as Kafka's ``LogLoader`` does: ``*.cleaned`` files (a cleaned
segment not finished) are deleted, and a ``.log.swap`` (finished and fsynced, see
:meth:`odradek.log.PartitionLog.replace_segments`) replaces every segment whose base offset
lies in its offset range, then loses its suffix.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Set
from pathlib import Path

from odradek.log.config import LogConfig
from odradek.log.open_files import OpenFiles
from odradek.protocol.records import iter_valid_batches
from odradek.log.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIXES,
    LOG_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    SWAP_FILE_SUFFIX,
    LogSegment,
    segment_file_name,
    segment_path,
)

logger = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex|txnindex)")


def load_segments(
    directory: Path, file_names: Set[str], config: LogConfig, *, files: OpenFiles,
    now_ms: int, recovery_point: int, had_clean_shutdown: bool,
) -> list[LogSegment]:
    """The segments in ``directory``, oldest first; empty if it holds none. ``file_names``
    are the names in ``directory`` (listed once by the caller, for every loader)."""
    file_names = _complete_interrupted_swaps(directory, file_names, files)
    base_offsets = _base_offsets_with_log(directory, file_names)
    segments: list[LogSegment] = []
    for i, base_offset in enumerate(base_offsets):
        next_base = base_offsets[i + 1] if i + 1 < len(base_offsets) else None
        # The segment may hold offsets >= recovery_point unless the next one starts at or
        # below it.
        recover = not had_clean_shutdown and (next_base is None or next_base > recovery_point)
        segment = LogSegment.open(
            directory, base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            now_ms=now_ms, next_segment_base=next_base, recover=recover, files=files,
            file_names=file_names,
        )
        segments.append(segment)
        if segment.bytes_cut and next_base is not None:
            _delete_after_cut(directory, segment, base_offsets[i + 1 :], files)
            break
    return segments


def _base_offsets_with_log(directory: Path, file_names: Set[str]) -> list[int]:
    base_offsets = set()
    for name in file_names:
        if name.endswith(DELETED_FILE_SUFFIX):
            logger.info("%s: removing a deleted segment file left by a stop", directory / name)
            (directory / name).unlink()
            continue
        match = _SEGMENT_FILE.fullmatch(name)
        if match:
            base_offsets.add(int(match.group(1)))
    with_log = []
    for base_offset in sorted(base_offsets):
        if segment_file_name(base_offset, LOG_SUFFIX) in file_names:
            with_log.append(base_offset)
        else:  # an index whose log is gone (a crash while deleting a segment)
            for suffix in INDEX_FILE_SUFFIXES:
                segment_path(directory, base_offset, suffix).unlink(missing_ok=True)
    return with_log


def _delete_after_cut(
    directory: Path, cut: LogSegment, later_base_offsets: list[int], files: OpenFiles
) -> None:
    logger.warning(
        "%s: recovery cut the segment at offset %d; deleting the %d segments after it "
        "(base offsets %s): nothing after a cut can be trusted",
        directory, cut.next_offset, len(later_base_offsets), later_base_offsets,
    )
    for base_offset in later_base_offsets:
        files.close(segment_path(directory, base_offset, LOG_SUFFIX))
        for suffix in SEGMENT_FILE_SUFFIXES:
            segment_path(directory, base_offset, suffix).unlink(missing_ok=True)


def _complete_interrupted_swaps(
    directory: Path, file_names: Set[str], files: OpenFiles
) -> Set[str]:
    """Settles what the cleaner left; returns the names in ``directory`` after that."""
    if not any(name.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)) for name in file_names):
        return file_names
    swapped_logs = []
    for name in sorted(file_names):
        if name.endswith(CLEANED_FILE_SUFFIX):
            logger.info("%s: removing an unfinished cleaned segment file", directory / name)
            (directory / name).unlink()
        elif name.endswith(LOG_SUFFIX + SWAP_FILE_SUFFIX):
            swapped_logs.append(directory / name)
    for swap_log in swapped_logs:
        base_offset = int(swap_log.name[:20])
        # Offsets in the swap file: its last batch ends the range it replaces.
        next_offset = base_offset
        for batch in iter_valid_batches(swap_log.read_bytes()):
            next_offset = batch.next_offset
        replaced = [
            base for base in _segment_base_offsets(directory)
            if base_offset <= base < max(next_offset, base_offset + 1)
        ]
        logger.warning(
            "%s: completing a cleaner swap interrupted by a crash; it replaces the segments "
            "at base offsets %s", swap_log, replaced,
        )
        for base in replaced:
            files.close(segment_path(directory, base, LOG_SUFFIX))
            for suffix in SEGMENT_FILE_SUFFIXES:
                segment_path(directory, base, suffix).unlink(missing_ok=True)
        for suffix in SEGMENT_FILE_SUFFIXES:  # the .log last, as the cleaner renamed them
            swap = segment_path(directory, base_offset, suffix + SWAP_FILE_SUFFIX)
            if swap.exists():
                swap.rename(segment_path(directory, base_offset, suffix))
    # Index swap files without their .log.swap: the .log was swapped in already (its
    # indexes are rebuilt as lost) or never finished.
    for path in directory.iterdir():
        if path.name.endswith(SWAP_FILE_SUFFIX):
            path.unlink()
    return set(os.listdir(directory))


def _segment_base_offsets(directory: Path) -> list[int]:
    return sorted(
        int(match.group(1)) for path in directory.iterdir()
        if (match := _SEGMENT_FILE.fullmatch(path.name)) and match.group(2) == "log"
    )
