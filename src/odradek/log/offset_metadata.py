"""``LogOffsetMetadata``: an offset with where it sits on disk (Kafka's class of that name).

A delayed fetch compares the position of its fetch offset with the position of the high
watermark (or of the log end offset, for a follower) to know how many bytes it could read,
without reading them. Example: the fetch offset 40 sits at byte 4,096 of the segment whose
base offset is 0, and the high watermark 45 at byte 4,700 of the same segment: 604 bytes
are available. When the two sit in different segments the byte count is unknown, and the
fetch takes that as enough (more data is there, or the log was truncated under it).
"""

from __future__ import annotations

from dataclasses import dataclass

# A position that was not looked up (Kafka's UNKNOWN_FILE_POSITION and unknown segment).
UNKNOWN = -1


# Not frozen, like the other values built for every request: a frozen dataclass's
# __init__ costs four times as much (one object.__setattr__ per field). Nothing
# changes one once built.
@dataclass(slots=True)
class LogOffsetMetadata:
    message_offset: int
    segment_base_offset: int = UNKNOWN
    relative_position_in_segment: int = UNKNOWN

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == UNKNOWN or self.relative_position_in_segment == UNKNOWN

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        """True when this offset's segment is older than ``that``'s; an unknown position
        counts as a different segment."""
        if self.message_offset_only or that.message_offset_only:
            return self.message_offset < that.message_offset
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        return (not self.message_offset_only and not that.message_offset_only
                and self.segment_base_offset == that.segment_base_offset)

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes from ``that`` to this offset, both in the same segment."""
        if not self.on_same_segment(that):
            raise ValueError(f"{self} and {that} are not in the same segment")
        return self.relative_position_in_segment - that.relative_position_in_segment
