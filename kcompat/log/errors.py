"""Exceptions raised by the segment log. The broker maps them to Kafka error codes."""

from __future__ import annotations

import errno as _errno


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
    the same partition in two log dirs, a malformed checkpoint file that Kafka would fail the log
    dir for. Start-up refuses it (Kafka: ``InconsistentClusterIdException``, a log dir marked
    offline by ``LogDirFailureChannel``, which halts a broker whose metadata dir fails)."""


class LogStorageError(LogError, OSError):
    """A write (or read) of a log dir failed at the OS level: ENOSPC / EDQUOT (disk full), EIO,
    EROFS... ``errno`` is the OS error number, ``cause`` the original OSError. The operation that
    raised it left the log as it was before (an append is cut back to its previous end, a
    checkpoint keeps its previous content), so retrying it once space returns is safe.

    Kafka: ``KafkaStorageException`` -> KAFKA_STORAGE_ERROR (56). Kafka also marks the log dir
    offline (``LogDirFailureChannel``); kcompat keeps it online and lets the next operation try
    again, so a full disk heals by itself when space is freed.
    """

    def __init__(self, message: str, cause: OSError | None = None, errno: int | None = None) -> None:
        code = errno if errno is not None else (cause.errno if cause is not None else _errno.EIO)
        detail = f"{message}: {cause.strerror or cause}" if cause is not None else message
        OSError.__init__(self, code, detail)
        self.cause = cause

    def __reduce__(self):  # picklable across the cleaner's worker processes
        return (type(self), (self.strerror, None, self.errno))

    @property
    def disk_full(self) -> bool:
        """True for ENOSPC / EDQUOT: the error goes away when space is freed."""
        return self.errno in (_errno.ENOSPC, _errno.EDQUOT)


class CheckpointError(LogError):
    """A malformed checkpoint, ``partition.metadata`` or ``meta.properties`` file."""


class LogClosedError(LogError):
    """An operation on a :class:`~kcompat.log.log.Log` after ``close()``/``delete()``."""
