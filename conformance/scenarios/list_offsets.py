"""ListOffsets through each client: earliest/latest, by timestamp, max timestamp."""

from __future__ import annotations

import time

from conformance import wire
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, KCAT, WIRE, scenario

ALL = [KAFKA_PYTHON, CONFLUENT, JAVA, KCAT]


@scenario("listoffsets.earliest-latest", area="list-offsets",
          title="Earliest and latest offsets: empty topic, after producing, after DeleteRecords", clients=ALL,
          requires=[21])
def earliest_latest(ctx):
    topic = ctx.topic()
    lo = ctx.client.list_offset
    ctx.expect_eq("empty", (lo(topic, 0, "earliest"), lo(topic, 0, "latest")), (0, 0))
    ctx.setup_produce(topic, [b"e%d" % i for i in range(25)])
    ctx.expect_eq("after_25", (lo(topic, 0, "earliest"), lo(topic, 0, "latest")), (0, 25))
    from confluent_kafka import TopicPartition

    for f in ctx.admin.admin.delete_records([TopicPartition(topic, 0, 5)]).values():
        f.result(20)
    ctx.expect_eq("after_delete_records_5", (lo(topic, 0, "earliest"), lo(topic, 0, "latest")), (5, 25))


@scenario("listoffsets.by-timestamp", area="list-offsets",
          title="Offset for a timestamp: first record with timestamp >= target; none after the last", clients=ALL)
def by_timestamp(ctx):
    topic = ctx.topic()
    t0 = int(time.time() * 1000) - 3_600_000
    ctx.setup_produce(topic, [b"t%d" % i for i in range(10)], timestamps=[t0 + i * 1000 for i in range(10)],
                      flush_every=3)
    lo = ctx.client.list_offset
    ctx.expect_eq("exact_t3", lo(topic, 0, t0 + 3000), 3)
    ctx.expect_eq("between_t3_t4", lo(topic, 0, t0 + 3500), 4)
    ctx.expect_eq("before_first", lo(topic, 0, t0 - 10_000), 0)
    ctx.expect_eq("after_last", lo(topic, 0, t0 + 100_000), None)


@scenario("listoffsets.max-timestamp", area="list-offsets",
          title="MAX_TIMESTAMP (-3, KIP-734): offset of the record with the largest timestamp",
          clients=[KAFKA_PYTHON, CONFLUENT, JAVA], requires=[(2, 7)])
def max_timestamp(ctx):
    """Timestamps out of order, one batch per record, then a batch of three: the maximum (t0+5000)
    first appears at offset 1 and again at offset 3."""
    topic = ctx.topic()
    t0 = int(time.time() * 1000) - 3_600_000
    stamps = [t0, t0 + 5000, t0 + 2000, t0 + 5000, t0 + 1000]
    ctx.setup_produce(topic, [b"m%d" % i for i in range(5)], timestamps=stamps, flush_every=1)
    ctx.expect_eq("max_timestamp_offset", ctx.client.list_offset(topic, 0, "max"), 1)
    ctx.setup_produce(topic, [b"n%d" % i for i in range(3)], timestamps=[t0 + 7000, t0 + 9000, t0 + 8000],
                      linger_ms=100)
    ctx.expect_eq("max_timestamp_inside_batch", ctx.client.list_offset(topic, 0, "max"), 6)


@scenario("listoffsets.max-timestamp-old-version", area="list-offsets",
          title="MAX_TIMESTAMP asked with ListOffsets v1 (before v7) is refused with UNSUPPORTED_VERSION",
          clients=[WIRE])
def max_timestamp_old_version(ctx):
    """librdkafka 2.0.2 (Debian's kcat) sends -3 with an old ListOffsets version; Kafka refuses it per
    partition instead of guessing."""
    topic = ctx.topic()
    ctx.setup_produce(topic, [b"a", b"b"])
    with ctx.wire() as conn:
        res = wire.list_offsets(conn, topic, 0, -3)
        ctx.expect_eq("error", wire.error_name(res["error"]), wire.error_name(35))
