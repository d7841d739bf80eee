"""Exactly-once consume-transform-produce with real clients: offsets sent to the transaction
(``send_offsets_to_transaction``, TxnOffsetCommit) become the group's committed offsets only when
the transaction commits, aborted transactions leave neither output nor offsets, and a broker
killed with a transaction's offsets pending loads them back as pending (KIP-98, KIP-447)."""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata

from conformance.clients.kafka_python import subscribe_when_known
from tests.support.broker_process import BrokerProcess
from tests.support.read_back import read_to_end


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def _fill(bootstrap: str, topic: str, partitions: int, n: int) -> list[bytes]:
    """n records spread over the partitions, values unique."""
    values = [b"v-%d" % i for i in range(n)]
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0
    return values


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value of the topic, partition by partition, read with ``isolation`` to the end."""
    return [v for _p, _o, _k, v in read_to_end(bootstrap, topic, range(partitions), isolation=isolation)]


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": _uid("w")})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(partitions)}
    finally:
        c.close()


def _committed(bootstrap: str, group: str, topic: str, partitions: int, isolation: str = "read_committed",
               timeout: float = 30) -> dict[int, int]:
    """The group's committed offsets as a consumer of it sees them (read_committed consumers ask
    for stable offsets: KIP-447 require_stable)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation})
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)}
    finally:
        c.close()


def _check_output(bootstrap: str, inputs: list[bytes], out: str, out_partitions: int, aborted: int) -> None:
    committed = _read_all(bootstrap, out, out_partitions, "read_committed")
    assert Counter(committed) == Counter(b"T:" + v for v in inputs)  # each input exactly once
    everything = _read_all(bootstrap, out, out_partitions, "read_uncommitted")
    assert len(everything) == len(inputs) + aborted  # aborted output is in the log, never committed
    assert set(everything) <= {b"T:" + v for v in inputs}


# -- confluent-kafka ---------------------------------------------------------------------------


def _ck_rewind(consumer: Consumer) -> None:
    """After an abort: back to the group's committed offsets (confluent's eos example)."""
    for tp in consumer.committed(consumer.assignment(), timeout=30):
        if tp.offset < 0:
            tp.offset = OFFSET_BEGINNING
        consumer.seek(tp)


def test_confluent_consume_transform_produce_with_random_aborts(broker):
    bs = broker.bootstrap
    src, dst, group = _uid("eos-in"), _uid("eos-out"), _uid("eos-group")
    _create(bs, src, 3)
    _create(bs, dst, 2)
    inputs = _fill(bs, src, 3, 240)
    rng = random.Random(447)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([src])
    producer = Producer({"bootstrap.servers": bs, "transactional.id": _uid("eos-tid")})
    producer.init_transactions(30)
    done: Counter = Counter()
    aborted = n_aborts = n_commits = 0
    deadline = time.time() + 60
    while len(done) < len(inputs):
        assert time.time() < deadline, f"processed {len(done)} of {len(inputs)}"
        msgs = consumer.consume(rng.randint(1, 30), 0.5)
        for m in msgs:
            if m.error():
                raise KafkaException(m.error())
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(dst, key=m.key(), value=b"T:" + m.value())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        if rng.random() < 0.3 or n_commits + n_aborts == 1:  # the second one always aborts
            producer.flush(30)  # the output reaches the log before the abort
            producer.abort_transaction(30)
            aborted += len(msgs)
            n_aborts += 1
            _ck_rewind(consumer)
        else:
            producer.commit_transaction(30)
            n_commits += 1
            done.update((m.partition(), m.offset()) for m in msgs)
    assert max(done.values()) == 1 and n_aborts > 0 and n_commits > 0
    # the group's offsets are the end of the input, as its consumer and a newcomer see them
    ends = _end_offsets(bs, src, 3)
    assert {tp.partition: tp.offset for tp in consumer.committed(consumer.assignment(), timeout=30)} == ends
    consumer.close()
    producer.flush(10)
    assert _committed(bs, group, src, 3) == ends
    assert _committed(bs, group, src, 3, isolation="read_uncommitted") == ends
    _check_output(bs, inputs, dst, 2, aborted)


# -- kafka-python ------------------------------------------------------------------------------


def test_kafka_python_consume_transform_produce_with_random_aborts(broker):
    bs = broker.bootstrap
    src, dst, group = _uid("kp-eos-in"), _uid("kp-eos-out"), _uid("kp-eos-group")
    _create(bs, src, 2)
    _create(bs, dst, 1)
    inputs = _fill(bs, src, 2, 150)
    rng = random.Random(98)
    consumer = KafkaConsumer(bootstrap_servers=bs, group_id=group, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    subscribe_when_known(consumer, [src])
    producer = KafkaProducer(bootstrap_servers=bs, transactional_id=_uid("kp-eos-tid"))
    producer.init_transactions()
    done: Counter = Counter()
    aborted = n_aborts = n_commits = 0
    deadline = time.time() + 60
    while len(done) < len(inputs):
        assert time.time() < deadline, f"processed {len(done)} of {len(inputs)}"
        batch = consumer.poll(timeout_ms=500, max_records=rng.randint(1, 30))
        msgs = [r for records in batch.values() for r in records]
        if not msgs:
            continue
        producer.begin_transaction()
        for r in msgs:
            producer.send(dst, key=r.key, value=b"T:" + r.value)
        offsets = {tp: OffsetAndMetadata(records[-1].offset + 1, "", -1) for tp, records in batch.items()}
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())  # KIP-447 fencing (v3)
        if rng.random() < 0.3 or n_commits + n_aborts == 1:  # the second one always aborts
            producer.flush()
            producer.abort_transaction()
            aborted += len(msgs)
            n_aborts += 1
            for tp in consumer.assignment():
                committed = consumer.committed(tp)
                if committed is None:
                    consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, committed)
        else:
            producer.commit_transaction()
            n_commits += 1
            done.update((r.partition, r.offset) for r in msgs)
    assert max(done.values()) == 1 and n_aborts > 0 and n_commits > 0
    ends = _end_offsets(bs, src, 2)
    assert {tp.partition: consumer.committed(tp) for tp in consumer.assignment()} == ends
    consumer.close()
    producer.close()
    assert _committed(bs, group, src, 2) == ends
    _check_output(bs, inputs, dst, 1, aborted)


# -- pending offsets across a broker crash -----------------------------------------------------


@pytest.mark.parametrize("outcome", ["commit", "timeout"])
def test_offsets_of_an_open_transaction_survive_a_kill9_as_pending(tmp_path, outcome):
    """Offsets sent to a transaction that is still open when the broker dies are loaded back
    pending: invisible (UNSTABLE_OFFSET_COMMIT for read_committed consumers) until the transaction
    ends - committed by the producer after the restart, or aborted by the coordinator when it
    times out."""
    b = BrokerProcess(tmp_path / "data", overrides={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    b.start()
    try:
        bs = b.bootstrap
        src, dst, group = _uid("crash-in"), _uid("crash-out"), _uid("crash-group")
        _create(bs, src, 1)
        inputs = _fill(bs, src, 1, 10)
        consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.subscribe([src])
        got = []
        deadline = time.time() + 30
        while len(got) < 10 and time.time() < deadline:
            got += [m for m in consumer.consume(10, 0.5) if not m.error()]
        assert [m.value() for m in got] == inputs
        metadata = consumer.consumer_group_metadata()
        # long enough for the producer to commit after the restart, or short to be aborted by it
        producer = Producer({"bootstrap.servers": bs, "transactional.id": _uid("crash-tid"),
                             "transaction.timeout.ms": 60000 if outcome == "commit" else 4000})
        producer.init_transactions(30)
        for first, last in ((0, 5), (5, 10)):
            producer.begin_transaction()
            for m in got[first:last]:
                producer.produce(dst, value=b"T:" + m.value())
            producer.send_offsets_to_transaction([TopicPartition(src, 0, last)], metadata, 30)
            if last == 5:
                producer.commit_transaction(30)
        producer.flush(30)
        consumer.close()
        # the second transaction is open: its offset is pending
        assert _committed(bs, group, src, 1, isolation="read_uncommitted") == {0: 5}
        with pytest.raises(KafkaException):
            _committed(bs, group, src, 1, timeout=2)  # require_stable: UNSTABLE_OFFSET_COMMIT, retried
        b.kill9()
        b.start()
        assert _committed(bs, group, src, 1, isolation="read_uncommitted") == {0: 5}
        if outcome == "commit":
            producer.commit_transaction(60)
            expected = 10
        else:
            expected = 5  # the coordinator aborts it after transaction.timeout.ms
        assert _committed(bs, group, src, 1, timeout=60) == {0: expected}
        assert _read_all(bs, dst, 1, "read_committed") == [b"T:" + v for v in inputs[:expected]]
        # and so it stays after another restart
        b.stop()
        b.start()
        assert _committed(bs, group, src, 1, timeout=60) == {0: expected}
    finally:
        if b.proc is not None:
            try:
                b.stop()
            except Exception:
                b.kill9()
