"""confluent-kafka 2.16.1 (librdkafka 2.16.0) against a real kcompat process, default settings
unless a test is about one (so consumers run with librdkafka's default isolation.level=read_committed).

Produces in every compression with acks 0, 1 and all (plain and idempotent), reads back with
confluent-kafka and kafka-python, and checks offsets by timestamp through Consumer.offsets_for_times
and AdminClient.list_offsets (earliest, latest, timestamp, max timestamp).
"""

from __future__ import annotations

import json
import threading
import time

import confluent_kafka as ck
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic, OffsetSpec

from tests.clients.common import (
    COMPRESSIONS, LOG_APPEND_TIME, Rec, Sent, assert_same_reads, assert_same_records, ck_admin, ck_consume,
    ck_consumer, ck_produce, ck_producer, kp_consume, make_records, now_ms, topic_name, with_offsets,
)

# (acks, extra producer config) per partition
PRODUCERS = [("0", {}), ("1", {}), ("all", {}), ("all", {"enable.idempotence": True})]


@pytest.fixture(scope="module")
def admin(broker):
    return ck_admin(broker.bootstrap)


def create(admin, name: str, partitions: int = 1, config: dict | None = None) -> None:
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, config=config or {})])
    fs[name].result(timeout=20)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_produce_every_acks_and_consume_with_both_clients(broker, admin, request, compression):
    topic = topic_name(request)
    create(admin, topic, partitions=len(PRODUCERS))
    n = 40
    for partition, (acks, extra) in enumerate(PRODUCERS):
        recs = make_records(n, f"{compression}-{acks}-{partition}", seed=partition)
        sent = ck_produce(broker.bootstrap, topic, recs, partition=partition, acks=acks,
                          **{"compression.type": compression}, **extra)
        assert all(s.partition == partition for s in sent)
        if acks == "0":
            assert all(s.offset is None for s in sent), "acks=0 cannot report offsets"
            sent = with_offsets(sent, 0)
        else:
            assert [s.offset for s in sent] == list(range(n)), "delivery-report offsets are not consecutive"
        got_ck = ck_consume(broker.bootstrap, topic, partition, end=n)
        assert_same_records(sent, got_ck)
        got_kp = kp_consume(broker.bootstrap, topic, partition, end=n)
        assert_same_records(sent, got_kp)
        c = ck_consumer(broker.bootstrap)
        assert c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=10) == (0, n)
        c.close()


def test_consume_from_given_offsets_inside_batches(broker, admin, request):
    topic = topic_name(request)
    create(admin, topic)
    recs = make_records(90, "seek")
    sent = ck_produce(broker.bootstrap, topic, recs, **{"compression.type": "zstd", "linger.ms": 50})
    assert [s.offset for s in sent] == list(range(90))
    for start in [0, 1, 5, 44, 45, 88, 89, 90]:
        # a fresh consumer each time: re-assigning waits for the previous fetch to finish
        assert_same_records(sent[start:], ck_consume(broker.bootstrap, topic, 0, start))
        assert_same_records(sent[start:], kp_consume(broker.bootstrap, topic, 0, start))


def _produce_timed(broker, topic):
    """45 records with explicit CreateTimes an hour ago: increasing, with repeats, one going
    backwards and the maximum in the middle of a batch."""
    base = now_ms() - 3_600_000
    deltas = [0, 1000, 1000, 500, 3000, 4000, 4000, 2500, 9000, 10_000, 12_000, 11_000, 15_000, 16_000, 20_000]
    deltas += [20_000 + 1000 * i for i in range(1, 31)]
    deltas[30] = 99_000  # the maximum, inside the second (batched) part
    timestamps = [base + d for d in deltas]
    recs = make_records(len(timestamps), "times", timestamps=timestamps)
    sent = []
    for r in recs[:15]:  # one batch each
        sent += ck_produce(broker.bootstrap, topic, [r], producer=None)
    sent += ck_produce(broker.bootstrap, topic, recs[15:], **{"compression.type": "gzip", "linger.ms": 100})
    assert [s.timestamp for s in sent] == timestamps
    assert [s.offset for s in sent] == list(range(len(recs)))
    return base, sent


def _expected_for_time(sent: list[Sent], target: int):
    for s in sent:
        if s.timestamp >= target:
            return s.offset
    return None


def test_offsets_for_times_and_consume_from_there(broker, admin, request):
    topic = topic_name(request)
    create(admin, topic)
    base, sent = _produce_timed(broker, topic)
    timestamps = [s.timestamp for s in sent]
    c = ck_consumer(broker.bootstrap)
    try:
        targets = sorted({0, base - 1, now_ms(), max(timestamps) + 1} | set(timestamps)
                         | {t + 1 for t in timestamps})
        for target in targets:
            (tp,) = c.offsets_for_times([ck.TopicPartition(topic, 0, target)], timeout=10)
            assert tp.error is None
            expected = _expected_for_time(sent, target)
            # librdkafka reports "no such offset" as OFFSET_END (-1)
            assert tp.offset == (-1 if expected is None else expected), f"target {target}"
        off = c.offsets_for_times([ck.TopicPartition(topic, 0, base + 4000)], timeout=10)[0].offset
        assert off == 5
        assert_same_records(sent[off:], ck_consume(broker.bootstrap, topic, 0, off, consumer=c))
    finally:
        c.close()


@pytest.mark.parametrize("isolation", [ck.IsolationLevel.READ_UNCOMMITTED, ck.IsolationLevel.READ_COMMITTED])
def test_admin_list_offsets(broker, admin, request, isolation):
    topic = topic_name(request)
    create(admin, topic)
    base, sent = _produce_timed(broker, topic)
    tp = ck.TopicPartition(topic, 0)

    def one(spec):
        fs = admin.list_offsets({tp: spec}, isolation_level=isolation, request_timeout=15)
        return fs[tp].result(timeout=15)

    n = len(sent)
    assert one(OffsetSpec.earliest()).offset == 0
    assert one(OffsetSpec.latest()).offset == n
    for target in [base - 5, base, base + 500, base + 1001, base + 15_000, base + 20_500]:
        info = one(OffsetSpec.for_timestamp(target))
        expected = _expected_for_time(sent, target)
        assert info.offset == expected, f"target {target}"
        assert info.timestamp == sent[expected].timestamp
    # after the last record's timestamp: no offset
    assert one(OffsetSpec.for_timestamp(max(s.timestamp for s in sent) + 1)).offset == -1
    assert one(OffsetSpec.for_timestamp(now_ms())).offset == -1
    # KIP-734: the offset of the (first) record with the largest timestamp, here inside a batch
    mx = one(OffsetSpec.max_timestamp())
    top = max(s.timestamp for s in sent)
    assert (mx.offset, mx.timestamp) == (next(s.offset for s in sent if s.timestamp == top), top)
    assert mx.offset == 30


def test_log_append_time_topic(broker, admin, request):
    topic = topic_name(request)
    create(admin, topic, config={"message.timestamp.type": "LogAppendTime"})
    old = now_ms() - 86_400_000
    recs = [Rec(f"k{i}".encode(), f"value-{i}".encode() * 30, (("h", b"v"),), old + i) for i in range(25)]
    before = now_ms()
    sent = ck_produce(broker.bootstrap, topic, recs, **{"compression.type": "snappy", "linger.ms": 20})
    after = now_ms()
    for s in sent:
        assert s.timestamp_type == LOG_APPEND_TIME, "delivery report does not carry the log append time"
        assert before - 1000 <= s.timestamp <= after + 1000
    got = ck_consume(broker.bootstrap, topic, 0)
    assert_same_records(sent, got)
    # kafka-python checks the batch CRC (check_crcs=True by default)
    assert_same_reads(got, kp_consume(broker.bootstrap, topic, 0))
    expected = [Sent(topic, 0, i, r.key, r.value, r.headers, got[i].timestamp, LOG_APPEND_TIME)
                for i, r in enumerate(recs)]
    assert_same_records(expected, got)


def test_long_poll_waits_and_wakes_on_produce(broker, admin, request):
    topic = topic_name(request)
    create(admin, topic)
    tp = ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)
    stats = []

    # 1. with nothing to read, fetches wait fetch.wait.max.ms on the broker: few Fetch requests
    c = ck_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 1000, "statistics.interval.ms": 500,
                                         "stats_cb": stats.append})
    c.assign([tp])
    deadline = time.monotonic() + 3.5
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        assert m is None or m.error() is not None, "unexpected record"
    c.close()

    def fetches(s):
        return sum(b.get("req", {}).get("Fetch", 0) for b in json.loads(s)["brokers"].values())

    assert stats, "no statistics"
    n = fetches(stats[-1])
    assert 1 <= n <= 6, f"{n} Fetch requests in ~3.5 s with fetch.wait.max.ms=1000"

    # 2. a record produced while a long fetch (20 s) waits is delivered promptly
    c = ck_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 20_000})
    c.assign([tp])
    c.poll(0.5)
    acked = {}

    def produce_later():
        time.sleep(0.7)
        acked["sent"] = ck_produce(broker.bootstrap, topic, [Rec(b"k", b"wake up", (("x", b"y"),))])
        acked["at"] = time.monotonic()

    t = threading.Thread(target=produce_later)
    t.start()
    got = None
    deadline = time.monotonic() + 15
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            got = m
    received_at = time.monotonic()
    t.join(10)
    c.close()
    assert got is not None, "the record was not delivered"
    assert (got.offset(), got.value()) == (0, b"wake up")
    assert received_at - acked["at"] < 2.0, f"delivered {received_at - acked['at']:.2f}s after the ack"


def test_record_larger_than_max_message_bytes_is_rejected(broker, admin, request):
    topic = topic_name(request)
    create(admin, topic, config={"max.message.bytes": "1024"})
    p = ck_producer(broker.bootstrap)
    errors = []
    p.produce(topic, key=b"big", value=bytes(range(256)) * 16, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(30) == 0
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors[0]
    # the producer carries on; the big record is not stored
    sent = ck_produce(broker.bootstrap, topic, [Rec(b"small", b"x" * 100)], producer=p)
    assert sent[0].offset == 0
    got = ck_consume(broker.bootstrap, topic, 0)
    assert [(g.offset, g.key) for g in got] == [(0, b"small")]


def test_idempotent_producer_many_batches_in_flight(broker, admin, request):
    """enable.idempotence with up to 5 in-flight batches per connection: order and offsets hold."""
    topic = topic_name(request)
    create(admin, topic, partitions=2)
    recs = make_records(600, "inflight", big_every=0)
    p = ck_producer(broker.bootstrap, **{"enable.idempotence": True, "linger.ms": 0, "batch.num.messages": 7})
    sent0 = ck_produce(broker.bootstrap, topic, recs[:300], partition=0, producer=p)
    sent1 = ck_produce(broker.bootstrap, topic, recs[300:], partition=1, producer=p)
    assert [s.offset for s in sent0] == list(range(300)) == [s.offset for s in sent1]
    assert_same_records(sent0, ck_consume(broker.bootstrap, topic, 0))
    assert_same_records(sent1, kp_consume(broker.bootstrap, topic, 1))



def test_large_records_near_the_default_limits(broker, admin, request):
    """Records of ~700 KB (each batch alone fills most of max.partition.fetch.bytes = 1 MiB) come
    back whole with both clients; uncompressed and compressed."""
    topic = topic_name(request)
    create(admin, topic, partitions=2)
    big = [Rec(b"big-%d" % i, bytes([i]) * 300_000 + bytes(range(256)) * 1600, (("n", b"%d" % i),))
           for i in range(4)]
    sent0 = ck_produce(broker.bootstrap, topic, big, partition=0)
    sent1 = ck_produce(broker.bootstrap, topic, big, partition=1, **{"compression.type": "lz4"})
    for partition, sent in [(0, sent0), (1, sent1)]:
        got = ck_consume(broker.bootstrap, topic, partition)
        assert_same_records(sent, got)
        assert_same_reads(got, kp_consume(broker.bootstrap, topic, partition))
