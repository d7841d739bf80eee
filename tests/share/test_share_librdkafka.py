"""librdkafka's share consumer (confluent-kafka's ``ShareConsumer``, KIP-932) against kcompat:
two consumers split a topic's records with none delivered twice, explicit REJECT archives a
record for good and RELEASE hands it out again, and a ``share.isolation.level=read_committed``
group never gets records of an aborted transaction."""

from __future__ import annotations

import time
import uuid
from collections import Counter

import confluent_kafka as ck
import pytest

from kcompat.testing import Broker
from tests.share.test_share_consumers import BROKER_CONFIGS, new_topic, produce, set_group_configs


@pytest.fixture(scope="module")
def broker():
    with Broker(BROKER_CONFIGS) as b:
        yield b


def consumer(bootstrap: str, group: str, topic: str) -> ck.ShareConsumer:
    c = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    return c


def drain(consumers, decide, *, idle_s: float = 6.0, limit_s: float = 120.0) -> list[tuple[int, int, int]]:
    """Poll every consumer in turn, acknowledging each record with ``decide(record)`` and
    committing, until nothing arrives for ``idle_s``; returns (partition, offset, delivery count)."""
    got = []
    start = last = time.monotonic()
    while time.monotonic() - last < idle_s and time.monotonic() - start < limit_s:
        for c in consumers:
            msgs = c.poll(0.2)
            if msgs.is_empty():
                continue
            last = time.monotonic()
            for m in msgs.records():
                assert m.error() is None, m.error()
                got.append((m.partition(), m.offset(), m.delivery_count()))
                c.acknowledge(m, decide(m))
            assert all(v is None for v in c.commit_sync().values())
    return got


def test_two_consumers_split_records_once_each(broker):
    topic = new_topic(broker)
    group = f"g-{uuid.uuid4().hex[:6]}"
    set_group_configs(broker.bootstrap_servers, group, {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap_servers, topic, 3000)
    cs = [consumer(broker.bootstrap_servers, group, topic) for _ in range(2)]
    try:
        got = drain(cs, lambda m: ck.AcknowledgeType.ACCEPT)
    finally:
        for c in cs:
            c.close()
    counts = Counter((p, o) for p, o, _dc in got)
    assert len(counts) == 3000 and set(counts.values()) == {1}


def test_reject_archives_and_release_redelivers(broker):
    topic = new_topic(broker, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    set_group_configs(broker.bootstrap_servers, group, {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap_servers, topic, 20)
    c = consumer(broker.bootstrap_servers, group, topic)

    def decide(m):   # even offsets rejected; odd ones released once, then accepted
        if m.offset() % 2 == 0:
            return ck.AcknowledgeType.REJECT
        return ck.AcknowledgeType.RELEASE if m.delivery_count() == 1 else ck.AcknowledgeType.ACCEPT

    try:
        got = drain([c], decide)
    finally:
        c.close()
    by_offset: dict[int, list[int]] = {}
    for _p, o, dc in got:
        by_offset.setdefault(o, []).append(dc)
    assert {o: dcs for o, dcs in by_offset.items() if o % 2 == 0} == {o: [1] for o in range(0, 20, 2)}
    assert {o: dcs for o, dcs in by_offset.items() if o % 2} == {o: [1, 2] for o in range(1, 20, 2)}


def test_read_committed_share_group_never_delivers_aborted_records(broker):
    topic = new_topic(broker, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    set_group_configs(broker.bootstrap_servers, group, {"share.auto.offset.reset": "earliest",
                                                        "share.isolation.level": "read_committed"})
    p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{group}"})
    p.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, f"{outcome}-{i}".encode())
        if outcome == "commit":
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    c = consumer(broker.bootstrap_servers, group, topic)
    values = []
    try:
        start = last = time.monotonic()
        while time.monotonic() - last < 6 and time.monotonic() - start < 60:
            msgs = c.poll(0.2)
            for m in msgs.records():
                values.append(m.value().decode())
                c.acknowledge(m, ck.AcknowledgeType.ACCEPT)
                last = time.monotonic()
            if not msgs.is_empty():
                c.commit_sync()
    finally:
        c.close()
    # the two committed transactions, each record once; nothing of the aborted one
    assert Counter(values) == Counter(f"commit-{i}" for i in range(10)) + Counter(f"commit-{i}" for i in range(10))
