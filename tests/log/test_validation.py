"""Record-level produce validation (Kafka ``LogValidator.validateRecord``, KIP-467) through
``Partition.append`` on a real log: every rejected record is reported by its batch index with
Kafka's message, whatever the codec, and nothing is appended."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.isr.partition import AppendPolicy, Partition
from kcompat.log.validation import validate_records
from kcompat.log import Log, LogConfig
from kcompat.protocol import compression
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError, RecordValidationError

NOW = 1_700_000_000_000
LONG_MAX = 2**63 - 1
KEYLESS = [3, 17, 29, 41, 50, 58, 66, 77, 88, 99]
CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]


def partition(path, policy: AppendPolicy) -> Partition:
    log = Log.open(path, LogConfig(), recovery_point=0, log_start_offset=0, clean_shutdown=True, now_ms=NOW)
    return Partition("events", 0, uuid.UUID(int=7), log, policy=policy)


def keyed_batch(keyless, n: int = 100, codec: int = compression.NONE, timestamps=None) -> bytearray:
    ts = timestamps or [NOW] * n
    return bytearray(rb.build_batch([(ts[i], None if i in keyless else b"k%d" % i, b"v%d" % i, ())
                                     for i in range(n)], codec=codec))


def rejected(p: Partition, data: bytearray) -> RecordValidationError:
    with pytest.raises(RecordValidationError) as e:
        p.append(memoryview(data), NOW)
    assert p.log_end_offset == 0, "a rejected batch must append nothing"
    return e.value


@pytest.mark.parametrize("codec", CODECS)
def test_every_keyless_record_on_a_compacted_topic_is_reported(tmp_path, codec):
    p = partition(tmp_path / "events-0", AppendPolicy(compact=True))
    err = rejected(p, keyed_batch(KEYLESS, codec=codec))
    assert err.code == ErrorCode.INVALID_RECORD
    msg = "Compacted topic cannot accept message without key in topic partition events-0"
    assert err.record_errors == [(i, msg) for i in KEYLESS]
    assert err.message == (
        "One or more records have been rejected due to 10 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=3, message='{msg}'), RecordError(batchIndex=17, "
        f"message='{msg}'), RecordError(batchIndex=29, message='{msg}')]")
    assert p.append(memoryview(keyed_batch([], codec=codec)), NOW).base_offset == 0


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), data=st.data())
def test_reported_indexes_are_exactly_the_keyless_ones(n, data):
    keyless = set(data.draw(st.lists(st.integers(0, n - 1), unique=True)))
    codec = data.draw(st.sampled_from(CODECS))
    b = keyed_batch(keyless, n, codec)
    h = rb.parse_header(b, 0)
    if not keyless:
        validate_records(b, h, topic_partition="t-0", now_ms=NOW, compact=True, log_append_time=False)
        return
    with pytest.raises(RecordValidationError) as e:
        validate_records(b, h, topic_partition="t-0", now_ms=NOW, compact=True, log_append_time=False)
    assert [i for i, _ in e.value.record_errors] == sorted(keyless)
    assert f"due to {len(keyless)} record errors in total" in e.value.message


def test_each_out_of_range_timestamp_is_reported_also_below_the_base_timestamp(tmp_path):
    """Timestamps are checked per record, as Kafka does: a record older than the batch's base
    timestamp (a negative delta) is caught although the header's range looks fine."""
    p = partition(tmp_path / "events-0", AppendPolicy(timestamp_before_max_ms=1000, timestamp_after_max_ms=500))
    ts = [NOW, NOW - 5000, NOW, NOW + 2000, NOW - 1000]
    err = rejected(p, keyed_batch([], 5, timestamps=ts))
    assert err.code == ErrorCode.INVALID_TIMESTAMP
    assert err.message == "One or more records have been rejected due to invalid timestamp"
    assert err.record_errors == [
        (1, f"Timestamp {NOW - 5000} of message with offset 1 is out of range. The timestamp should be within "
            f"[{NOW - 1000}, {NOW + 500}]"),
        (3, f"Timestamp {NOW + 2000} of message with offset 3 is out of range. The timestamp should be within "
            f"[{NOW - 1000}, {NOW + 500}]")]
    assert p.append(memoryview(keyed_batch([], 2, timestamps=[NOW, NOW - 1000])), NOW).base_offset == 0


def test_unbounded_side_prints_as_javas_long_arithmetic():
    b = keyed_batch([], 1, timestamps=[NOW + 10])
    with pytest.raises(RecordValidationError) as e:
        validate_records(b, rb.parse_header(b, 0), topic_partition="t-0", now_ms=NOW, compact=False,
                         log_append_time=False, timestamp_after_max_ms=5)
    low = NOW - LONG_MAX
    assert e.value.record_errors[0][1].endswith(f"should be within [{low}, {NOW + 5}]")


def test_a_key_error_and_a_timestamp_error_together_are_invalid_timestamp(tmp_path):
    p = partition(tmp_path / "events-0", AppendPolicy(compact=True, timestamp_after_max_ms=0))
    err = rejected(p, keyed_batch([0], 3, timestamps=[NOW, NOW, NOW + 1]))
    assert err.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in err.record_errors] == [0, 2]


def test_a_producer_may_not_set_log_append_time_without_a_timestamp(tmp_path):
    p = partition(tmp_path / "events-0", AppendPolicy())
    b = bytearray(rb.build_batch([(-1, b"k", b"v", ())], timestamp_type=rb.LOG_APPEND_TIME))
    err = rejected(p, b)
    assert err.code == ErrorCode.INVALID_TIMESTAMP
    assert err.record_errors == [(0, "Invalid timestamp type in message DefaultRecord(offset=0, timestamp=-1, "
                                     "key=1 bytes, value=1 bytes). Producer should not set timestamp type to "
                                     "LogAppendTime.")]


def test_batch_level_errors_carry_no_record_errors(tmp_path):
    p = partition(tmp_path / "events-0", AppendPolicy(compact=True))
    control = bytearray(rb.build_control_batch(rb.CONTROL_COMMIT, 1, 0, 0, NOW))
    with pytest.raises(KafkaError) as e:
        p.append(memoryview(control), NOW)
    assert e.value.code == ErrorCode.INVALID_RECORD and not isinstance(e.value, RecordValidationError)


def test_records_that_overrun_the_batch_are_corrupt_not_a_crash(tmp_path):
    p = partition(tmp_path / "events-0", AppendPolicy(compact=True))
    b = keyed_batch([], 3)
    h = rb.parse_header(b, 0)
    b[rb.HEADER_SIZE] = 0x7E          # first record's length varint: 63 bytes, beyond the batch
    rb.set_base_offset(b, 0, 0)
    b[17:21] = rb.compute_crc(b, 0, h.size).to_bytes(4, "big")
    with pytest.raises(KafkaError) as e:
        p.append(memoryview(b), NOW)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    assert p.log_end_offset == 0


@pytest.mark.parametrize("codec", CODECS)
def test_a_record_larger_than_a_decompressed_piece_is_walked_to_the_end_of_its_batch(tmp_path, codec):
    """One 710 KB record (its tail spans several pieces of the decompressed stream and ends with
    the stream) in a compacted topic, whose rule walks every record: appended whatever the codec.
    A confluent-kafka lz4 producer of such records got CORRUPT_MESSAGE here."""
    p = partition(tmp_path / "events-0", AppendPolicy(compact=True))
    value = bytes([1]) * 300_000 + bytes(range(256)) * 1600
    data = bytearray(rb.build_batch([(NOW, b"big", value, (("n", b"1"),))], codec=codec))
    assert len(list(rb.scan_records(data))) == 1
    assert p.append(memoryview(data), NOW).base_offset == 0


def test_with_kafka_4_bounds_only_a_batch_whose_max_timestamp_is_beyond_them_is_walked(monkeypatch):
    """Kafka 4's defaults (after one hour, before unbounded): the header's maxTimestamp decides;
    a batch of honest timestamps is not walked record by record (the produce hot path)."""
    walked = []
    scan = rb.scan_records
    monkeypatch.setattr(rb, "scan_records", lambda batch, *a: walked.append(1) or scan(batch, *a))
    hour = 3_600_000

    def check(timestamps):
        b = keyed_batch([], len(timestamps), timestamps=timestamps)
        validate_records(b, rb.parse_header(b, 0), topic_partition="t-0", now_ms=NOW, compact=False,
                         log_append_time=False, timestamp_after_max_ms=hour)

    check([NOW - 10 * hour, NOW, NOW + hour])
    assert walked == []
    with pytest.raises(RecordValidationError) as e:
        check([NOW, NOW + hour + 1, NOW])
    assert walked == [1] and [i for i, _ in e.value.record_errors] == [1]
