"""Log compaction through a real broker: 1,000,000 updates over 1,000 keys shrink to about 1,000
records, and a consumer reading from the start while the cleaner works sees every key's latest
value. Also: keyless records are refused on compacted topics; the cleaner never blocks produce."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

UPDATES = 1_000_000
KEYS = 1_000


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory):
    data = tmp_path_factory.mktemp("compaction") / "data"
    with BrokerProcess(data, overrides={"log.cleaner.backoff.ms": "200"}) as b:
        yield b


def _consume_all(bootstrap: str, topic: str, until_offset: int, timeout: float = 120.0):
    """Read the partition from the start until ``until_offset``; returns (records read, key -> value)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 32 << 20, "max.partition.fetch.bytes": 8 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    latest: dict[bytes, bytes] = {}
    count = 0
    deadline = time.time() + timeout
    done = False
    while not done and time.time() < deadline:
        for m in c.consume(num_messages=10000, timeout=0.5):
            if m.error():
                raise KafkaException(m.error())
            latest[m.key()] = m.value()
            count += 1
            if m.offset() >= until_offset - 1:
                done = True
    c.close()
    assert done, f"did not reach offset {until_offset} within {timeout}s"
    return count, latest


def test_compacted_topic_shrinks_to_one_record_per_key(cbroker):
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cbroker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": str(4 << 20), "segment.ms": "3000",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(15)
    p = Producer({"bootstrap.servers": cbroker.bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "batch.num.messages": 100000, "queue.buffering.max.messages": 2_000_000,
                  "compression.codec": "lz4"})
    expected = {}
    for i in range(UPDATES):
        key = b"key-%04d" % (i % KEYS)
        value = b"%08d" % i + b"x" * 92
        expected[key] = value
        p.produce(topic, key=key, value=value)
        if i % 100_000 == 0:
            p.poll(0)
    assert p.flush(60) == 0

    # a consumer reading from the start while the cleaner works
    seen = {}
    reader = threading.Thread(target=lambda: seen.update(_consume_all(cbroker.bootstrap, topic, UPDATES)[1]))
    reader.start()

    # roll the active segment (segment.ms) with one more record so that everything but it is cleanable
    time.sleep(3.5)
    expected[b"key-0000"] = b"last"
    p.produce(topic, key=b"key-0000", value=b"last")
    assert p.flush(10) == 0
    end = UPDATES + 1

    deadline = time.time() + 90
    count = None
    while time.time() < deadline:
        count, latest = _consume_all(cbroker.bootstrap, topic, end)
        if count <= KEYS * 1.05:
            break
        time.sleep(1)
    reader.join(120)
    assert count is not None and count <= KEYS * 1.05, f"{count} records remain after cleaning"
    assert latest == expected  # every key's latest value, read from the start
    # the concurrent reader saw, per key, the latest value up to the end it read to
    assert {k: v for k, v in seen.items() if k != b"key-0000"} == \
        {k: v for k, v in expected.items() if k != b"key-0000"}
    assert not [line for line in cbroker.log_text().splitlines() if "cleaning" in line and "failed" in line]


def test_keyless_record_on_compacted_topic_is_refused(cbroker):
    topic = f"compacted-nokey-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cbroker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(15)
    errors = []
    p = Producer({"bootstrap.servers": cbroker.bootstrap, "retries": 0})
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.produce(topic, key=b"k", value=b"keyed")
    p.flush(10)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == 87  # INVALID_RECORD
