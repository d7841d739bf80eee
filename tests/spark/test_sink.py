"""Spark's Kafka sink against kcompat: the default producer (idempotent, acks=all) writes every
row once — keys, values, headers and explicit partitions as given — and the broker's producer
state shows idempotent sequences that cover exactly the rows written.
"""

from __future__ import annotations

from kcompat.protocol.messages.describe_producers import DescribeProducersRequest
from tests.spark.support import consume_all, create_topic, unique
from kcompat.testing import wire


def _idempotent_records_written(bootstrap, topic, partitions) -> int:
    """Records written by idempotent producers, per the broker's producer state (DescribeProducers)."""
    resp = wire.call(bootstrap, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=list(partitions))]), 0)
    total = 0
    for part in resp.topics[0].partitions:
        assert part.error_code == 0
        for state in part.active_producers:
            assert state.producer_id >= 0 and state.producer_epoch >= 0
            total += state.last_sequence + 1   # each producer's sequences start at 0 on each partition
    return total


def test_batch_write_every_row_once(spark, bootstrap):
    topic = create_topic(bootstrap, unique("sink"), partitions=3)
    rows = [(f"k{i}" if i % 5 else None, f"value {i}", i % 3,
             [("n", str(i).encode()), ("dup", b"a"), ("dup", b"b")] if i % 2 else [])
            for i in range(300)]
    df = spark.createDataFrame(rows, "key STRING, value STRING, partition INT, "
                                     "headers ARRAY<STRUCT<key: STRING, value: BINARY>>").repartition(4)
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()

    got = consume_all(bootstrap, topic, range(3), headers=True)
    assert sorted((p, repr(k), v.decode(), h) for p, _, k, v, h in got) == \
        sorted((p, repr(None if k is None else k.encode()), v, h) for k, v, p, h in rows)
    assert _idempotent_records_written(bootstrap, topic, range(3)) == len(rows)


def test_headers_reach_consumers(spark, bootstrap):
    from confluent_kafka import Consumer, TopicPartition

    topic = create_topic(bootstrap, unique("sinkhdr"))
    spark.createDataFrame([("v1", [("a", b"1"), ("a", b"2")]), ("v2", [("n", None)])],
                          "value STRING, headers ARRAY<STRUCT<key: STRING, value: BINARY>>") \
        .coalesce(1).write.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic).save()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("h"), "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    msgs = []
    try:
        while len(msgs) < 2:
            msgs += [m for m in c.consume(10, 5) if not m.error()]
    finally:
        c.close()
    assert sorted((m.value(), m.headers()) for m in msgs) == [
        (b"v1", [("a", b"1"), ("a", b"2")]), (b"v2", [("n", None)])]
