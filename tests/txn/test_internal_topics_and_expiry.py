"""Kafka's internal coordinator topics, producer-id expiry and producer-state recovery.

- ``__consumer_offsets`` and ``__transaction_state`` are created on first use (a group's offset
  commit, a transactional producer's InitProducerId) with ``offsets.topic.num.partitions`` /
  ``transaction.state.log.num.partitions`` partitions (both default 50), flagged internal in
  Metadata, and compacted (``cleanup.policy=compact``), as in Kafka.
- ProducerStateManager expiry (KIP-854): a producer id idle for ``producer.id.expiration.ms`` is
  dropped from the partition's producer state (DescribeProducers no longer lists it), checked every
  ``producer.id.expiration.check.interval.ms``; a producer that keeps writing is kept.
- Recovery replays only the log after the last producer-state snapshot (Kafka writes ``.snapshot``
  files at every segment roll and at clean shutdown, so loading does not re-read the whole log).
"""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import ConfigResource, ConfigSource, NewTopic, ResourceType

from kcompat.isr.partition import Partition
from kcompat.log import Log, LogConfig
from kcompat.log.segment import LogSegment
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.describe_producers import DescribeProducersRequest
from tests.clients.common import ck_admin, ck_consumer, ck_producer, ck_produce, close_ck_producer, make_records
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess

INTERNAL = {"__consumer_offsets": 50, "__transaction_state": 50}   # Kafka's default partition counts


# -- 1. internal topics (the module broker runs with kcompat's defaults: BrokerProcess has no overrides) --

def test_internal_topics_have_default_partitions_are_internal_and_compacted(broker):
    bs = broker.bootstrap
    topic = f"internal-probe-{uuid.uuid4().hex[:8]}"
    ck_produce(bs, topic, make_records(3, "probe"))
    # a consumer group commits an offset (FindCoordinator GROUP creates __consumer_offsets)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = ck_consumer(bs, **{"group.id": group})
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        c.commit(offsets=[ck.TopicPartition(topic, 0, 2)], asynchronous=False)
        (got,) = c.committed([ck.TopicPartition(topic, 0)], timeout=15)
        assert got.offset == 2 and got.error is None
    finally:
        c.close()
    # a transactional producer initializes and commits one transaction (creates __transaction_state)
    p = ck_producer(bs, **{"transactional.id": f"tid-{uuid.uuid4().hex[:8]}"})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, key=b"k", value=b"in a transaction", partition=0)
        p.commit_transaction(30)
    finally:
        close_ck_producer(p)

    admin = ck_admin(bs)
    listed = admin.list_topics(timeout=15).topics   # a Metadata request for all topics
    for name, n in INTERNAL.items():
        assert name in listed, f"{name} missing from Metadata: {sorted(listed)}"
        assert len(listed[name].partitions) == n, (name, len(listed[name].partitions))
        assert all(pm.error is None for pm in listed[name].partitions.values())
    futures = admin.describe_topics(TopicCollection([*INTERNAL, topic]))
    described = {name: f.result(15) for name, f in futures.items()}
    assert {name: (d.is_internal, len(d.partitions)) for name, d in described.items()} == \
        {**{name: (True, n) for name, n in INTERNAL.items()}, topic: (False, 1)}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in (*INTERNAL, topic)]
    policies = {r.name: f.result(15)["cleanup.policy"].value for r, f in admin.describe_configs(resources).items()}
    assert policies == {"__consumer_offsets": "compact", "__transaction_state": "compact", topic: "delete"}
    # the overrides each coordinator creates its topic with, as Kafka 4.3.1's kafka-configs shows them
    # (GroupCoordinator.groupMetadataTopicConfigs, TransactionStateManager.transactionTopicConfigs)
    overrides = {r.name: {k: e.value for k, e in f.result(15).items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
                 for r, f in admin.describe_configs(resources[:2]).items()}
    assert overrides == {
        "__consumer_offsets": {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"},
        "__transaction_state": {"cleanup.policy": "compact", "compression.type": "uncompressed", "min.insync.replicas": "1",
                                "segment.bytes": "104857600", "unclean.leader.election.enable": "false"}}


# -- 2. producer.id.expiration.ms --------------------------------------------------------------------

def _producer_ids(bootstrap: str, topic: str) -> set[int]:
    resp = wire.call(bootstrap, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]), 0)
    (part,) = resp.topics[0].partitions
    assert part.error_code == 0, part
    return {s.producer_id for s in part.active_producers}


def _send_one(p: ck.Producer, topic: str, value: bytes) -> int:
    """Produce one record to partition 0, wait for its ack; returns its (CreateTime) timestamp."""
    result = []
    p.produce(topic, value=value, partition=0, on_delivery=lambda err, msg: result.append((err, msg.timestamp())))
    assert p.flush(10) == 0
    ((err, (_type, ts)),) = result
    assert err is None, err
    return ts


def test_idle_producer_ids_expire_and_active_ones_stay(tmp_path):
    expiration = 2000
    overrides = {"producer.id.expiration.ms": str(expiration), "producer.id.expiration.check.interval.ms": "500"}
    with BrokerProcess(tmp_path / "data", overrides) as b:
        topic = f"expiry-{uuid.uuid4().hex[:8]}"
        admin = ck_admin(b.bootstrap)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
        conf = {"enable.idempotence": True, "linger.ms": 0}
        busy, idle = ck_producer(b.bootstrap, **conf), ck_producer(b.bootstrap, **conf)
        try:
            for p in (busy, idle):   # connect (and get a producer id) before the timed part
                p.list_topics(topic, timeout=15)
            _send_one(busy, topic, b"busy-0")
            (busy_pid,) = _producer_ids(b.bootstrap, topic)
            idle_ts = _send_one(idle, topic, b"idle")
            pids = _producer_ids(b.bootstrap, topic)
            assert time.time() * 1000 - idle_ts < expiration - 50, "the test itself was too slow"
            assert busy_pid in pids and len(pids) == 2, pids   # neither expired before its time
            (idle_pid,) = pids - {busy_pid}
            close_ck_producer(idle)   # it stops
            idle = None
            # the busy producer writes every ~250 ms; the idle one must go, the busy one must stay.
            # Look between writes (not right after one), so an expired-then-recreated state shows.
            gone_at = None
            i = 1
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                _send_one(busy, topic, b"busy-%d" % i)
                i += 1
                time.sleep(0.25)
                pids = _producer_ids(b.bootstrap, topic)
                assert busy_pid in pids, f"the producer still writing was expired after {i} writes: {pids}"
                if gone_at is None and idle_pid not in pids:
                    gone_at = time.time() * 1000
                    assert gone_at - idle_ts >= expiration - 50, f"expired after only {gone_at - idle_ts} ms"
                if gone_at is not None and time.time() * 1000 - gone_at > expiration + 1500:
                    break   # kept the busy one for longer than a whole expiration period after that
            assert gone_at is not None, f"idle producer {idle_pid} never expired: {_producer_ids(b.bootstrap, topic)}"
            assert time.time() * 1000 - gone_at > expiration + 1500, "the busy producer was not watched long enough"
            assert pids == {busy_pid}
        finally:
            for p in (busy, idle):
                if p is not None:
                    close_ck_producer(p)
        # and once it stops writing too, it expires as well
        stopped = time.monotonic()
        while _producer_ids(b.bootstrap, topic) and time.monotonic() - stopped < 10:
            time.sleep(0.2)
        assert _producer_ids(b.bootstrap, topic) == set()


# -- 3. recovery replays only the log after the last producer snapshot --------------------------------

NOW = 1_700_000_000_000
TOPIC_ID = uuid.UUID(int=7)
CONFIG = LogConfig(segment_bytes=400)


def _batch(value: bytes, pid: int, seq: int) -> bytearray:
    return bytearray(rb.build_batch([(NOW + seq, b"k", value, ()), (NOW + seq, b"k", value, ())],
                                    producer_id=pid, producer_epoch=1, base_sequence=seq))


def _open_partition(path, clean: bool, monkeypatch) -> tuple[Partition, list[tuple[int, str]], list[int]]:
    """Open the log (its own loading and recovery are not recorded), then build the Partition
    with every segment read recorded: ((segment base, how) list, base offsets of headers yielded)."""
    log = Log.open(path, CONFIG, recovery_point=0, clean_shutdown=clean, now_ms=NOW)
    touched: list[tuple[int, str]] = []
    yielded: list[int] = []
    orig_iter, orig_read, orig_header = LogSegment.iter_headers, LogSegment.read, LogSegment.header_at

    def iter_headers(seg, from_offset):
        touched.append((seg.base_offset, "iter_headers"))
        for pos, h in orig_iter(seg, from_offset):
            yielded.append(h.base_offset)
            yield pos, h

    def read(seg, position, size):
        touched.append((seg.base_offset, "read"))
        return orig_read(seg, position, size)

    def header_at(seg, position):
        touched.append((seg.base_offset, "header_at"))
        return orig_header(seg, position)

    with monkeypatch.context() as m:
        m.setattr(LogSegment, "iter_headers", iter_headers)
        m.setattr(LogSegment, "read", read)
        m.setattr(LogSegment, "header_at", header_at)
        p = Partition("t", 0, TOPIC_ID, log)
    return p, touched, yielded


@pytest.mark.parametrize("shutdown", ["clean", "unclean"])
def test_recovery_replays_only_the_log_after_the_last_snapshot(tmp_path, monkeypatch, shutdown):
    path = tmp_path / "t-0"
    p = Partition("t", 0, TOPIC_ID, Log.open(path, CONFIG, recovery_point=0, clean_shutdown=True, now_ms=NOW))
    pids, last, seqs, bases = (101, 202), {}, {101: 0, 202: 0}, []
    for i in range(16):
        pid = pids[i % 2]
        b = _batch(b"value-%03d" % i, pid, seqs[pid])
        base = p.append(memoryview(bytearray(b)), NOW).base_offset
        last[pid] = (b, base)
        bases.append(base)
        seqs[pid] += 2
    assert len(p.log.segments) >= 4, "the batches should span several rolled segments"
    roll_snaps = [s.base_offset for s in p.log.segments[1:]]
    assert p.log.snapshot_offsets == roll_snaps   # one snapshot per roll, at the new segment's base
    leo = p.log_end_offset
    if shutdown == "clean":
        p.write_snapshot()   # what ReplicaManager.shutdown does on a clean stop
    p.log.close()
    snap = leo if shutdown == "clean" else roll_snaps[-1]
    assert max(int(f.name.split(".")[0]) for f in path.glob("*.snapshot")) == snap

    p2, touched, yielded = _open_partition(path, shutdown == "clean", monkeypatch)
    try:
        assert p2.log_end_offset == leo
        snap_segment = max(s.base_offset for s in p2.log.segments if s.base_offset <= snap)
        older = [(base, how) for base, how in touched if base < snap_segment]
        assert not older, f"producer-state rebuild read segments before the snapshot at {snap}: {older}"
        assert yielded == [b for b in bases if b >= snap], (snap, yielded)
        if shutdown == "unclean":
            assert yielded, "the batches after the last roll snapshot must be replayed"
        # the rebuilt state is right: retries of each producer's last batch are duplicates, the
        # next sequences are accepted, a sequence gap is not
        for pid in pids:
            b, base = last[pid]
            dup = p2.append(memoryview(bytearray(b)), NOW)
            assert (dup.base_offset, dup.duplicate) == (base, True), pid
        assert p2.log_end_offset == leo
        with pytest.raises(KafkaError) as gap:
            p2.append(memoryview(_batch(b"gap", 101, seqs[101] + 1)), NOW)
        assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        for n, pid in enumerate(pids):
            info = p2.append(memoryview(_batch(b"next", pid, seqs[pid])), NOW)
            assert (info.base_offset, info.duplicate) == (leo + 2 * n, False)
    finally:
        p2.log.close()
