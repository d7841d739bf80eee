"""Exactly-once across a broker crash (KIP-98, KIP-447): kill -9 of the broker while a consume-transform-
produce loop runs transactions (~20 % aborted at random) and an idempotent producer writes sequential
values, then a restart on the same port and data. The loop acts as a correct application (retry retriable
errors; abort and rewind to the committed offsets on abortable ones; replace a fenced or fatally failed
producer by a new one with the same transactional.id). Afterwards read_committed sees each input record
transformed exactly once and nothing aborted, read_uncommitted also the aborted output, the group's
offsets are the input's end offsets, and each acknowledged idempotent record is stored once, where
acknowledged, in order. With confluent-kafka's and kafka-python's clients."""

from __future__ import annotations

import random
import sys
import threading
import time
import traceback
from collections import Counter

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka import errors as kerr
from kafka.structs import OffsetAndMetadata

from conformance.clients.kafka_python import subscribe_when_known
from tests.clients.common import wait_until
from tests.clients.test_transactions import _read
from tests.clients.test_transactions_offsets import _committed, _create, _end_offsets, _fill, _read_all, _uid
from tests.support import txn_copy
from tests.support.txn_copy import ConfluentCopyApp, bounded, copy_loop, new_stats

N, IN_PARTS, OUT_PARTS, SEQ_PARTS = 2000, 3, 2, 2
TIMEOUT = txn_copy.TIMEOUT  # seconds per blocking client call (a retriable failure is retried)


class _Confluent(ConfluentCopyApp):
    """confluent-kafka: the copy application of tests/support/txn_copy.py and an idempotent producer."""

    @staticmethod
    def idempotent(bs: str, topic: str, stop: threading.Event, acked: dict, failed: list) -> None:
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                      "message.timeout.ms": 60000, "error_cb": lambda e: e.fatal() and failed.append(e)})

        def cb(err, msg):
            if err is None:
                acked[int(msg.value())] = (msg.partition(), msg.offset())
            else:
                failed.append((msg.value(), err))
        i = 0
        while not stop.is_set():
            p.produce(topic, value=b"%d" % i, partition=i % SEQ_PARTS, on_delivery=cb)
            p.poll(0.002)
            i += 1
        assert p.flush(60) == 0


class _KafkaPython(_Confluent):
    """The same with kafka-python's consumer and producers."""

    FATAL = (kerr.ProducerFencedError, kerr.InvalidProducerEpochError, kerr.IllegalStateError,
             kerr.OutOfOrderSequenceNumberError, kerr.UnsupportedVersionError, kerr.AuthorizationError)

    def __init__(self, bs: str, src: str, group: str, tid: str) -> None:
        self.bs, self.src, self.tid, self.producer = bs, src, tid, None
        self.consumer = KafkaConsumer(bootstrap_servers=bs, group_id=group, isolation_level="read_committed",
                                      enable_auto_commit=False, auto_offset_reset="earliest")
        subscribe_when_known(self.consumer, [src])

    def new_producer(self) -> None:
        if self.producer is not None:
            self.close_producer()
        self.producer = KafkaProducer(bootstrap_servers=self.bs, transactional_id=self.tid,
                                      max_block_ms=TIMEOUT * 1000)
        self.producer.init_transactions()

    def poll(self, n: int) -> list:
        batch = self.consumer.poll(timeout_ms=500, max_records=n)
        return [(r.partition, r.offset, r.key, r.value) for recs in batch.values() for r in recs]

    def committed(self) -> dict[int, int]:
        return {tp.partition: self.consumer.committed(tp) for tp in self.consumer.assignment()}

    def seek(self, p: int, offset: int | None) -> None:
        self.consumer.seek(KTP(self.src, p), offset or 0)  # None: nothing committed, the input starts at 0

    def send_offsets(self, offsets: dict[int, int]) -> None:
        offsets = {KTP(self.src, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        _bounded(self.producer.send_offsets_to_transaction, offsets, self.consumer.group_metadata())

    def produce(self, dst: str, msgs) -> None:
        for _, _, k, v in msgs:
            self.producer.send(dst, key=k, value=b"T:" + v)

    def flush(self) -> None:
        self.producer.flush(timeout=TIMEOUT)

    def end(self, commit: bool) -> None:
        _bounded(self.producer.commit_transaction if commit else self.producer.abort_transaction)

    @classmethod
    def kind(cls, e: Exception) -> str:  # the client retries internally; TimeoutError: see _bounded
        return "fatal" if isinstance(e, cls.FATAL + (TimeoutError,)) else "abort"

    def close_producer(self) -> None:
        try:
            self.producer.close(timeout=5)
        except kerr.KafkaTimeoutError:  # close() first flushes, forever if records wait behind a dropped request
            self.producer._sender.force_close()

    @staticmethod
    def idempotent(bs: str, topic: str, stop: threading.Event, acked: dict, failed: list) -> None:
        p = KafkaProducer(bootstrap_servers=bs, enable_idempotence=True, acks="all", linger_ms=5)
        i = 0
        while not stop.is_set():
            f = p.send(topic, value=b"%d" % i, partition=i % SEQ_PARTS)
            f.add_callback(lambda md, i=i: acked.__setitem__(i, (md.partition, md.offset)))
            f.add_errback(lambda e, i=i: failed.append((i, e)))
            time.sleep(0.002)
            i += 1
        p.flush(60)
        p.close(10)


def _bounded(fn, *args) -> None:
    """fn(*args), given TIMEOUT seconds (:func:`tests.support.txn_copy.bounded`). kafka-python's
    send_offsets_to_transaction, commit_transaction and abort_transaction take no timeout, and kafka-python
    3.0.12 drops a transactional request it dequeues while the coordinator is down (kafka/producer/sender.py:
    await_ready raises with target_node set, so the handler is neither sent nor retried): the call then waits
    forever. As an application must, give up on that producer (TimeoutError is fatal) and fence it with a new
    one."""
    bounded(fn, *args, timeout=TIMEOUT)


def _loop(app, dst: str, ends: dict[int, int], stats: dict, deadline: float) -> None:
    """Consume-transform-produce until the group's committed offsets are the end of the input."""
    copy_loop(app, dst, lambda: app.committed() == ends, stats, deadline, random.Random(98447))


def _guard(errors: list, fn, *args) -> None:
    try:
        fn(*args)
    except BaseException:
        errors.append(traceback.format_exc())


def _diff(got: Counter, want: Counter) -> str:
    return f"missing {sorted((want - got).items())[:5]}, extra {sorted((got - want).items())[:5]}"


@pytest.mark.parametrize("client", [_Confluent, _KafkaPython], ids=["confluent", "kafka-python"])
def test_kill9_mid_transactions_and_idempotent_produce(fresh_broker, client):
    b = fresh_broker
    bs = b.bootstrap
    src, dst, seq, group = _uid("k9-in"), _uid("k9-out"), _uid("k9-seq"), _uid("k9-group")
    for topic, partitions in ((src, IN_PARTS), (dst, OUT_PARTS), (seq, SEQ_PARTS)):
        _create(bs, topic, partitions)
    inputs = _fill(bs, src, IN_PARTS, N)
    ends = _end_offsets(bs, src, IN_PARTS)
    app = client(bs, src, group, _uid("k9-tid"))
    stats = new_stats()
    stop, acked, failed, crashed = threading.Event(), {}, [], []
    deadline = time.monotonic() + 90
    threads = [threading.Thread(target=_guard, args=(crashed, _loop, app, dst, ends, stats, deadline), daemon=True),
               threading.Thread(target=_guard, args=(crashed, client.idempotent, bs, seq, stop, acked, failed),
                                daemon=True)]
    for t in threads:
        t.start()
    wait_until(lambda: stats["committed"] >= N // 4 or not threads[0].is_alive(), timeout=60, what="progress")
    assert threads[0].is_alive() and not crashed, crashed  # the crash comes in the middle of the run
    b.kill9()
    acked_before = len(acked)
    time.sleep(1)
    b.start()
    threads[0].join(max(1.0, deadline - time.monotonic()))
    stop.set()
    threads[1].join(90)
    stuck = ["".join(traceback.format_stack(sys._current_frames()[t.ident])) for t in threads if t.is_alive()]
    assert not stuck and not crashed, (crashed, stuck, stats["committed"], stats["errors"][-10:])
    app.close()

    # the output: each input transformed exactly once when committed, aborted output only uncommitted
    want = Counter(b"T:" + v for v in inputs)
    committed = Counter(_read_all(bs, dst, OUT_PARTS, "read_committed"))
    assert committed == want, _diff(committed, want)
    everything = Counter(_read_all(bs, dst, OUT_PARTS, "read_uncommitted"))
    assert not (committed + stats["aborted"]) - everything, _diff(everything, committed + stats["aborted"])
    assert set(everything) <= set(want) and stats["aborted"] and stats["committed"] > 0
    assert _committed(bs, group, src, IN_PARTS) == ends

    # the idempotent records: acked on both sides of the crash, each stored once, where acked, in order
    assert not failed, failed[:5]
    assert 0 < acked_before < len(acked)
    stored = _read(bs, seq, "read_uncommitted", partitions=range(SEQ_PARTS))  # (partition, offset, value)
    where = {int(v): (p, offset) for p, offset, v in stored}
    assert len(where) == len(stored), f"stored twice: {[v for v, n in Counter(v for *_, v in stored).items() if n > 1]}"
    for p in range(SEQ_PARTS):
        values = [int(v) for q, _, v in stored if q == p]
        assert values == sorted(values), f"partition {p} out of order"
    wrong = [(v, pos, where.get(v)) for v, pos in acked.items() if where.get(v) != pos]
    assert not wrong, f"{len(wrong)} acknowledged records not stored where acknowledged: {wrong[:5]}"
