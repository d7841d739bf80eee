"""An exactly-once consume-transform-produce application (KIP-98, KIP-447) for fault tests and the
nemesis soak (bench/nemesis.py), acting as a correct application does: retry retriable errors;
abort and rewind to the group's committed offsets on abortable ones; replace a fenced or fatally
failed producer by a new one with the same ``transactional.id`` (its ``init_transactions`` fences
the old epoch).

- :class:`ConfluentCopyApp`: the input consumer (subscribed, in the copy's group,
  ``read_committed``) and the transactional producer, with confluent-kafka; each output record is
  the input's key and ``b"T:" + value``. tests/clients/test_transactions_kill9.py subclasses it
  for kafka-python.
- :func:`copy_loop`: the loop itself, a share of transactions aborted on purpose.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections import Counter
from typing import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.clients.common import close_ck_producer

TIMEOUT = 10  # seconds per blocking client call (a retriable failure is retried, see call)
PREFIX = b"T:"


class ConfluentCopyApp:
    """confluent-kafka: the input consumer (subscribed to ``src`` in ``group``) and the transactional
    producer (``tid``); ``consumer_conf`` / ``producer_conf`` are added to the clients' settings."""

    def __init__(self, bs: str, src: str, group: str, tid: str, consumer_conf: dict | None = None,
                 producer_conf: dict | None = None) -> None:
        self.bs, self.src, self.tid, self.producer = bs, src, tid, None
        self.producer_conf = dict(producer_conf or {})
        self.consumer_conf = {"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                              "enable.auto.commit": False, "auto.offset.reset": "earliest", **(consumer_conf or {})}
        self.consumer = Consumer(self.consumer_conf)
        self.consumer.subscribe([src])
        self.committed_failures = 0   # consecutive failed committed() calls
        self.renewed_consumers = 0

    def new_producer(self) -> None:
        if self.producer is not None:
            self.close_producer()
        # no re-bootstrap when the only broker is down: librdkafka 2.16 then keeps the decommissioned broker as
        # group coordinator and send_offsets_to_transaction hangs past its timeout (librdkafka #5511, #5456)
        self.producer = Producer({"bootstrap.servers": self.bs, "transactional.id": self.tid,
                                  "metadata.recovery.strategy": "none", **self.producer_conf})
        self.producer.init_transactions(TIMEOUT)

    def poll(self, n: int) -> list:  # (partition, offset, key, value); errors are the broker being down
        return [(m.partition(), m.offset(), m.key(), m.value()) for m in self.consumer.consume(n, 0.5)
                if not m.error()]

    def committed(self) -> dict[int, int]:
        """The group's committed offsets of the assigned partitions. After ``RENEW_AFTER``
        consecutive failures the consumer is replaced (see :meth:`renew_consumer`)."""
        try:
            out = {tp.partition: tp.offset for tp in self.consumer.committed(self.consumer.assignment(), TIMEOUT)}
        except KafkaException:
            self.committed_failures += 1
            if self.committed_failures >= self.RENEW_AFTER:
                self.renew_consumer()
            raise
        self.committed_failures = 0
        return out

    RENEW_AFTER = 3

    def renew_consumer(self) -> None:
        """Replace the input consumer by a new member of the group: librdkafka 2.16 can keep a
        decommissioned broker handle as its group coordinator (the broker left the Metadata while
        fenced) and then time out every OffsetFetch and heartbeat for good (the member is
        removed on session timeout). The new member is assigned partitions and starts at the
        group's committed offsets, which is what a rewind after an abort asks for. The old
        consumer is closed on a thread of its own, as its close may block too."""
        old = self.consumer
        self.consumer = Consumer(self.consumer_conf)
        self.consumer.subscribe([self.src])
        self.committed_failures = 0
        self.renewed_consumers += 1
        threading.Thread(target=old.close, daemon=True).start()

    def rewind(self) -> None:  # back to the group's committed offsets (after an abort)
        for p, offset in self.committed().items():
            self.seek(p, offset)

    def seek(self, p: int, offset: int) -> None:
        self.consumer.seek(TopicPartition(self.src, p, offset if offset >= 0 else OFFSET_BEGINNING))

    def produce(self, dst: str, msgs) -> None:
        for _, _, k, v in msgs:
            self.producer.produce(dst, key=k, value=PREFIX + v)

    def send_offsets(self, offsets: dict[int, int]) -> None:
        self._bounded(self.producer.send_offsets_to_transaction,
                      [TopicPartition(self.src, p, o) for p, o in offsets.items()],
                      self.consumer.consumer_group_metadata(), TIMEOUT)

    def flush(self) -> None:
        assert self.producer.flush(TIMEOUT) == 0, "records not delivered"

    def end(self, commit: bool) -> None:
        self._bounded(self.producer.commit_transaction if commit else self.producer.abort_transaction, TIMEOUT)

    def _bounded(self, fn, *args) -> None:
        """A transactional call that librdkafka bounds by ``TIMEOUT`` itself, watched for 3 x
        ``TIMEOUT``: librdkafka 2.16 can block in send_offsets_to_transaction far past its timeout
        (a TxnOffsetCommit to a group coordinator whose broker handle it decommissioned when the
        broker left the Metadata, e.g. fenced: "Broker handle destroyed", then nothing until the
        producer is fenced). Then the producer is abandoned (TimeoutError is fatal: the next
        ``init_transactions`` with the same transactional.id fences it); it is not closed, as a
        thread is still inside it."""
        try:
            bounded(fn, *args, timeout=3 * TIMEOUT)
        except TimeoutError:
            self.producer = None
            raise

    @staticmethod
    def kind(e: Exception) -> str:
        if isinstance(e, TimeoutError):
            return "fatal"
        err = e.args[0] if isinstance(e, KafkaException) and e.args else None
        if not isinstance(err, KafkaError):
            return "abort"
        return "fatal" if err.fatal() else "abort" if err.txn_requires_abort() or not err.retriable() else "retry"

    def close(self) -> None:
        self.consumer.close()
        self.close_producer()

    def close_producer(self) -> None:
        if self.producer is not None:
            close_ck_producer(self.producer)


def bounded(fn, *args, timeout: float) -> None:
    """fn(*args) in a thread of its own, waited for ``timeout`` seconds: TimeoutError if it has not
    returned by then (the thread goes on; a client call that ignores its own timeout cannot be
    interrupted), else its exception, if any."""
    done, failure = threading.Event(), []

    def run():
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - handed to the caller
            failure.append(e)
        done.set()
    threading.Thread(target=run, daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"{getattr(fn, '__name__', fn)} blocked for {timeout} s")
    if failure:
        raise failure[0]


class Failed(Exception):
    """A transaction that cannot go on: args[0] is "abort" or "fatal"."""


def new_stats() -> dict:
    """The counters :func:`copy_loop` fills: records ``committed``, ``aborted`` output values (a
    Counter), transactions failed into an ``abort`` / a ``fatal`` error, client ``errors`` (text),
    ``transactions`` ended, the client call under way (``in_call``) and silent retries (``retried``,
    ``last_retry_error``) of :func:`until_done`."""
    return {"committed": 0, "aborted": Counter(), "abort": 0, "fatal": 0, "errors": [], "transactions": 0,
            "in_call": None, "retried": 0, "last_retry_error": None}


def call(app, stats: dict, fn, *args, tries: int = 3):
    """fn(*args), again while it fails with a retriable error; else raise Failed("abort" or "fatal").
    ``stats["in_call"]``: (name, monotonic start) of the call under way, None between calls."""
    for attempt in range(tries):
        try:
            stats["in_call"] = (fn.__name__, time.monotonic())
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - classified as the client documents its errors
            stats["errors"].append(f"{fn.__name__}: {e!r}")
            kind = app.kind(e)
            if kind != "retry" or attempt == tries - 1:
                raise Failed("abort" if kind == "retry" else kind) from e
        finally:
            stats["in_call"] = None


def until_done(fn, deadline: float, stats: dict | None = None) -> None:
    """fn() until it returns without raising; AssertionError (with the last traceback) at ``deadline``
    (monotonic seconds). With ``stats``: ``stats["in_call"]`` as in :func:`call`, and each failure
    counted in ``stats["retried"]`` with the last in ``stats["last_retry_error"]``."""
    start = time.monotonic()
    while True:
        try:
            if stats is not None:
                stats["in_call"] = (fn.__name__, start)
            return fn()
        except Exception as e:  # noqa: BLE001 - e.g. the broker is not back yet
            if stats is not None:
                stats["retried"] = stats.get("retried", 0) + 1
                stats["last_retry_error"] = f"{fn.__name__}: {e!r}"
            assert time.monotonic() < deadline, traceback.format_exc()
            time.sleep(0.5)
        finally:
            if stats is not None:
                stats["in_call"] = None


def copy_loop(app, dst: str, done: Callable[[], bool], stats: dict, deadline: float, rng: random.Random,
              abort_ratio: float = 0.2, on_commit: Callable[[dict[int, int]], None] | None = None,
              batch: tuple[int, int] = (10, 50)) -> None:
    """Consume-transform-produce from ``app``'s input to ``dst`` until ``done()`` is true when a poll
    returns nothing (e.g. the group's committed offsets are the end of the input). Each batch (up to
    ``rng.randint(*batch)`` records of one poll) is one transaction, aborted on purpose with
    probability ``abort_ratio`` (``rng``); ``on_commit(offsets)``
    after each committed transaction ({partition: next offset}). AssertionError at ``deadline``."""
    until_done(app.new_producer, deadline, stats)
    while time.monotonic() < deadline:
        try:
            msgs = app.poll(rng.randint(*batch))
            if not msgs and done():
                return
        except Exception as e:  # noqa: BLE001 - a consumer call while the broker is down
            stats["errors"].append(f"poll: {e!r}")
            continue
        if not msgs:
            continue
        commit = rng.random() >= abort_ratio
        offsets: dict[int, int] = {}
        for p, o, _, _ in msgs:
            offsets[p] = max(offsets.get(p, 0), o + 1)
        try:
            call(app, stats, app.producer.begin_transaction)
            call(app, stats, app.produce, dst, msgs, tries=1)  # never twice: a retry would duplicate records
            call(app, stats, app.send_offsets, offsets)
            if not commit:
                call(app, stats, app.flush)  # the output to abort reaches the log
            call(app, stats, app.end, commit)
            stats["transactions"] += 1
            stats["committed"] += len(msgs) if commit else 0
            stats["aborted"].update(() if commit else (PREFIX + v for _, _, _, v in msgs))
            if commit and on_commit is not None:
                on_commit(offsets)
        except Failed as f:
            commit, kind = False, f.args[0]
            stats[kind] += 1
            try:
                if kind != "fatal":
                    call(app, stats, app.end, False)
            except Failed:
                kind = "fatal"
            if kind == "fatal":  # a new producer: its init_transactions fences the old one's epoch
                until_done(app.new_producer, deadline, stats)
        if not commit:
            until_done(app.rewind, deadline, stats)
    raise AssertionError(f"loop timed out: {stats['committed']} records committed")
