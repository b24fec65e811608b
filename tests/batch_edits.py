"""Editing a record batch in place for tests: a field changed, its CRC made right again."""

from __future__ import annotations

import struct

from crc32c import crc32c


def restamp_crc(batch: bytearray) -> bytearray:
    """Recompute the CRC after editing a CRC'd field, so a test reaches the check after it."""
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return batch


def patched(batch: bytes, fmt: str, offset: int, value: int, *, fix_crc=True) -> bytearray:
    edited = bytearray(batch)
    struct.pack_into(fmt, edited, offset, value)
    return restamp_crc(edited) if fix_crc else edited
