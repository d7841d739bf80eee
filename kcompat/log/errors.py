"""Exceptions raised by the segment log. The broker maps them to Kafka error codes."""

from __future__ import annotations


class LogError(Exception):
    """Base class of every error raised by :mod:`kcompat.log`."""


class OffsetOutOfRangeError(LogError):
    """A read below the log start offset or above the log end offset.

    Kafka: ``OffsetOutOfRangeException`` -> error code OFFSET_OUT_OF_RANGE (1).
    """

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class CorruptLogError(LogError):
    """Stored batch data that cannot be framed while serving a read (a segment damaged below the
    recovery point, e.g. by a disk fault). Kafka: CORRUPT_MESSAGE (2) / KAFKA_STORAGE_ERROR (56)."""


class LogDirError(LogError):
    """A log directory that cannot be used: ``meta.properties`` of another cluster or node,
    the same partition in two log dirs. Kafka: ``InconsistentClusterIdException`` and friends."""


class CheckpointError(LogError):
    """A malformed checkpoint, ``partition.metadata`` or ``meta.properties`` file."""


class LogClosedError(LogError):
    """An operation on a :class:`~kcompat.log.log.Log` after ``close()``/``delete()``."""
