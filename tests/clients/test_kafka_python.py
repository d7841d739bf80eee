"""kafka-python 3.0.12 against a real kcompat process, default settings unless a test is about one.

Produces keyed and unkeyed records with headers in every compression and with acks 0, 1 and all,
and reads them back (from the beginning, from given offsets, from timestamps) with kafka-python and
with confluent-kafka, checking every key, value, header, timestamp, offset and partition.
"""

from __future__ import annotations

import threading
import time

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import OffsetSpec
from kafka.errors import MessageSizeTooLargeError

from tests.clients.common import (
    COMPRESSIONS, CREATE_TIME, LOG_APPEND_TIME, Rec, Sent, assert_same_reads, assert_same_records, ck_consume,
    ck_consumer, ck_got, kp_admin, kp_consume, kp_got, kp_produce, make_records, now_ms, topic_name, with_offsets,
)

ACKS = [0, 1, "all"]


@pytest.fixture(scope="module")
def admin(broker):
    a = kp_admin(broker.bootstrap)
    yield a
    a.close()


def create(admin, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    admin.create_topics({name: {"num_partitions": partitions, "configs": configs or {}}})


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_produce_every_acks_and_consume_with_both_clients(broker, admin, request, compression):
    """acks=0 -> partition 0, acks=1 -> partition 1, acks=all (idempotent, the default) -> 2."""
    topic = topic_name(request)
    create(admin, topic, partitions=len(ACKS))
    n = 40
    for partition, acks in enumerate(ACKS):
        recs = make_records(n, f"{compression}-{acks}", seed=partition)
        sent = kp_produce(broker.bootstrap, topic, recs, partition=partition, acks=acks,
                          compression_type=None if compression == "none" else compression)
        assert all(s.partition == partition for s in sent)
        if acks == 0:
            # no response, so no offsets (kafka-python reports base offset -1 plus the index of the
            # record within its batch, which is meaningless); one producer, one partition: in order
            sent = with_offsets(sent, 0)
        else:
            assert [s.offset for s in sent] == list(range(n)), "acknowledged offsets are not consecutive"
        got_kp = kp_consume(broker.bootstrap, topic, partition, end=n)
        assert_same_records(sent, got_kp)
        if acks == "all":
            got_rc = kp_consume(broker.bootstrap, topic, partition, end=n, isolation_level="read_committed")
            assert_same_records(sent, got_rc)
        got_ck = ck_consume(broker.bootstrap, topic, partition, end=n)
        assert_same_records(sent, got_ck)
        # nothing beyond what was produced
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
        tp = TopicPartition(topic, partition)
        assert c.end_offsets([tp]) == {tp: n}
        assert c.beginning_offsets([tp]) == {tp: 0}
        c.close()


def test_default_partitioner_spreads_keys_and_consumer_reads_all_partitions(broker, admin, request):
    """Without an explicit partition, keyed records go by murmur2 of the key; every record comes
    back from the partition and offset its future reported."""
    topic = topic_name(request)
    create(admin, topic, partitions=4)
    recs = [Rec(f"k{i}".encode(), f"v{i}".encode(), (("i", str(i).encode()),)) for i in range(60)]
    sent = kp_produce(broker.bootstrap, topic, recs)
    by_partition: dict[int, list[Sent]] = {}
    for s in sent:
        by_partition.setdefault(s.partition, []).append(s)
    assert len(by_partition) > 1, "all keys landed in one partition"
    for partition, expected in by_partition.items():
        assert [s.offset for s in expected] == list(range(len(expected)))
        assert_same_records(expected, kp_consume(broker.bootstrap, topic, partition))
    # the same key always goes to the same partition
    again = kp_produce(broker.bootstrap, topic, recs[:10])
    assert [s.partition for s in again] == [s.partition for s in sent[:10]]
    expected = sorted(sent + again, key=lambda s: (s.partition, s.offset))

    # one consumer assigned every partition: each fetch request carries all of them
    tps = [TopicPartition(topic, p) for p in range(4)]
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, max_partition_fetch_bytes=300)
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = []
    deadline = time.monotonic() + 20
    while len(got) < len(expected) and time.monotonic() < deadline:
        for recs_ in c.poll(timeout_ms=200).values():
            got.extend(kp_got(m) for m in recs_)
    c.close()
    assert_same_records(expected, sorted(got, key=lambda g: (g.partition, g.offset)))

    cc = ck_consumer(broker.bootstrap, **{"max.partition.fetch.bytes": 300})
    cc.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(4)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < len(expected) and time.monotonic() < deadline:
        m = cc.poll(0.2)
        if m is not None and m.error() is None:
            got.append(ck_got(m))
    cc.close()
    assert_same_records(expected, sorted(got, key=lambda g: (g.partition, g.offset)))


def test_readme_quickstart(broker):
    """The README's example: a group-less subscribing consumer iterating from the beginning."""
    topic = f"greetings-{int(time.time() * 1000)}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"hello %d" % i, headers=[("lang", b"en")])
               for i in range(3)]
    producer.flush()
    offsets = [f.get(10).offset for f in futures]
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=1500)
    got = [(r.offset, r.key, r.value, r.headers) for r in consumer]
    consumer.close()
    assert offsets == [0, 1, 2]
    assert got == [(i, b"k%d" % i, b"hello %d" % i, [("lang", b"en")]) for i in range(3)]


def test_consume_from_given_offsets_inside_compressed_batches(broker, admin, request):
    """Seeking into the middle of a multi-record (compressed) batch returns exactly the records
    from that offset on, with both clients."""
    topic = topic_name(request)
    create(admin, topic)
    recs = make_records(80, "seek")
    sent = kp_produce(broker.bootstrap, topic, recs, compression_type="gzip", linger_ms=50)
    assert [s.offset for s in sent] == list(range(80))
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        for start in [0, 1, 7, 33, 40, 79, 80]:
            assert_same_records(sent[start:], kp_consume(broker.bootstrap, topic, 0, start, consumer=c))
            assert_same_records(sent[start:], ck_consume(broker.bootstrap, topic, 0, start))
    finally:
        c.close()


def _expected_for_time(sent: list[Sent], target: int):
    for s in sent:
        if s.timestamp >= target:
            return s.offset, s.timestamp
    return None


def test_offsets_for_times_and_consume_from_there(broker, admin, request):
    topic = topic_name(request)
    create(admin, topic)
    base = now_ms() - 3_600_000
    # increasing, with a repeated timestamp and one going backwards
    deltas = [0, 1000, 1000, 500, 3000, 4000, 4000, 2500, 9000, 10_000, 12_000, 11_000, 15_000, 16_000, 20_000]
    deltas += [20_000 + 1000 * i for i in range(1, 26)]
    deltas[22] = 77_000  # the maximum, in the middle of the compressed batch
    timestamps = [base + d for d in deltas]
    recs = make_records(len(timestamps), "times", timestamps=timestamps)
    # two producers' worth of batches: several small ones, then one large compressed batch
    sent = kp_produce(broker.bootstrap, topic, recs[:15])
    sent += kp_produce(broker.bootstrap, topic, recs[15:], compression_type="lz4", linger_ms=50)
    assert [s.timestamp for s in sent] == timestamps
    assert [s.offset for s in sent] == list(range(len(recs)))

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(topic, 0)
    try:
        targets = sorted({0, base - 1, now_ms(), max(timestamps) + 1} | set(timestamps)
                         | {t + 1 for t in timestamps} | {t - 1 for t in timestamps})
        for target in targets:
            result = c.offsets_for_times({tp: target})[tp]
            expected = _expected_for_time(sent, target)
            if expected is None:
                assert result is None, f"target {target}: expected no offset, got {result}"
            else:
                assert result is not None, f"target {target}: expected {expected}, got None"
                assert (result.offset, result.timestamp) == expected, f"target {target}"
        # read from a timestamp
        target = base + 4000
        off = c.offsets_for_times({tp: target})[tp].offset
        assert off == 5
        assert_same_records(sent[off:], kp_consume(broker.bootstrap, topic, 0, off, consumer=c))
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: len(recs)}
    finally:
        c.close()

    # the admin client's ListOffsets, including KIP-734 max timestamp and KIP-405 earliest-local
    res = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp]
    assert res.offset == 0
    assert admin.list_partition_offsets({tp: OffsetSpec.EARLIEST_LOCAL})[tp].offset == 0
    assert admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset == len(recs)
    res = admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
    assert (res.offset, res.timestamp) == (22, base + 77_000)
    res = admin.list_partition_offsets({tp: base + 9000})[tp]
    assert (res.offset, res.timestamp) == (8, base + 9000)
    res = admin.list_partition_offsets({tp: base + 78_000})[tp]
    assert (res.offset, res.timestamp) == (-1, -1)


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_log_append_time_topic(broker, admin, request, compression):
    """message.timestamp.type=LogAppendTime: the broker stamps the batch (and must fix the CRC,
    which kafka-python checks by default); consumers see type 1 and a time close to now."""
    topic = topic_name(request)
    create(admin, topic, configs={"message.timestamp.type": "LogAppendTime"})
    old = now_ms() - 86_400_000
    recs = [Rec(f"k{i}".encode() if i % 2 else None, f"value-{i}".encode() * 20, (("h", str(i).encode()),), old + i)
            for i in range(20)]
    before = now_ms()
    sent = kp_produce(broker.bootstrap, topic, recs, linger_ms=20,
                      compression_type=None if compression == "none" else compression)
    after = now_ms()
    for s in sent:
        assert before - 1000 <= s.timestamp <= after + 1000, "RecordMetadata.timestamp is not the log append time"
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert c.config["check_crcs"] is True
    got = kp_consume(broker.bootstrap, topic, 0, consumer=c)
    c.close()
    expected = [Sent(s.topic, s.partition, s.offset, s.key, s.value, s.headers, s.timestamp, LOG_APPEND_TIME)
                for s in sent]
    assert_same_records(expected, got)
    assert all(g.timestamp != r.timestamp for g, r in zip(got, recs))
    assert_same_reads(got, ck_consume(broker.bootstrap, topic, 0))


def test_long_poll_waits_and_wakes_on_produce(broker, admin, request):
    topic = topic_name(request)
    create(admin, topic)
    tp = TopicPartition(topic, 0)

    # 1. with nothing to read, each fetch waits fetch_max_wait_ms on the broker
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=1000)
    c.assign([tp])
    c.seek_to_beginning(tp)
    deadline = time.monotonic() + 3.5
    while time.monotonic() < deadline:
        assert c.poll(timeout_ms=200) == {}
    m = c.metrics()["consumer-fetch-manager-metrics"]
    c.close()
    assert m["fetch-latency-avg"] >= 700, f"empty fetches returned without waiting: {m}"
    assert m["fetch-latency-max"] < 5000, m

    # 2. a record produced while a long fetch (20 s) waits is delivered promptly
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=20_000, request_timeout_ms=40_000)
    c.assign([tp])
    c.seek_to_beginning(tp)
    c.poll(timeout_ms=500)  # the fetch is now parked on the broker
    acked = {}

    def produce_later():
        time.sleep(0.7)
        acked["sent"] = kp_produce(broker.bootstrap, topic, [Rec(b"k", b"wake up", (("x", b"y"),))])
        acked["at"] = time.monotonic()

    t = threading.Thread(target=produce_later)
    t.start()
    got = []
    deadline = time.monotonic() + 15
    while not got and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=100).values():
            got.extend(recs)
    received_at = time.monotonic()
    t.join(10)
    c.close()
    assert got, "the record was not delivered"
    assert got[0].value == b"wake up" and got[0].offset == 0
    assert received_at - acked["at"] < 2.0, f"delivered {received_at - acked['at']:.2f}s after the ack"


def test_record_larger_than_max_message_bytes_is_rejected(broker, admin, request):
    topic = topic_name(request)
    create(admin, topic, configs={"max.message.bytes": "1024"})
    big = bytes(range(256)) * 16  # 4 KiB, incompressible enough
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            p.send(topic, key=b"big", value=big).get(timeout=30)
    finally:
        # kafka-python's idempotent producer treats any non-retriable batch error as fatal (the
        # Java producer bumps the epoch and carries on), so the next send needs a new producer.
        p.close(timeout=10)
    # smaller records still go through and nothing of the big one is stored
    sent = kp_produce(broker.bootstrap, topic, [Rec(b"small", b"x" * 100)])
    assert sent[0].offset == 0
    got = kp_consume(broker.bootstrap, topic, 0)
    assert [(g.offset, g.key) for g in got] == [(0, b"small")]


def test_explicit_create_time_is_kept(broker, admin, request):
    """CreateTime timestamps set by the producer (past and future) come back unchanged."""
    topic = topic_name(request)
    create(admin, topic)
    ts = [1, 1_000_000_000_000, now_ms() - 10 * 86_400_000, now_ms() + 3_600_000]
    recs = [Rec(b"k", b"v%d" % i, (), t) for i, t in enumerate(ts)]
    sent = kp_produce(broker.bootstrap, topic, recs, compression_type="snappy")
    assert [s.timestamp for s in sent] == ts
    got = kp_consume(broker.bootstrap, topic, 0)
    assert all(g.timestamp_type == CREATE_TIME for g in got)
    assert_same_records(sent, got)
