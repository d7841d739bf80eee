"""Storage failures of the segment log as the Kafka errors a partition answers with.

- :class:`kcompat.log.LogStorageError` (a write or read of the log dir failed: ENOSPC, EIO...;
  the log is unchanged) -> KAFKA_STORAGE_ERROR (56), as Kafka's ``KafkaStorageException``.
  Clients retry it (librdkafka, kafka-python and the Java client treat it as retriable), so a
  producer whose broker ran out of disk space succeeds once space is freed.
- :class:`kcompat.log.CorruptLogError` (stored bytes that fail their CRC or framing: damaged on
  disk) -> CORRUPT_MESSAGE (2), Kafka's answer to a fetch of stored data it cannot frame.
"""

from __future__ import annotations

from kcompat.log import CorruptLogError, LogStorageError
from kcompat.protocol.errors import ErrorCode, KafkaError

STORAGE_ERRORS = (LogStorageError, CorruptLogError)


def storage_kafka_error(e: Exception) -> KafkaError:
    """The KafkaError for one of :data:`STORAGE_ERRORS` (message: the log's own, naming the file)."""
    code = ErrorCode.CORRUPT_MESSAGE if isinstance(e, CorruptLogError) else ErrorCode.KAFKA_STORAGE_ERROR
    return KafkaError(code, str(e))
