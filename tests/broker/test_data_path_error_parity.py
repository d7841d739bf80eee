"""Error answers of Produce and Fetch, field by field, as Apache Kafka 3.9.2 and 4.3.1 give them
(probed side by side with raw requests):

- Produce v8+: ``error_message`` is null except for record-level rejections (KIP-467,
  ``RecordValidationException``: Kafka's ``LogAppendResult.hasCustomErrorMessage``); the
  partition's log start offset comes with the errors the log raises, except UNKNOWN_TOPIC_OR_PARTITION,
  MESSAGE_TOO_LARGE, CORRUPT_MESSAGE and the like (``ReplicaManager.appendToLocalLog``), and never
  with the framing errors of ``ProduceRequest.validateRecords``; a client batch whose base offset
  is not 0 is INVALID_RECORD (``UnifiedLog.analyzeAndValidateRecords``).
- Fetch: a partition that fails answers high watermark, last stable offset and log start offset
  -1 and null aborted transactions (``ReplicaManager.createLogReadResult``), OFFSET_OUT_OF_RANGE
  included; the errors ``KafkaApis`` answers before reading (unknown topic, partition or topic
  id) have an empty aborted transactions list (``FetchResponse.partitionResponse``).
"""

from __future__ import annotations

import uuid

import pytest

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.delete_records import DeleteRecordsRequest
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.records import build_batch
from kcompat.testing import wire
from tests.robustness.util import NOW_MS, batch, create_topic, produce, read_records


def _control_batch() -> bytes:
    return build_batch([(NOW_MS(), None, b"v", ())], control=True)


def _bad_crc_batch() -> bytes:
    b = bytearray(batch([b"a", b"b"]))
    b[-1] ^= 0xFF   # inside the CRC-covered area
    return bytes(b)


# (topic config, partition, batch, error, log start offset answered)
PRODUCE_ERRORS = {
    "unknown partition": ({}, 7, lambda: batch([b"v"]), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    "too large": ({"max.message.bytes": "1000"}, 0, lambda: batch([b"x" * 2000]), ErrorCode.MESSAGE_TOO_LARGE, -1),
    "bad crc": ({}, 0, _bad_crc_batch, ErrorCode.CORRUPT_MESSAGE, -1),
    "two batches": ({}, 0, lambda: batch([b"one"]) + batch([b"two"]), ErrorCode.INVALID_RECORD, -1),
    "control batch": ({}, 0, _control_batch, ErrorCode.INVALID_RECORD, 0),
    "offsets not matching the count": ({}, 0, lambda: build_batch([(NOW_MS(), None, v, ()) for v in (b"a", b"b")],
                                                                   offset_deltas=[0, 0]), ErrorCode.INVALID_RECORD, 0),
    "base offset 5": ({}, 0, lambda: build_batch([(NOW_MS(), None, b"a", ())], base_offset=5),
                      ErrorCode.INVALID_RECORD, 0),
}


@pytest.mark.parametrize("version", [9, 11])
@pytest.mark.parametrize("case", sorted(PRODUCE_ERRORS))
def test_produce_errors_other_than_record_level_carry_no_message(broker, case, version):
    configs, partition, make, code, log_start = PRODUCE_ERRORS[case]
    topic = f"perr-{case.replace(' ', '-')}-{version}"
    create_topic(broker.bootstrap, topic, configs=configs)
    r = produce(broker.bootstrap, topic, partition, make(), version=version)
    assert (r.error_code, r.error_message, r.base_offset, r.log_append_time_ms, r.log_start_offset, r.record_errors) \
        == (code, None, -1, -1, log_start, [])
    assert read_records(broker.bootstrap, topic, 0) == []


@pytest.mark.parametrize("version", [9, 11])
def test_produce_to_a_missing_topic_carries_no_message(broker, version):
    r = produce(broker.bootstrap, "bad name", 0, batch([b"v"]), version=version)   # never auto-created
    assert (r.error_code, r.error_message, r.log_start_offset) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, -1)


def test_record_level_rejections_keep_their_message(broker):
    topic = "perr-timestamp"
    create_topic(broker.bootstrap, topic, configs={"message.timestamp.before.max.ms": "3600000"})
    old = NOW_MS() - 48 * 3600 * 1000
    r = produce(broker.bootstrap, topic, 0, batch([b"a"], ts=old), version=9)
    assert (r.error_code, r.error_message, r.log_start_offset) == \
        (ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", 0)
    assert [e.batch_index for e in r.record_errors] == [0]


def _fetch(bootstrap: str, parts, version: int, isolation: int = 0, topic_ids: dict | None = None):
    """``parts``: ``[(topic, partition, offset)]``; the response's partitions in request order."""
    F = FetchRequest
    topics: dict[str, list] = {}
    for t, p, offset in parts:
        topics.setdefault(t, []).append(F.FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20))
    ft = [F.FetchTopic(topic_id=(topic_ids or {}).get(t, uuid.UUID(int=12345)), partitions=ps) if version >= 13
          else F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()]
    resp = wire.call(bootstrap, F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                  isolation_level=isolation, session_id=0, session_epoch=-1, topics=ft), version)
    assert resp.error_code == 0, resp
    return [pd for t in resp.responses for pd in t.partitions]


@pytest.fixture(scope="module")
def ten_records(broker):
    """Topics ``perr-ten`` (offsets 0-9) and ``perr-trimmed`` (0-9, log start 4); their ids."""
    for t in ("perr-ten", "perr-trimmed"):
        create_topic(broker.bootstrap, t)
        assert produce(broker.bootstrap, t, 0, batch([b"x%d" % i for i in range(10)])).error_code == 0
    D = DeleteRecordsRequest
    resp = wire.call(broker.bootstrap, D(topics=[D.DeleteRecordsTopic(name="perr-trimmed", partitions=[
        D.DeleteRecordsPartition(partition_index=0, offset=4)])], timeout_ms=5000), 2)
    assert resp.topics[0].partitions[0].error_code == 0
    md = wire.call(broker.bootstrap, MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    return {t.name: t.topic_id for t in md.topics}


@pytest.mark.parametrize("isolation", [0, 1])
@pytest.mark.parametrize("version", [4, 11, 12, 13])
def test_fetch_out_of_range_answers_no_offsets(broker, ten_records, version, isolation):
    above, below = _fetch(broker.bootstrap, [("perr-ten", 0, 1000), ("perr-trimmed", 0, 2)], version, isolation,
                          ten_records)
    [good] = _fetch(broker.bootstrap, [("perr-trimmed", 0, 4)], version, isolation, ten_records)
    for pd in (above, below):
        assert (pd.error_code, pd.high_watermark, pd.last_stable_offset, pd.aborted_transactions,
                pd.preferred_read_replica, len(pd.records)) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, None, -1, 0)
        if version >= 5:
            assert pd.log_start_offset == -1
    assert (good.error_code, good.high_watermark, good.last_stable_offset) == (0, 10, 10)
    assert good.log_start_offset == (4 if version >= 5 else -1)
    assert good.aborted_transactions == ([] if isolation else None) and len(good.records) > 0


@pytest.mark.parametrize("version", [4, 12, 13])
def test_fetch_of_an_unknown_topic_or_partition_answers_an_empty_aborted_list(broker, ten_records, version):
    parts = [("perr-ten", 7, 0), ("perr-no-such-topic", 0, 0)]
    for pd in _fetch(broker.bootstrap, parts, version, 1, ten_records):
        expected = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 and pd.partition_index == 0 \
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (pd.error_code, pd.high_watermark, pd.last_stable_offset, pd.aborted_transactions,
                len(pd.records)) == (expected, -1, -1, [], 0)
