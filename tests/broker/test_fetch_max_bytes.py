"""Fetch's response-level ``max_bytes`` across partitions (KIP-74), against a real broker.

Kafka fills partitions in request order until ``max_bytes`` is used up, never splitting a batch;
the first non-empty partition returns at least one batch even if that batch alone exceeds
``max_bytes`` (so a consumer cannot get stuck), and a later partition that does not fit gets an
empty record set with its error code 0 and high watermark — not an error."""

from __future__ import annotations

from kcompat.protocol import records as rb
from kcompat.protocol.messages.create_topics import CreateTopicsRequest
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.produce import ProduceRequest
from tests.support import wire

TOPIC = "fetch-max-bytes"
PARTITIONS = 3
BATCHES_PER_PARTITION = 2


def _batch(partition: int, i: int) -> bytes:
    value = bytes([65 + partition]) * 1000
    return rb.build_batch([(1_700_000_000_000, f"k{i}".encode(), value, ())])


def _fetch(bootstrap: str, max_bytes: int, partition_max_bytes: int = 1 << 20):
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                           topic=TOPIC, partitions=[FetchRequest.FetchPartition(
                               partition=p, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                               partition_max_bytes=partition_max_bytes) for p in range(PARTITIONS)])],
                       forgotten_topics_data=[], rack_id="")
    resp = wire.call(bootstrap, req, 12)
    assert resp.error_code == 0
    parts = {p.partition_index: p for p in resp.responses[0].partitions}
    assert all(p.error_code == 0 and p.high_watermark == BATCHES_PER_PARTITION for p in parts.values())
    return {i: bytes(parts[i].records or b"") for i in range(PARTITIONS)}


def test_response_max_bytes_fills_partitions_in_order_with_whole_batches(broker):
    created = wire.call(broker.bootstrap, CreateTopicsRequest(timeout_ms=10000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=PARTITIONS, replication_factor=1,
                                           assignments=[], configs=[])]), 5)
    assert created.topics[0].error_code == 0
    sizes = set()
    for i in range(BATCHES_PER_PARTITION):
        for p in range(PARTITIONS):
            batch = _batch(p, i)
            resp = wire.call(broker.bootstrap, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                    ProduceRequest.PartitionProduceData(index=p, records=batch)])]), 9)
            assert resp.responses[0].partition_responses[0].error_code == 0
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
