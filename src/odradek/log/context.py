"""What a ``LocalLog`` needs from its owner, and how an I/O failure reaches the owner.

The owner (the ``LogManager``; :class:`StandaloneLogContext` for a log on its own) provides
the broker's bounded set of open descriptors, takes a failed log dir offline, and removes
deleted segments' files after ``file.delete.delay.ms``. Passing it in keeps the log free of
any knowledge of the other logs, threads or timers (the hypercorn habit: the runtime is
injected).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from odradek.log.errors import KafkaStorageError
from odradek.log.open_files import OpenFiles

if TYPE_CHECKING:
    from odradek.log.local_log import LocalLog
    from odradek.log.segment import LogSegment

logger = logging.getLogger(__name__)


class LogContext(Protocol):
    """What a log needs from its owner: the broker's open descriptors, a place to report a
    failed log dir, and the delayed removal of deleted segment files."""

    files: OpenFiles

    def storage_failed(self, log: LocalLog, error: OSError) -> None:
        """``log``'s dir failed. May be called from the flush thread."""

    def delete_later(self, log: LocalLog, segments: list[LogSegment]) -> None:
        """Removes the files of ``segments`` (renamed ``*.deleted``) after
        ``log.config.file_delete_delay_ms``."""


class StandaloneLogContext:
    """A log on its own (tests, tools): its own descriptors; a failure takes only this log
    offline; deleted segments' files are removed at once."""

    def __init__(self, files: OpenFiles | None = None) -> None:
        self.files = files if files is not None else OpenFiles()

    def storage_failed(self, log: LocalLog, error: OSError) -> None:
        log.take_offline(str(error))

    def delete_later(self, log: LocalLog, segments: list[LogSegment]) -> None:
        for segment in segments:
            segment.remove_files()


Method = TypeVar("Method", bound=Callable)


def on_disk(method: Method) -> Method:
    """For the owner thread's methods that touch the log's files: refused on an offline
    log; an ``OSError`` takes the log offline and is raised as ``KafkaStorageError``."""

    @functools.wraps(method)
    def guarded(self: LocalLog, *args, **kwargs):
        self.check_online()
        try:
            return method(self, *args, **kwargs)
        except KafkaStorageError:
            raise
        except OSError as e:
            logger.error("%s: I/O error, taking the log offline: %s", self.directory, e)
            self.take_offline(str(e))
            self.context.storage_failed(self, e)
            raise KafkaStorageError(f"{self.name}: {e}") from e

    return guarded  # type: ignore[return-value]
