"""Record-level validation of a produced batch (Kafka ``LogValidator.validateRecord``, KIP-467).

Most of the produce path reads only the batch header (DESIGN.md section 4). Some rules are about
individual records, and Kafka reports every record that breaks one, by its index in the batch,
so that a client fails only those records and retries the rest:

- a compacted topic (``cleanup.policy`` contains ``compact``) needs a key on every record
  (INVALID_RECORD, "Compacted topic cannot accept message without key in topic partition <tp>");
- with CreateTime, a record timestamp other than -1 must lie within
  [now - ``message.timestamp.before.max.ms``, now + ``message.timestamp.after.max.ms``] (KIP-937;
  INVALID_TIMESTAMP);
- a producer may not set the LogAppendTime timestamp type itself (INVALID_TIMESTAMP) unless the
  topic uses CreateTime and the batch carries a timestamp.

The records are walked only when one of these rules can apply (a compacted topic, or a finite
timestamp bound, or a LogAppendTime batch), with :func:`kcompat.protocol.records.scan_records`,
which reads length prefixes and deltas and copies nothing.
"""

from __future__ import annotations

from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError, RecordValidationError

LONG_MAX = 2**63 - 1


def _java_long(v: int) -> int:
    """``v`` wrapped to a signed 64-bit value, as Java's long arithmetic in Kafka's messages."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def validate_records(records, h: rb.BatchHeader, *, topic_partition: str, now_ms: int, compact: bool,
                     log_append_time: bool, timestamp_before_max_ms: int = LONG_MAX,
                     timestamp_after_max_ms: int = LONG_MAX) -> None:
    """Check every record of the one batch ``records`` (bytes-like, header ``h``, as produced:
    offsets relative to the producer's base offset). ``topic_partition``: ``"<topic>-<partition>"``
    for the messages; ``log_append_time``: the topic's ``message.timestamp.type`` is
    LogAppendTime; bounds in ms (``LONG_MAX``: unbounded).

    Raises :class:`RecordValidationError` (INVALID_TIMESTAMP if any record has an invalid
    timestamp, else INVALID_RECORD) listing every rejected record with Kafka's messages, or
    KafkaError(CORRUPT_MESSAGE) if the records cannot be walked."""
    batch_lat = h.timestamp_type == rb.LOG_APPEND_TIME
    check_range = not log_append_time and (timestamp_before_max_ms < LONG_MAX or timestamp_after_max_ms < LONG_MAX)
    if not (compact or check_range or batch_lat) or h.is_control:
        return
    low = _java_long(now_ms - timestamp_before_max_ms)
    high = _java_long(now_ms + timestamp_after_max_ms)
    errors: list[tuple[int, str, bool]] = []   # (batch index, message, is a timestamp error)
    try:
        for index, rec in enumerate(rb.scan_records(records)):
            if compact and rec.key_length < 0:
                errors.append((index, f"Compacted topic cannot accept message without key in topic partition "
                                      f"{topic_partition}", False))
                continue
            timestamp = h.max_timestamp if batch_lat else h.base_timestamp + rec.timestamp_delta
            if not log_append_time and timestamp != rb.NO_TIMESTAMP:
                diff = now_ms - timestamp
                if diff > timestamp_before_max_ms or -diff > timestamp_after_max_ms:
                    errors.append((index, f"Timestamp {timestamp} of message with offset "
                                          f"{h.base_offset + rec.offset_delta} is out of range. The timestamp "
                                          f"should be within [{low}, {high}]", True))
            elif batch_lat:
                errors.append((index, f"Invalid timestamp type in message DefaultRecord(offset="
                                      f"{h.base_offset + rec.offset_delta}, timestamp={timestamp}, key="
                                      f"{max(rec.key_length, 0)} bytes, value={max(rec.value_length, 0)} bytes). "
                                      f"Producer should not set timestamp type to LogAppendTime.", True))
    except rb.CorruptRecordError as e:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{e} in topic partition {topic_partition}") from None
    if errors:
        raise _validation_error(errors)


def _validation_error(errors: list[tuple[int, str, bool]]) -> RecordValidationError:
    """Kafka ``LogValidator.processRecordErrors``: the message names the count and shows the first
    three as Java's ``List<RecordError>.toString()`` does."""
    record_errors = [(i, m) for i, m, _ in errors]
    if any(is_ts for _, _, is_ts in errors):
        return RecordValidationError(ErrorCode.INVALID_TIMESTAMP,
                                     "One or more records have been rejected due to invalid timestamp",
                                     record_errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
    return RecordValidationError(ErrorCode.INVALID_RECORD,
                                 f"One or more records have been rejected due to {len(record_errors)} record "
                                 f"errors in total, and only showing the first three errors at most: [{shown}]",
                                 record_errors)
