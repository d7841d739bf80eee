"""Transactions: commit/abort with read_committed, the last stable offset, fencing, consumer offsets inside a
transaction, and the Java TransactionalMessageCopier (exactly-once copy with random aborts)."""

from __future__ import annotations

import time

from conformance import wire
from conformance.clients.java import json_events
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, WIRE, scenario
from conformance.scenarios.groups import GROUP_APIS, committed, wait_committed

# InitProducerId, AddPartitionsToTxn, EndTxn, FindCoordinator (transaction coordinator lookup)
TXN_APIS = (22, 24, 26, 10)
# AddOffsetsToTxn, TxnOffsetCommit: consumer offsets inside a transaction
TXN_OFFSET_APIS = (25, 28)


class TxnProducer:
    """A transactional producer of kafka-python or confluent-kafka behind one small interface."""

    def __init__(self, ctx, client: str, transactional_id: str) -> None:
        self.client = client
        if client == KAFKA_PYTHON:
            from kafka import KafkaProducer

            self.p = KafkaProducer(bootstrap_servers=ctx.bootstrap, transactional_id=transactional_id,
                                   request_timeout_ms=15000, max_block_ms=30000)
        else:
            from confluent_kafka import Producer

            self.p = Producer({"bootstrap.servers": ctx.bootstrap, "transactional.id": transactional_id,
                               "transaction.timeout.ms": 60000, "message.timeout.ms": 30000})
        ctx.on_cleanup(self.close)

    def init(self) -> None:
        self.p.init_transactions() if self.client == KAFKA_PYTHON else self.p.init_transactions(30)

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, values: list[bytes]) -> None:
        for v in values:
            if self.client == KAFKA_PYTHON:
                self.p.send(topic, value=v, partition=0)
            else:
                self.p.produce(topic, value=v, partition=0)
        self.p.flush(30) if self.client == KAFKA_PYTHON else self.p.flush(30)

    def send_offsets(self, offsets: dict[tuple[str, int], int], consumer) -> None:
        if self.client == KAFKA_PYTHON:
            from kafka import OffsetAndMetadata, TopicPartition

            self.p.send_offsets_to_transaction(
                {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()},
                consumer.group_metadata() if hasattr(consumer, "group_metadata") else consumer.config["group_id"])
        else:
            from confluent_kafka import TopicPartition

            self.p.send_offsets_to_transaction([TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                               consumer.consumer_group_metadata(), 30)

    def commit(self) -> None:
        self.p.commit_transaction() if self.client == KAFKA_PYTHON else self.p.commit_transaction(30)

    def abort(self) -> None:
        self.p.abort_transaction() if self.client == KAFKA_PYTHON else self.p.abort_transaction(30)

    def close(self) -> None:
        if self.client == KAFKA_PYTHON:
            self.p.close(timeout=10)
        else:
            self.p.flush(5)


@scenario("txn.commit-abort", area="transactions",
          title="Committed transactions are visible to read_committed, aborted ones only to read_uncommitted",
          clients=[KAFKA_PYTHON, CONFLUENT], requires=TXN_APIS, timeout=120)
def commit_abort(ctx):
    topic = ctx.topic()
    p = TxnProducer(ctx, ctx.case.client, ctx.transactional_id())
    p.init()
    for tag, outcome in ((b"c1", "commit"), (b"ab", "abort"), (b"c2", "commit")):
        p.begin()
        p.send(topic, [b"%s-%d" % (tag, i) for i in range(10)])
        p.commit() if outcome == "commit" else p.abort()
    # Exactly as many records as should be visible: an aborted record leaking to read_committed would be
    # among the first 20 (the aborted transaction sits between the two committed ones), and asking for
    # no more than exist keeps the fetch from waiting out its timeout.
    committed_values = [r.value for r in ctx.client.fetch(topic, 0, "earliest", 20, isolation="read_committed",
                                                          timeout_s=ctx.timeout(15))]
    ctx.expect_eq("read_committed", committed_values,
                  [b"c1-%d" % i for i in range(10)] + [b"c2-%d" % i for i in range(10)])
    uncommitted = [r.value for r in ctx.client.fetch(topic, 0, "earliest", 30, isolation="read_uncommitted",
                                                     timeout_s=ctx.timeout(15))]
    ctx.expect_eq("read_uncommitted", uncommitted, [b"%s-%d" % (tag, i) for tag in (b"c1", b"ab", b"c2")
                                                    for i in range(10)])
    with ctx.wire() as conn:
        ctx.expect_eq("log_end_offset_with_3_markers", _wait_lso(ctx, conn, topic, 0, 33)["high_watermark"], 33)


def _wait_lso(ctx, conn, topic: str, offset: int, lso: int, timeout: float = 15.0) -> dict:
    """Fetch (read_committed) until the LSO reaches ``lso``: commit/abort markers are written
    asynchronously after EndTxn returns, so the LSO moves a moment later."""
    deadline = time.monotonic() + ctx.timeout(timeout)
    while True:
        res = wire.fetch(conn, topic, 0, offset, isolation=1, max_wait_ms=100)
        if res["last_stable_offset"] >= lso or time.monotonic() > deadline:
            return res
        time.sleep(0.1)


@scenario("txn.last-stable-offset", area="transactions",
          title="An open transaction holds the last stable offset; aborted ranges are listed to read_committed",
          clients=[WIRE], requires=TXN_APIS, timeout=120)
def last_stable_offset(ctx):
    topic = ctx.topic()
    p = TxnProducer(ctx, CONFLUENT, ctx.transactional_id())
    p.init()
    ctx.setup_produce(topic, [b"plain-0", b"plain-1"])
    p.begin()
    p.send(topic, [b"open-%d" % i for i in range(5)])
    with ctx.wire() as conn:
        rc = wire.fetch(conn, topic, 0, 0, isolation=1, max_wait_ms=100)
        ru = wire.fetch(conn, topic, 0, 0, isolation=0, max_wait_ms=100)
        ctx.expect_eq("open_txn", {"hw": ru["high_watermark"], "lso": rc["last_stable_offset"]}, {"hw": 7, "lso": 2})
        last = max((b.base_offset + b.last_offset_delta for b in wire.batch_headers(rc["records"])), default=-1)
        ctx.check(last < 2, f"read_committed fetch returned records up to offset {last}, beyond the LSO 2")
        p.commit()
        done = _wait_lso(ctx, conn, topic, 0, 8)
        ctx.expect_eq("after_commit", {"hw": done["high_watermark"], "lso": done["last_stable_offset"]},
                      {"hw": 8, "lso": 8})
        p.begin()
        p.send(topic, [b"gone-%d" % i for i in range(3)])
        p.abort()
        ab = _wait_lso(ctx, conn, topic, 8, 12)
        ctx.expect_eq("aborted_first_offsets", [first for _, first in ab["aborted"]], [8])
        ctx.expect_eq("after_abort_lso", ab["last_stable_offset"], 12)


@scenario("txn.fencing", area="transactions",
          title="A second producer with the same transactional.id fences the first", clients=[KAFKA_PYTHON, CONFLUENT],
          requires=TXN_APIS, timeout=120)
def fencing(ctx):
    topic = ctx.topic()
    txid = ctx.transactional_id()
    old = TxnProducer(ctx, ctx.case.client, txid)
    old.init()
    new = TxnProducer(ctx, ctx.case.client, txid)
    new.init()
    try:
        old.begin()
        old.send(topic, [b"zombie"])
        old.commit()
        ctx.expect_eq("old_producer", "committed", "fenced")
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        fenced = any(s in text for s in ("Fenced", "FENCED", "INVALID_PRODUCER_EPOCH", "InvalidProducerEpoch"))
        ctx.expect_eq("old_producer", "fenced" if fenced else text[:200], "fenced")
    new.begin()
    new.send(topic, [b"live"])
    new.commit()
    # the first visible record: the zombie's, had it been committed, would come before the live one
    got = [r.value for r in ctx.client.fetch(topic, 0, "earliest", 1, isolation="read_committed",
                                             timeout_s=ctx.timeout(15))]
    ctx.expect_eq("read_committed", got, [b"live"])


@scenario("txn.send-offsets", area="transactions",
          title="Consume-transform-produce: offsets committed in the transaction only when it commits",
          clients=[KAFKA_PYTHON, CONFLUENT], requires=(*TXN_APIS, *TXN_OFFSET_APIS, *GROUP_APIS), timeout=150)
def send_offsets(ctx):
    src, dst = ctx.topic(), ctx.topic()
    group = ctx.group()
    ctx.setup_produce(src, [b"in-%d" % i for i in range(15)])
    client = ctx.case.client
    if client == KAFKA_PYTHON:
        consumer = ctx.client.consumer(group_id=group, auto_offset_reset="earliest", isolation_level="read_committed")
    else:
        consumer = ctx.client.consumer(**{"group.id": group, "auto.offset.reset": "earliest",
                                          "isolation.level": "read_committed"})
    consumer.subscribe([src])

    def poll(n):
        got, deadline = [], time.monotonic() + ctx.timeout(40)
        while len(got) < n and time.monotonic() < deadline:
            if client == KAFKA_PYTHON:
                for recs in consumer.poll(timeout_ms=300, max_records=n - len(got)).values():
                    got += [r.value for r in recs]
            else:
                got += [m.value() for m in consumer.consume(n - len(got), 0.3) if not m.error()]
        return got

    p = TxnProducer(ctx, client, ctx.transactional_id())
    p.init()
    first = poll(10)
    ctx.check(len(first) == 10, f"consumed {len(first)} of 10 input records")
    p.begin()
    p.send(dst, [v.upper() for v in first])
    p.send_offsets({(src, 0): 10}, consumer)
    p.commit()
    ctx.expect_eq("committed_after_commit", wait_committed(ctx, group, src, {0: 10}), {0: 10})
    rest = poll(5)
    p.begin()
    p.send(dst, [v.upper() for v in rest])
    p.send_offsets({(src, 0): 15}, consumer)
    p.abort()
    time.sleep(1)
    ctx.expect_eq("committed_after_abort", committed(ctx, group, src, [0]), {0: 10})
    out = ctx.client.fetch(dst, 0, "earliest", 20, isolation="read_committed", timeout_s=ctx.timeout(6))
    ctx.expect_eq("output_read_committed", [r.value for r in out], [b"IN-%d" % i for i in range(10)])


@scenario("txn.copier-exactly-once", area="transactions",
          title="Java TransactionalMessageCopier with random aborts copies every record exactly once",
          clients=[JAVA], requires=(*TXN_APIS, *TXN_OFFSET_APIS, *GROUP_APIS), timeout=300)
def copier(ctx):
    n = 3000
    src, dst = ctx.topic(), ctx.topic()
    group = ctx.group()
    ctx.setup_produce(src, [str(i).encode() for i in range(n)], linger_ms=20)
    res = ctx.client.tools.run("org.apache.kafka.tools.TransactionalMessageCopier",
                               ["--broker-list", ctx.bootstrap, "--input-topic", src, "--input-partition", 0,
                                "--output-topic", dst, "--transactional-id", ctx.transactional_id(),
                                "--consumer-group", group, "--transaction-size", 100, "--enable-random-aborts",
                                "--use-group-metadata", "--transaction-timeout", 30000, "--max-messages", -1],
                               timeout=ctx.timeout(240), check=False)
    events = json_events(res.stdout.splitlines())
    ctx.detail(copier_last_events=events[-3:], copier_exit=res.returncode)
    ctx.check(res.ok, f"TransactionalMessageCopier: {res.summary()}")
    from conformance.clients.confluent import ConfluentDriver

    reader = ConfluentDriver(ctx)
    got = reader.fetch(dst, 0, "earliest", n + 10, isolation="read_committed", timeout_s=ctx.timeout(20))
    values = [int(r.value) for r in got]
    ctx.expect_eq("duplicates", len(values) - len(set(values)), 0)
    ctx.expect_eq("missing", n - len(set(values)), 0)
    ctx.expect_eq("in_order", values == sorted(values), True)
    uncommitted = reader.fetch(dst, 0, "earliest", 3 * n, isolation="read_uncommitted", timeout_s=ctx.timeout(10))
    ctx.detail(records_including_aborted=len(uncommitted))
    ctx.expect_eq("group_offset", wait_committed(ctx, group, src, {0: n}), {0: n})
    reader.close()
