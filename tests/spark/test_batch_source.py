"""Spark's batch Kafka source (``spark.read.format("kafka")``) against kcompat: exactly the records
of the requested offset range, with every column — key, value, topic, partition, offset,
timestamp, timestampType, headers — equal to what the producer wrote and the broker acknowledged.
"""

from __future__ import annotations

import json
import time

from tests.spark.support import KAFKA_COLUMNS, batch, create_topic, produce, unique

# explicit CreateTimes an hour ago: older ones (beyond the default 7-day retention.ms) would be deleted
BASE = (int(time.time()) - 3600) * 1000

HEADER_SHAPES = [
    [],
    [("trace", b"abc")],
    [("dup", b"1"), ("dup", b"2"), ("empty", b"")],
    [("nullvalue", None), ("bin", b"\x00\xff")],
]


def _records(n_per_partition: int, partitions: int, base_ts: int):
    out = []
    for p in range(partitions):
        for i in range(n_per_partition):
            key = None if i % 4 == 1 else (b"" if i % 7 == 3 else b"k-%d-%d" % (p, i))
            value = None if i % 9 == 5 else b"value %d/%d " % (p, i) * (1 + i % 5)
            out.append({"partition": p, "key": key, "value": value, "headers": HEADER_SHAPES[i % 4],
                        "timestamp": base_ts + p * 1000 + i})
    return out


def _expected(sent, include_headers: bool):
    rows = []
    for s in sent:
        row = (s.key, s.value, s.topic, s.partition, s.offset, s.timestamp, 0)
        if include_headers:
            row += (list(s.headers) or None,)  # Spark gives null, not [], for a record without headers
        rows.append(row)
    return rows


def _collect(df, include_headers: bool):
    cols = list(KAFKA_COLUMNS) + (["headers"] if include_headers else [])
    out = []
    for r in df.selectExpr(*cols).orderBy("partition", "offset").collect():
        row = (None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
               r.topic, r.partition, r.offset, r.ts, r.timestampType)
        if include_headers:
            row += (None if r.headers is None else
                    [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],)
        out.append(row)
    return out


def test_whole_topic_every_column(spark, bootstrap):
    topic = create_topic(bootstrap, unique("batch_all"), partitions=3)
    sent = produce(bootstrap, topic, _records(40, 3, BASE))
    df = batch(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert _collect(df, True) == _expected(sent, True)
    # without includeHeaders there is no headers column
    assert "headers" not in batch(spark, bootstrap, subscribe=topic).columns


def test_offset_range_json_per_partition(spark, bootstrap):
    topic = create_topic(bootstrap, unique("batch_range"), partitions=3)
    sent = produce(bootstrap, topic, _records(30, 3, BASE + 100_000))
    starting = {topic: {"0": 5, "1": -2, "2": 29}}
    ending = {topic: {"0": 17, "1": 3, "2": -1}}
    df = batch(spark, bootstrap, assign=json.dumps({topic: [0, 1, 2]}),
               startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending), includeHeaders="true")
    bounds = {0: (5, 17), 1: (0, 3), 2: (29, 30)}
    want = [s for s in sent if bounds[s.partition][0] <= s.offset < bounds[s.partition][1]]
    assert _collect(df, True) == _expected(want, True)


def test_earliest_to_latest_is_default_and_sees_new_records(spark, bootstrap):
    topic = create_topic(bootstrap, unique("batch_default"), partitions=2)
    first = produce(bootstrap, topic, _records(10, 2, BASE + 200_000))
    df = batch(spark, bootstrap, subscribe=topic)
    assert _collect(df, False) == _expected(first, False)
    second = produce(bootstrap, topic, _records(5, 2, BASE + 300_000))
    # a new read resolves "latest" again
    assert _collect(batch(spark, bootstrap, subscribe=topic), False) == sorted(
        _expected(first + second, False), key=lambda r: (r[3], r[4]))


def test_log_append_time_topic(spark, bootstrap):
    topic = create_topic(bootstrap, unique("batch_lat"), config={"message.timestamp.type": "LogAppendTime"})
    sent = produce(bootstrap, topic, [{"partition": 0, "key": b"k", "value": b"v%d" % i, "timestamp": 1000 + i}
                                      for i in range(5)])
    rows = _collect(batch(spark, bootstrap, subscribe=topic), False)
    assert [r[6] for r in rows] == [1] * 5                    # timestampType 1 = LogAppendTime
    assert [r[5] for r in rows] == [s.timestamp for s in sent]  # the broker's append time, as acknowledged
    assert all(r[5] > 1_600_000_000_000 for r in rows)          # not the producer's CreateTime
