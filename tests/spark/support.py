"""Helpers for the Spark tests: topics and records through confluent-kafka, and running Spark
queries whose rows the tests compare with what was produced: ``run_available_now`` (a parquet
sink, restartable from its checkpoint) and ``MemoryQuery`` (a running query, bounded waits).

Every wait has a deadline; nothing here asserts on speed.
"""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.read_back import read_to_end

_names = itertools.count()


def unique(prefix: str) -> str:
    """A name no other test uses (topics, query names, checkpoint directories)."""
    return f"{prefix}_{next(_names)}_{uuid.uuid4().hex[:6]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
    """Create ``name`` and wait until it exists; returns the name."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30)
    futures[name].result(30)
    return name


@dataclass(frozen=True)
class Sent:
    """A record as the broker acknowledged it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def produce(bootstrap: str, topic: str, records, *, config: dict | None = None) -> list[Sent]:
    """Produce ``records`` — dicts with ``partition``, ``key``, ``value`` and optional ``headers``
    (list of (name, bytes|None)) and ``timestamp`` (ms) — in order; returns them with their offsets."""
    acked: list[Sent] = []
    errors: list = []

    def reporter(headers):
        def report(err, msg):
            if err is not None:
                errors.append(err)
                return
            # headers as given: delivery reports do not always carry them
            acked.append(Sent(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                              tuple(headers or ()), msg.timestamp()[1]))
        return report

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **(config or {})})
    for r in records:
        kwargs = {k: r[k] for k in ("partition", "timestamp") if r.get(k) is not None}
        if r.get("headers"):
            kwargs["headers"] = r["headers"]
        p.produce(topic, key=r.get("key"), value=r.get("value"), on_delivery=reporter(r.get("headers")), **kwargs)
        p.poll(0)
    left = p.flush(60)
    if errors or left:
        raise KafkaException(errors[0] if errors else KafkaError(KafkaError._TIMED_OUT))
    return sorted(acked, key=lambda s: (s.partition, s.offset))


def produce_values(bootstrap: str, topic: str, partition: int, values: list[bytes], **kw) -> list[Sent]:
    """Produce plain values to one partition."""
    return produce(bootstrap, topic, [{"partition": partition, "value": v, **kw} for v in values])


def consume_all(bootstrap: str, topic: str, partitions, isolation: str = "read_uncommitted",
                headers: bool = False) -> list[tuple]:
    """Every record of ``partitions`` from the start to the end (tests/support/read_back.py), as
    (partition, offset, key, value), plus the headers (a list, [] for none) if ``headers``."""
    return read_to_end(bootstrap, topic, partitions, isolation=isolation, headers=headers)


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(log start offset, high watermark) of one partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm")})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


# -- Spark -----------------------------------------------------------------------------------------

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts", "timestampType")


def stream(spark, bootstrap: str, **options):
    """``spark.readStream.format("kafka")`` with ``kafka.bootstrap.servers`` and ``options``."""
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def batch(spark, bootstrap: str, **options):
    """``spark.read.format("kafka")`` with ``kafka.bootstrap.servers`` and ``options``."""
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


class MemoryQuery:
    """A streaming query into the memory sink; ``rows()`` reads what it has collected so far."""

    def __init__(self, spark, df, checkpoint, *, trigger: dict, select=("partition", "offset", "value")):
        self.spark = spark
        self.name = unique("q")
        self.query = (df.selectExpr(*select).writeStream.format("memory").queryName(self.name)
                      .option("checkpointLocation", str(checkpoint)).outputMode("append")
                      .trigger(**trigger).start())

    def rows(self) -> list[tuple]:
        """Every row the query has written so far, sorted."""
        return sorted(tuple(r) for r in self.spark.sql(f"SELECT * FROM {self.name}").collect())

    def wait_rows(self, n: int, timeout: float = 90.0) -> list[tuple]:
        """Wait until at least ``n`` rows arrived (re-raising a query failure at once)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.query.exception() is not None:
                raise self.query.exception()
            rows = self.rows()
            if len(rows) >= n:
                return rows
            time.sleep(0.3)
        raise AssertionError(f"{self.name}: {len(self.rows())} rows after {timeout}s, expected {n}; "
                             f"last progress {self.query.lastProgress}")

    def wait_batches(self, n: int, timeout: float = 90.0) -> None:
        """Wait until the query has completed at least ``n`` micro-batches."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.query.exception() is not None:
                raise self.query.exception()
            if len(self.query.recentProgress) >= n:
                return
            time.sleep(0.2)
        raise AssertionError(f"{self.name}: fewer than {n} batches after {timeout}s")

    def stop(self) -> None:
        """Stop the query (idempotent)."""
        self.query.stop()


def run_available_now(spark, df, checkpoint, select=("partition", "offset", "value"), timeout: float = 120.0,
                      progress: list | None = None) -> list[tuple]:
    """Process everything available with ``trigger(availableNow=True)``; return the rows this run wrote
    (and append the query's progress reports to ``progress`` if given).

    The sink is a parquet directory next to ``checkpoint`` (the file sink is exactly-once and, unlike
    the memory sink, can restart from a checkpoint), so running again with the same checkpoint
    continues where the previous run stopped.
    """
    checkpoint = Path(checkpoint)
    out = checkpoint.parent / f"{checkpoint.name}-out"
    before = _parquet_rows(spark, out)
    q = (df.selectExpr(*select).writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        if not q.awaitTermination(timeout):
            raise AssertionError(f"availableNow query did not finish within {timeout}s: {q.lastProgress}")
        if progress is not None:
            progress.extend(q.recentProgress)
    finally:
        q.stop()
    after = _parquet_rows(spark, out)
    for row in before:
        after.remove(row)
    return after


def _parquet_rows(spark, path: Path) -> list[tuple]:
    if not (path / "_spark_metadata").exists():
        return []
    return sorted(tuple(bytes(x) if isinstance(x, (bytes, bytearray)) else x for x in r)
                  for r in spark.read.parquet(str(path)).collect())
