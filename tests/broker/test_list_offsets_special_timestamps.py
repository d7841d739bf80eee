"""ListOffsets special timestamps against the version that asks for them.

Kafka (``KafkaApis.handleListOffsetRequestV1AndAbove``, 3.9) answers a partition whose negative
timestamp the request's version does not define with UNSUPPORTED_VERSION instead of guessing:
-1/-2 from v1, MAX_TIMESTAMP (-3) from v7, EARLIEST_LOCAL (-4) from v8, LATEST_TIERED (-5) from v9,
EARLIEST_PENDING_UPLOAD (-6) from v11, any other negative value never. librdkafka 2.0.2 (Debian's kcat) sends -3 with an old version.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.broker.handlers.list_offsets import timestamp_unsupported
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.testing import wire

UNSUPPORTED_VERSION, NONE, UNKNOWN_TOPIC_OR_PARTITION = 35, 0, 3


def _list(bootstrap: str, topic: str, version: int, *timestamps: int):
    """One ListOffsets request of ``version`` asking partition i for ``timestamps[i]`` (a partition named
    twice would be INVALID_REQUEST); returns the partition responses in that order."""
    parts = [ListOffsetsRequest.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1, timestamp=ts)
             for i, ts in enumerate(timestamps)]
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0,
                             topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=parts)])
    (t,) = wire.call(bootstrap, req, version).topics
    return sorted(t.partitions, key=lambda p: p.partition_index)


@pytest.fixture(scope="module")
def topic(broker):
    """Three partitions, each holding three records with timestamps 1000, 9000, 5000 (one batch each)."""
    name = f"lo-special-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the future resolves
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for partition in range(3):
        for i, ts in enumerate((1_000, 9_000, 5_000)):
            p.produce(name, b"v%d" % i, partition=partition, timestamp=ts)
            p.flush(10)
    return name


def test_rule_follows_kafkas_minimum_versions():
    assert [v for v in range(0, 10) if not timestamp_unsupported(-3, v)] == [7, 8, 9]
    assert [v for v in range(0, 10) if not timestamp_unsupported(-4, v)] == [8, 9]
    assert not timestamp_unsupported(-1, 1) and not timestamp_unsupported(-2, 1)
    assert timestamp_unsupported(-5, 8) and not timestamp_unsupported(-5, 9)
    assert timestamp_unsupported(-6, 8) and timestamp_unsupported(-6, 10) and not timestamp_unsupported(-6, 11)
    assert timestamp_unsupported(-100, 8) and timestamp_unsupported(-100, 11)
    assert not timestamp_unsupported(0, 1) and not timestamp_unsupported(123, 1)


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_max_timestamp_before_v7_is_unsupported_version(broker, topic, version):
    (p,) = _list(broker.bootstrap, topic, version, -3)
    assert (p.error_code, p.offset, p.timestamp) == (UNSUPPORTED_VERSION, -1, -1)


def test_max_timestamp_from_v7_finds_the_largest_timestamp(broker, topic):
    (p7,) = _list(broker.bootstrap, topic, 7, -3)
    assert (p7.error_code, p7.offset, p7.timestamp) == (NONE, 1, 9_000)


def test_only_the_unsupported_partition_fails(broker, topic):
    latest, maxts, by_time = _list(broker.bootstrap, topic, 5, -1, -3, 2_000)
    assert (latest.error_code, latest.offset) == (NONE, 3)
    assert maxts.error_code == UNSUPPORTED_VERSION
    assert (by_time.error_code, by_time.offset, by_time.timestamp) == (NONE, 1, 9_000)


def test_earliest_local_needs_v8_and_unknown_specials_are_refused(broker, topic):
    (v7,) = _list(broker.bootstrap, topic, 7, -4)
    (v8,) = _list(broker.bootstrap, topic, 8, -4)
    assert v7.error_code == UNSUPPORTED_VERSION
    assert (v8.error_code, v8.offset) == (NONE, 0)
    assert [p.error_code for p in _list(broker.bootstrap, topic, 8, -5, -6)] == [UNSUPPORTED_VERSION] * 2


def test_version_is_checked_before_the_partition_is_looked_up(broker):
    missing = f"lo-missing-{uuid.uuid4().hex[:8]}"
    (old,) = _list(broker.bootstrap, missing, 1, -3)
    (new,) = _list(broker.bootstrap, missing, 7, -3)
    assert old.error_code == UNSUPPORTED_VERSION
    assert new.error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_earliest_pending_upload_needs_v11_and_is_minus_1_on_a_topic_that_is_not_tiered(broker, topic):
    """KIP-1023: Kafka 4.3.1's ``UnifiedLog.fetchEarliestPendingUploadOffset`` answers offset -1,
    epoch -1 when remote storage is off for the topic; v10 (TimeoutMs, KIP-1075) does not know -6."""
    (v10,) = _list(broker.bootstrap, topic, 10, -6)
    assert v10.error_code == UNSUPPORTED_VERSION
    (v11,) = _list(broker.bootstrap, topic, 11, -6)
    assert (v11.error_code, v11.offset, v11.timestamp, v11.leader_epoch) == (NONE, -1, -1, -1)
    earliest, latest = _list(broker.bootstrap, topic, 10, -2, -1)     # v10 answers as before
    assert (earliest.error_code, earliest.offset, latest.error_code, latest.offset) == (NONE, 0, NONE, 3)
