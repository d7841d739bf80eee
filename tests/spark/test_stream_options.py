"""Options of Spark's streaming Kafka source against kcompat: starting by timestamp (ListOffsets
by timestamp, -1 when nothing matches), rate limiting, splitting partitions, record headers, and
partitions added to a topic while the query runs.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.spark.support import (
    MemoryQuery, create_topic, produce, produce_values, run_available_now, stream, unique,
)

# CreateTimes an hour ago (much older ones would fall to the default 7-day retention.ms)
BASE = (int(time.time()) - 3600) * 1000


def _timestamped_topic(bootstrap):
    """Two partitions; partition 0 has one out-of-order timestamp (offset 2)."""
    topic = create_topic(bootstrap, unique("ts"), partitions=2)
    ts = {0: [BASE + d for d in (0, 1000, 5000, 2000, 3000, 4000, 6000, 7000)],
          1: [BASE + 500 + 1000 * i for i in range(8)]}
    sent = produce(bootstrap, topic, [{"partition": p, "value": b"%d-%d" % (p, i), "timestamp": t}
                                      for p in (0, 1) for i, t in enumerate(ts[p])])
    return topic, sent


def _from(sent, first_offset_by_partition):
    return sorted((s.partition, s.offset, s.value) for s in sent
                  if s.offset >= first_offset_by_partition[s.partition])


def test_starting_timestamp(spark, bootstrap, tmp_path):
    topic, sent = _timestamped_topic(bootstrap)
    # the first offset whose timestamp is >= the target: p0 offset 2 (ts +5000, before +2000), p1 offset 2
    df = stream(spark, bootstrap, subscribe=topic, startingTimestamp=BASE + 2500)
    assert run_available_now(spark, df, tmp_path / "cp") == _from(sent, {0: 2, 1: 2})


def test_starting_offsets_by_timestamp(spark, bootstrap, tmp_path):
    topic, sent = _timestamped_topic(bootstrap)
    by_ts = {topic: {"0": BASE + 6000, "1": BASE}}
    df = stream(spark, bootstrap, subscribe=topic, startingOffsetsByTimestamp=json.dumps(by_ts))
    assert run_available_now(spark, df, tmp_path / "cp") == _from(sent, {0: 6, 1: 0})


def test_timestamp_after_every_record_fails_by_default(spark, bootstrap, tmp_path):
    """No offset matches (the broker answers -1), so the default strategy "error" fails the query."""
    topic, _ = _timestamped_topic(bootstrap)
    df = stream(spark, bootstrap, subscribe=topic, startingTimestamp=BASE + 60_000)
    with pytest.raises(Exception, match="(?s)No offset matched from request"):
        run_available_now(spark, df, tmp_path / "cp")


def test_timestamp_after_every_record_with_latest_strategy(spark, bootstrap, tmp_path):
    topic, sent = _timestamped_topic(bootstrap)
    df = stream(spark, bootstrap, subscribe=topic, startingTimestamp=BASE + 60_000,
                startingOffsetsByTimestampStrategy="latest")
    assert run_available_now(spark, df, tmp_path / "cp") == []
    later = produce_values(bootstrap, topic, 1, [b"later"], timestamp=BASE + 70_000)
    assert run_available_now(spark, df, tmp_path / "cp") == [(1, later[0].offset, b"later")]


def test_max_offsets_per_trigger(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("rate"), partitions=3)
    sent = []
    for p, n in ((0, 20), (1, 10), (2, 5)):
        sent += produce_values(bootstrap, topic, p, [b"%d-%d" % (p, i) for i in range(n)])
    progress: list = []
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=10)
    rows = run_available_now(spark, df, tmp_path / "cp", progress=progress)
    assert rows == sorted((s.partition, s.offset, s.value) for s in sent)
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sum(sizes) == 35 and max(sizes) <= 10 and len(sizes) >= 4, sizes


def test_min_partitions_splits_kafka_partitions(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("minp"), partitions=2)
    sent = produce_values(bootstrap, topic, 0, [b"a%d" % i for i in range(30)])
    sent += produce_values(bootstrap, topic, 1, [b"b%d" % i for i in range(30)])
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", minPartitions=6)
    rows = run_available_now(spark, df, tmp_path / "cp",
                             select=("spark_partition_id() AS task", "partition", "offset", "value"))
    assert sorted(r[1:] for r in rows) == sorted((s.partition, s.offset, s.value) for s in sent)
    assert len({r[0] for r in rows}) == 6   # six Spark tasks, each reading a slice of one Kafka partition


def test_include_headers(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("hdr"))
    shapes = [[], [("a", b"1")], [("dup", b"x"), ("dup", b"y"), ("e", b"")], [("n", None), ("bin", b"\x00\x01")]]
    sent = produce(bootstrap, topic, [{"partition": 0, "value": b"v%d" % i, "headers": shapes[i % 4]}
                                      for i in range(12)])
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", includeHeaders="true")
    rows = run_available_now(spark, df, tmp_path / "cp", select=("offset", "headers"))
    got = [(off, None if hs is None else [(h.key, None if h.value is None else bytes(h.value)) for h in hs])
           for off, hs in rows]
    assert got == [(s.offset, list(s.headers) or None) for s in sent]


def test_topic_gains_partitions_while_running(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("grow"), partitions=1)
    want = [(s.partition, s.offset, s.value) for s in produce_values(bootstrap, topic, 0, [b"p0-%d" % i for i in range(5)])]
    q = MemoryQuery(spark, stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest"), tmp_path / "cp",
                    trigger={"processingTime": "500 milliseconds"})
    try:
        q.wait_rows(5)
        admin = AdminClient({"bootstrap.servers": bootstrap})   # keep it alive until the future completes
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
        for p in (1, 2, 0):
            want += [(s.partition, s.offset, s.value)
                     for s in produce_values(bootstrap, topic, p, [b"p%d-new-%d" % (p, i) for i in range(4)])]
        # new partitions are read from their beginning, as Spark does for partitions it discovers
        assert [tuple(r) for r in q.wait_rows(len(want))] == sorted(want)
    finally:
        q.stop()
