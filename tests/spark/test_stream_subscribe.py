"""Spark's streaming Kafka source against kcompat: which topics and partitions it reads
(``subscribe``, ``subscribePattern``, ``assign``) and where it starts (``startingOffsets``
earliest, latest, JSON per partition).
"""

from __future__ import annotations

import json

from tests.spark.support import (
    MemoryQuery, create_topic, produce_values, run_available_now, stream, unique,
)


def _fill(bootstrap, topic, partitions, n, tag=b"r"):
    """``n`` records per partition; returns the rows Spark should see as (partition, offset, value)."""
    rows = []
    for p in range(partitions):
        for s in produce_values(bootstrap, topic, p, [b"%s-%d-%d" % (tag, p, i) for i in range(n)]):
            rows.append((s.partition, s.offset, s.value))
    return sorted(rows)


def _rows(spark, df, checkpoint, with_topic=False):
    select = ("topic", "partition", "offset", "value") if with_topic else ("partition", "offset", "value")
    return [tuple(bytes(x) if isinstance(x, (bytes, bytearray)) else x for x in r)
            for r in run_available_now(spark, df, checkpoint, select=select)]


def test_subscribe_earliest(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("sub"), partitions=3)
    want = _fill(bootstrap, topic, 3, 20)
    got = _rows(spark, stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest"), tmp_path / "cp")
    assert got == want


def test_subscribe_pattern_matches_only_its_topics(spark, bootstrap, tmp_path):
    prefix = unique("pat")
    a = create_topic(bootstrap, f"{prefix}-a", partitions=2)
    b = create_topic(bootstrap, f"{prefix}-b")
    other = create_topic(bootstrap, f"x{prefix}-c")
    want = sorted([(a, *r) for r in _fill(bootstrap, a, 2, 5)] + [(b, *r) for r in _fill(bootstrap, b, 1, 7)])
    _fill(bootstrap, other, 1, 3)
    # the driver's admin path matches with Scala's findFirstIn (a partial match), hence the anchor
    df = stream(spark, bootstrap, subscribePattern=f"^{prefix}-.*", startingOffsets="earliest")
    assert sorted(_rows(spark, df, tmp_path / "cp", with_topic=True)) == want


def test_assign_reads_only_assigned_partitions(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("assign"), partitions=3)
    want = [r for r in _fill(bootstrap, topic, 3, 10) if r[0] in (0, 2)]
    df = stream(spark, bootstrap, assign=json.dumps({topic: [0, 2]}), startingOffsets="earliest")
    assert _rows(spark, df, tmp_path / "cp") == want


def test_starting_offsets_json_per_partition(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("json"), partitions=3)
    existing = _fill(bootstrap, topic, 3, 10)
    starting = {topic: {"0": 4, "1": -2, "2": -1}}   # offset 4, earliest, latest
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets=json.dumps(starting))
    want = [r for r in existing if (r[0] == 0 and r[1] >= 4) or r[0] == 1]
    assert _rows(spark, df, tmp_path / "cp") == want


def test_starting_offsets_latest_skips_existing_records(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("latest"), partitions=2)
    _fill(bootstrap, topic, 2, 10, b"old")
    q = MemoryQuery(spark, stream(spark, bootstrap, subscribe=topic, startingOffsets="latest"), tmp_path / "cp",
                    trigger={"processingTime": "500 milliseconds"})
    try:
        q.wait_batches(1)   # the first batch fixed the starting offsets at the end of the log
        new = _fill(bootstrap, topic, 2, 5, b"new")
        assert [tuple(r) for r in q.wait_rows(len(new))] == new
    finally:
        q.stop()


def test_restart_from_checkpoint_reads_only_new_records(spark, bootstrap, tmp_path):
    """startingOffsets applies to a new query only; a restarted one continues from its checkpoint."""
    topic = create_topic(bootstrap, unique("resume"), partitions=2)
    first = _fill(bootstrap, topic, 2, 6, b"one")
    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest")
    assert _rows(spark, df, tmp_path / "cp") == first
    second = [r for r in _fill(bootstrap, topic, 2, 4, b"two") if r not in first]
    assert _rows(spark, df, tmp_path / "cp") == second
