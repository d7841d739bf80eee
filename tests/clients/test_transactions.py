"""Transactions with real clients: commit/abort visibility, zombie fencing, timeouts, and no
partition left blocked after a producer or the broker dies mid-transaction (KIP-98)."""

from __future__ import annotations

import multiprocessing
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP

from tests.support.broker_process import BrokerProcess
from tests.support.read_back import read_to_end


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _read(bootstrap: str, topic: str, isolation: str, partitions=(0,)):
    """Every record of the topic as (partition, offset, value), read with ``isolation`` to the end."""
    return [(p, o, v) for p, o, _k, v in read_to_end(bootstrap, topic, partitions, isolation=isolation)]


def _lso(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": _uid("w"), "isolation.level": "read_committed"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        c.close()


def test_confluent_commit_and_abort_visibility(broker):
    topic = _uid("txn-vis")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": _uid("tid")})
    p.init_transactions(30)
    for i, commit in enumerate([True, False, True, False, True]):
        p.begin_transaction()
        for j in range(10):
            p.produce(topic, key=b"%d" % j, value=b"t%d-%s" % (i, b"c" if commit else b"a"))
        p.flush(30)  # the records reach the broker before the outcome (else abort purges them locally)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    committed = [v for _, _, v in _read(broker.bootstrap, topic, "read_committed")]
    everything = [v for _, _, v in _read(broker.bootstrap, topic, "read_uncommitted")]
    assert committed == [b"t%d-c" % i for i in (0, 2, 4) for _ in range(10)]
    assert sorted(everything) == sorted([b"t%d-%s" % (i, b"c" if i % 2 == 0 else b"a")
                                         for i in range(5) for _ in range(10)])
    assert _lso(broker.bootstrap, topic) == 55  # 50 records + 5 markers


def test_kafka_python_transactions_and_read_committed(broker):
    topic = _uid("txn-kp")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=_uid("tid"))
    p.init_transactions()
    p.begin_transaction()
    for i in range(5):
        p.send(topic, value=b"keep-%d" % i)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(5):
        p.send(topic, value=b"drop-%d" % i)
    p.flush()
    p.abort_transaction()
    p.close()
    for isolation, expect in (("read_committed", 5), ("read_uncommitted", 10)):
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation, consumer_timeout_ms=3000)
        c.assign([KTP(topic, 0)])
        c.seek(KTP(topic, 0), 0)
        values = [r.value for r in c]
        c.close()
        assert len(values) == expect, (isolation, values)
        if isolation == "read_committed":
            assert values == [b"keep-%d" % i for i in range(5)]


def test_zombie_producer_is_fenced(broker):
    topic = _uid("txn-zombie")
    tid = _uid("tid")
    old = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic, value=b"zombie")
    old.flush(10)
    new = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    new.init_transactions(30)  # bumps the epoch: the old producer's transaction is aborted
    new.begin_transaction()
    new.produce(topic, value=b"fresh")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        old.produce(topic, value=b"zombie again")
        old.commit_transaction(30)
    err = e.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH)
    assert [v for _, _, v in _read(broker.bootstrap, topic, "read_committed")] == [b"fresh"]


def test_transaction_timeout_above_the_maximum_is_refused(tmp_path):
    with BrokerProcess(tmp_path / "d", overrides={"transaction.max.timeout.ms": "60000"}) as b:
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": _uid("tid"),
                      "transaction.timeout.ms": 120000})
        with pytest.raises(KafkaException) as e:
            p.init_transactions(20)
        assert e.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def _open_transaction_and_die(bootstrap: str, topic: str, tid: str, ready) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 3000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, value=b"orphan-%d" % i)
    p.flush(10)
    ready.set()
    time.sleep(60)  # killed before it can commit or abort


def test_open_transaction_of_a_dead_producer_is_aborted_and_the_lso_moves_on(broker):
    topic = _uid("txn-orphan")
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_open_transaction_and_die, args=(broker.bootstrap, topic, _uid("tid"), ready))
    proc.start()
    assert ready.wait(30)
    proc.kill()
    proc.join()
    after = Producer({"bootstrap.servers": broker.bootstrap})
    after.produce(topic, value=b"after")
    after.flush(10)
    assert _lso(broker.bootstrap, topic) == 0  # blocked by the open transaction
    deadline = time.time() + 60  # transaction.timeout.ms=3000 + the coordinator's 10 s abort scan (+ load)
    while _lso(broker.bootstrap, topic) == 0 and time.time() < deadline:
        time.sleep(0.5)
    assert _lso(broker.bootstrap, topic) == 22  # 20 aborted + "after" + the ABORT marker
    assert [v for _, _, v in _read(broker.bootstrap, topic, "read_committed")] == [b"after"]


def test_broker_kill9_mid_transaction_blocks_nothing(fresh_broker):
    b = fresh_broker
    topic = _uid("txn-crash")
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": _uid("tid"),
                  "transaction.timeout.ms": 4000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"committed-%d" % i)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"in-flight-%d" % i)
    p.flush(10)
    b.kill9()
    b.start()
    # the producer cannot finish its transaction reliably across the crash: abort it, or let the
    # coordinator time it out; either way the partition must not stay blocked
    try:
        p.abort_transaction(30)
    except KafkaException:
        pass
    deadline = time.time() + 40
    while _lso(b.bootstrap, topic) < 22 and time.time() < deadline:
        time.sleep(0.5)
    assert _lso(b.bootstrap, topic) == 22
    assert [v for _, _, v in _read(b.bootstrap, topic, "read_committed")] == [b"committed-%d" % i
                                                                              for i in range(10)]
