"""Fetch sizes against a real broker: the response-level ``max_bytes`` across partitions (KIP-74),
and a long poll that must wake for new records even after the log shrank while it waited.

Kafka fills partitions in request order until ``max_bytes`` is used up, never splitting a batch;
the first non-empty partition returns at least one batch even if that batch alone exceeds
``max_bytes`` (so a consumer cannot get stuck), and a later partition that does not fit gets an
empty record set with its error code 0 and high watermark — not an error."""

from __future__ import annotations

import threading
import time

from kcompat.protocol import records as rb
from kcompat.protocol.messages.create_topics import CreateTopicsRequest
from kcompat.protocol.messages.delete_records import DeleteRecordsRequest
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess
from tests.support.wire_helpers import produce_batch

TOPIC = "fetch-max-bytes"
PARTITIONS = 3
BATCHES_PER_PARTITION = 2


def _batch(partition: int, i: int) -> bytes:
    value = bytes([65 + partition]) * 1000
    return rb.build_batch([(int(time.time() * 1000), f"k{i}".encode(), value, ())])  # now: kept by retention.ms


def _create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    created = wire.call(bootstrap, CreateTopicsRequest(timeout_ms=10000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=partitions, replication_factor=1,
                                           assignments=[], configs=[
                                               CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                                               for k, v in (configs or {}).items()])]), 5)
    assert created.topics[0].error_code == 0


def _produce(bootstrap: str, topic: str, partition: int, batch: bytes) -> int:
    return produce_batch(bootstrap, topic, partition, batch)


def _fetch_request(topic: str, partitions, offset: int, max_bytes: int, partition_max_bytes: int,
                   max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                            topic=topic, partitions=[FetchRequest.FetchPartition(
                                partition=p, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                                partition_max_bytes=partition_max_bytes) for p in partitions])],
                        forgotten_topics_data=[], rack_id="")


def _fetch(bootstrap: str, max_bytes: int, partition_max_bytes: int = 1 << 20):
    resp = wire.call(bootstrap, _fetch_request(TOPIC, range(PARTITIONS), 0, max_bytes, partition_max_bytes), 12)
    assert resp.error_code == 0
    parts = {p.partition_index: p for p in resp.responses[0].partitions}
    assert all(p.error_code == 0 and p.high_watermark == BATCHES_PER_PARTITION for p in parts.values())
    return {i: bytes(parts[i].records or b"") for i in range(PARTITIONS)}


def test_response_max_bytes_fills_partitions_in_order_with_whole_batches(broker):
    _create(broker.bootstrap, TOPIC, PARTITIONS)
    sizes = set()
    for i in range(BATCHES_PER_PARTITION):
        for p in range(PARTITIONS):
            batch = _batch(p, i)
            _produce(broker.bootstrap, TOPIC, p, batch)
            sizes.add(len(batch))
    assert len(sizes) == 1
    size = sizes.pop()

    def batch_counts(got):
        return [len(list(rb.iter_batches(got[p]))) for p in range(PARTITIONS)]

    def keys(data: bytes, partition: int) -> list[bytes]:
        """Keys of the records in ``data``, checking each value is its partition's letter."""
        out = []
        for pos, h in rb.iter_batches(data):
            for r in rb.iter_records(data[pos:pos + h.size]):
                assert r.value == bytes([65 + partition]) * 1000
                out.append(r.key)
        return out

    # everything fits
    got = _fetch(broker.bootstrap, 1 << 20)
    assert batch_counts(got) == [2, 2, 2]
    assert all(keys(got[p], p) == [b"k0", b"k1"] for p in range(PARTITIONS))
    # room for three batches: both of partition 0, then one of partition 1, nothing of partition 2
    got = _fetch(broker.bootstrap, 3 * size + size // 2)
    assert batch_counts(got) == [2, 1, 0]
    assert keys(got[1], 1) == [b"k0"] and got[2] == b""
    # less than one batch: the first partition still returns one whole batch, the others nothing
    got = _fetch(broker.bootstrap, 10)
    assert batch_counts(got) == [1, 0, 0]
    assert keys(got[0], 0) == [b"k0"]
    # partition_max_bytes limits each partition first (one batch each), max_bytes the total
    got = _fetch(broker.bootstrap, 1 << 20, partition_max_bytes=size + 1)
    assert batch_counts(got) == [1, 1, 1]
    got = _fetch(broker.bootstrap, 2 * size, partition_max_bytes=size + 1)
    assert batch_counts(got) == [1, 1, 0]


def test_a_waiting_fetch_wakes_for_new_records_after_the_log_shrank(tmp_path):
    """A parked fetch measures new data by bytes appended, not by the log's size: segments deleted
    (here below a DeleteRecords offset; log cleaning and retention alike) while it waits must not
    hide a record appended afterwards until max_wait_ms. Found by bench/cleaner_latency.py: every
    cleaner install held a waiting consumer for its whole fetch.wait.max.ms."""
    broker = BrokerProcess(tmp_path / "data", overrides={"log.retention.check.interval.ms": "100"})
    broker.start()
    try:
        topic = "shrinks-while-waiting"
        _create(broker.bootstrap, topic, 1, {"internal.segment.bytes": "1500"})
        for i in range(8):
            end = _produce(broker.bootstrap, topic, 0, _batch(0, i)) + 1    # ~1 KB each: a segment each
        max_wait_ms = 8000
        result = {}

        def long_poll():
            started = time.monotonic()
            resp = wire.call(broker.bootstrap, _fetch_request(topic, [0], end, 1 << 20, 1 << 20, max_wait_ms), 12)
            result["resp"], result["at"], result["started"] = resp, time.monotonic(), started
        t = threading.Thread(target=long_poll)
        t.start()
        time.sleep(0.5)                                       # the fetch is parked at the log end
        deleted = wire.call(broker.bootstrap, DeleteRecordsRequest(timeout_ms=5000, topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=[
                DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=end)])]), 2)
        assert deleted.topics[0].partitions[0].error_code == 0
        time.sleep(1.0)                                       # retention checks delete the old segments
        assert "deleted" in broker.log_text() and "log start offset" in broker.log_text()
        produced_at = time.monotonic()
        assert _produce(broker.bootstrap, topic, 0, rb.build_batch([(int(time.time() * 1000), b"k", b"late", ())])) == end
        t.join(15)
        p = result["resp"].responses[0].partitions[0]
        assert p.error_code == 0
        assert [r.value for pos, h in rb.iter_batches(p.records) for r in rb.iter_records(p.records[pos:pos + h.size])
                ] == [b"late"]
        # woken by the append, not released by max_wait_ms (8 s after it started, 6.5 s after the append)
        assert result["at"] - produced_at < (max_wait_ms / 1000) / 2, (result["at"] - produced_at)
    finally:
        broker.stop()
