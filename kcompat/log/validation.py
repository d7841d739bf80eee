"""Validation of a produced batch before it is appended: Kafka's ``LogValidator`` and the
framing checks of ``ProduceRequest.validateRecords`` / ``UnifiedLog.analyzeAndValidateRecords``
for RecordBatch v2. Pure: bytes and settings in, a header or a Kafka error out; no log, no broker,
so tests call it directly.

:func:`validate_batch` checks the batch as a whole, reading only its 61-byte header and CRC32C
(DESIGN.md section 4): exactly one complete magic-2 batch at base offset 0, size within
``max.message.bytes``, CRC, no client control batches, consistent offsets and count.
:func:`assign_offsets` and :func:`stamp_log_append_time` rewrite it in place for the append.

:func:`validate_records` applies the rules about individual records; Kafka reports every record
that breaks one, by its index in the batch, so that a client fails only those records and
retries the rest (KIP-467):

- a compacted topic (``cleanup.policy`` contains ``compact``) needs a key on every record
  (INVALID_RECORD, "Compacted topic cannot accept message without key in topic partition <tp>");
- with CreateTime, a record timestamp other than -1 must lie within
  [now - ``message.timestamp.before.max.ms``, now + ``message.timestamp.after.max.ms``] (KIP-937;
  INVALID_TIMESTAMP);
- a producer may not set the LogAppendTime timestamp type itself (INVALID_TIMESTAMP) unless the
  topic uses CreateTime and the batch carries a timestamp.

The records are walked only when one of these rules can apply (a compacted topic, a LogAppendTime
batch, a finite ``message.timestamp.before.max.ms``, or a batch whose header ``maxTimestamp`` is
beyond ``message.timestamp.after.max.ms``), with :func:`kcompat.protocol.records.scan_records`,
which reads length prefixes and deltas and copies nothing. The header's ``maxTimestamp`` is
trusted there as the append path trusts it for the time index: with Kafka 4's default bounds
(after one hour, before unbounded) a batch of honest timestamps is checked from its header alone,
where walking 100-byte records would cost more than appending them.
"""

from __future__ import annotations

from kcompat.protocol import records as rb
from kcompat.protocol.errors import BatchRefusedError, ErrorCode, KafkaError, RecordValidationError

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
    # a record can break a bound only if the lower one is finite or the batch's newest timestamp
    # (its header's maxTimestamp) is beyond the upper one
    check_range = not log_append_time and (
        timestamp_before_max_ms < LONG_MAX
        or (h.max_timestamp != rb.NO_TIMESTAMP and h.max_timestamp - now_ms > timestamp_after_max_ms))
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


def validate_batch(records, *, max_message_bytes: int) -> rb.BatchHeader:
    """Check that ``records`` (bytes-like, as produced) is exactly one whole RecordBatch v2 a
    client may write, and return its header (Kafka ``LogValidator.validateBatch`` and the framing
    checks before it). ``max_message_bytes``: the topic's ``max.message.bytes``.

    Raises KafkaError: INVALID_RECORD (no batch, several batches, an old magic, a base offset other
    than 0, a control batch, no records or offsets that do not match the count), CORRUPT_MESSAGE
    (malformed framing, CRC32C mismatch), MESSAGE_TOO_LARGE (size above ``max_message_bytes``).
    The framing errors (no whole batch, several batches, an old magic: Kafka's
    ``ProduceRequest.validateRecords``, checked before the log) are :class:`BatchRefusedError`."""
    if records is None or len(records) == 0:
        raise BatchRefusedError(ErrorCode.INVALID_RECORD,
                                "Produce requests must have at least one record batch per partition")
    try:
        h = rb.parse_header(records, 0)
    except rb.CorruptRecordError as e:
        raise _unframed_batch_error(records, str(e)) from None
    size = h.size
    if size > len(records):
        raise _unframed_batch_error(records, "Record batch is truncated")
    if size < len(records):
        raise BatchRefusedError(ErrorCode.INVALID_RECORD,
                                "Produce requests with version 3 or later must contain exactly one record batch")
    if h.base_offset != 0:
        # Kafka's UnifiedLog.analyzeAndValidateRecords, for client batches, before size and CRC
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"The baseOffset of the record batch in the append should be 0, but it is {h.base_offset}")
    if size > max_message_bytes:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                         f"The record batch size {size} bytes exceeds max.message.bytes ({max_message_bytes})")
    if not rb.crc_valid(records, 0, h):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Record batch CRC does not match")
    if h.is_control:
        raise KafkaError(ErrorCode.INVALID_RECORD, "Clients may not write control records")
    if h.records_count <= 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "Record batch has no records")
    if h.last_offset_delta + 1 != h.records_count:
        # Kafka's LogValidator.validateBatch for client batches: offsets would not match records
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"Inconsistent batch offset range [0, {h.last_offset_delta}] and count of "
                         f"records {h.records_count}")
    return h


def _unframed_batch_error(records, detail: str) -> KafkaError:
    """Kafka's answer when the produced bytes do not start with one whole v2 batch
    (``ByteBufferLogInputStream.nextBatch`` + ``ProduceRequest.validateRecords``): no complete
    batch (fewer than 17 bytes, or batchLength beyond the bytes sent) -> INVALID_RECORD; a
    batchLength below 14 or a magic outside 0..2 -> CORRUPT_MESSAGE; magic 0 or 1 -> INVALID_RECORD;
    a whole magic-2 batch that is still malformed (shorter than its header) -> CORRUPT_MESSAGE."""
    n = len(records)
    no_batch = BatchRefusedError(ErrorCode.INVALID_RECORD,
                                 f"Produce requests with version 3 or later must have at least one record batch "
                                 f"per partition ({detail})")
    if n < rb.LOG_OVERHEAD:
        return no_batch
    length = int.from_bytes(records[8:12], "big", signed=True)
    if length < 14:
        return KafkaError(ErrorCode.CORRUPT_MESSAGE,
                          f"Record size {length} is less than the minimum record overhead (14)")
    if n < 17:
        return no_batch
    magic = records[16] - 256 if records[16] > 127 else records[16]
    if not 0 <= magic <= rb.MAGIC:
        return KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Invalid magic found in record: {magic}")
    if length + rb.LOG_OVERHEAD > n:
        return no_batch
    if magic != rb.MAGIC:
        return BatchRefusedError(ErrorCode.INVALID_RECORD, "Produce requests with version 3 or later are only "
                                                           "allowed to contain record batches with magic version 2")
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, detail)


def stamp_log_append_time(records, h: rb.BatchHeader, now_ms: int) -> None:
    """LogAppendTime topics: set the batch's timestamp type and max timestamp to ``now_ms`` (ms)
    in place and recompute its CRC (Kafka ``LogValidator``, ``setMaxTimestamp``)."""
    rb.set_log_append_time(records, 0, h.size, now_ms)


def assign_offsets(records, h: rb.BatchHeader, base_offset: int, leader_epoch: int) -> int:
    """Rewrite the batch's baseOffset and partitionLeaderEpoch in place (neither is covered by the
    CRC) for an append at ``base_offset``; returns the batch's last offset."""
    rb.set_base_offset(records, 0, base_offset)
    rb.set_partition_leader_epoch(records, 0, leader_epoch)
    return base_offset + h.last_offset_delta
