"""``failOnDataLoss`` against kcompat: offset gaps that are not data loss (compaction, transaction
markers; SPARK-23685) never fail a query, while offsets that retention or DeleteRecords removed
give Spark an OFFSET_OUT_OF_RANGE, which fails the query with ``failOnDataLoss=true`` and is
skipped with ``false``.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.spark.support import (
    batch, consume_all, create_topic, produce, produce_values, run_available_now, stream, unique, watermarks,
)


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_compacted_topic_with_fail_on_data_loss(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("compact"), config={
        "cleanup.policy": "compact", "internal.segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "3600000"})
    produced = {}
    for round_ in range(10):   # 10 rounds of updates to 10 keys, spread over many small segments
        for s in produce(bootstrap, topic, [{"partition": 0, "key": b"key-%d" % k, "value": b"v%d-%d" % (round_, k)}
                                            for k in range(10)]):
            produced[s.offset] = (s.key, s.value)
    latest = {b"key-%d" % k: b"v9-%d" % k for k in range(10)}
    _wait_for(lambda: len(consume_all(bootstrap, topic, [0])) < 60, 60, "the cleaner to compact the topic")

    def check(rows):
        """What a reader of a compacted log may see: records as produced at their offsets, with gaps,
        and every key's latest value (the cleaner may still be working, so no exact list)."""
        assert all(produced[o] == (k, v) for _, o, k, v in rows)
        assert len(rows) < 100 and rows[-1][1] == 99
        assert {k: v for _, _, k, v in rows} == latest

    df = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", failOnDataLoss="true")
    check(run_available_now(spark, df, tmp_path / "cp", select=("partition", "offset", "key", "value")))
    # the batch source (failOnDataLoss is true by default) too
    rows = batch(spark, bootstrap, subscribe=topic).select("partition", "offset", "key", "value").collect()
    check(sorted((r[0], r[1], bytes(r[2]), bytes(r[3])) for r in rows))


def _transactions(bootstrap, topic, tid):
    """committed, aborted, committed (5 records each), in one partition; returns the producer."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    for i, outcome in enumerate(("commit", "abort", "commit")):
        p.begin_transaction()
        for j in range(5):
            p.produce(topic, partition=0, value=b"txn%d-%s-%d" % (i, outcome.encode(), j))
        p.flush(30)   # the records reach the broker before the outcome (otherwise abort purges them locally)
        p.commit_transaction(30) if outcome == "commit" else p.abort_transaction(30)
    return p


def test_transactions_read_uncommitted_and_committed(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, unique("txn"))
    p = _transactions(bootstrap, topic, unique("tid"))
    everything = [(0, o, v) for _, o, _, v in consume_all(bootstrap, topic, [0])]
    committed = [(0, o, v) for _, o, _, v in consume_all(bootstrap, topic, [0], "read_committed")]
    assert len(everything) == 15 and len(committed) == 10   # offsets 5, 11, 17 are commit/abort markers

    uncommitted_rows = run_available_now(spark, stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                                                       failOnDataLoss="true"), tmp_path / "u")
    assert uncommitted_rows == everything
    committed_rows = run_available_now(spark, stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                                                     failOnDataLoss="true",
                                                     **{"kafka.isolation.level": "read_committed"}), tmp_path / "c")
    assert committed_rows == committed
    assert not any(b"abort" in v for _, _, v in committed_rows)

    # an open transaction: read_committed stops at the last stable offset until it commits
    p.begin_transaction()
    produce_later = [b"open-%d" % j for j in range(3)]
    for v in produce_later:
        p.produce(topic, partition=0, value=v)
    p.flush(30)
    rc = stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", failOnDataLoss="true",
                **{"kafka.isolation.level": "read_committed"})
    assert run_available_now(spark, rc, tmp_path / "c") == []
    p.commit_transaction(30)
    assert [v for _, _, v in run_available_now(spark, rc, tmp_path / "c")] == produce_later
    # the batch source with read_committed
    rows = batch(spark, bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_committed"}).collect()
    assert sorted(bytes(r.value) for r in rows) == sorted([v for _, _, v in committed] + produce_later)
    del p   # the transactional producer's threads end with it


def _set_topic_config(bootstrap, topic, **configs):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)


def test_retention_removed_offsets_of_a_running_query(spark, bootstrap, tmp_path):
    # segment.bytes so small that every produce call (one batch) gets a segment of its own
    topic = create_topic(bootstrap, unique("retention"), config={"internal.segment.bytes": "100", "retention.ms": "3600000"})
    old = int(time.time() * 1000) - 600_000   # ten minutes ago: kept by 1 h, expired by 1 min
    first = produce_values(bootstrap, topic, 0, [b"first-%d" % i for i in range(20)], timestamp=old)
    options = dict(subscribe=topic, startingOffsets="earliest")
    assert len(run_available_now(spark, stream(spark, bootstrap, failOnDataLoss="true", **options),
                                 tmp_path / "cp")) == len(first)
    for n in range(4):
        produce_values(bootstrap, topic, 0, [b"expired-%d-%d" % (n, i) for i in range(10)], timestamp=old)
    fresh = produce_values(bootstrap, topic, 0, [b"fresh-%d" % i for i in range(10)])
    assert fresh[0].offset == 60

    _set_topic_config(bootstrap, topic, retention_ms="60000")
    _wait_for(lambda: watermarks(bootstrap, topic, 0) == (60, 70), 60, "retention to delete the old segments")

    # the query's next offset (20) is gone: with failOnDataLoss=true the query fails ...
    with pytest.raises(Exception, match="(?s)Some data may have been lost") as failure:
        run_available_now(spark, stream(spark, bootstrap, failOnDataLoss="true", **options), tmp_path / "cp")
    # [20, 70): the executor's consumer got OFFSET_OUT_OF_RANGE at 20 for the batch's range 20-70
    assert "Could not read records in offset [20, 70)" in str(failure.value)
    # ... and with false it moves on to the log start offset
    rows = run_available_now(spark, stream(spark, bootstrap, failOnDataLoss="false", **options), tmp_path / "cp")
    assert rows == [(0, s.offset, s.value) for s in fresh]


def test_batch_read_below_log_start_after_delete_records(spark, bootstrap):
    topic = create_topic(bootstrap, unique("deleted"))
    sent = produce_values(bootstrap, topic, 0, [b"r%d" % i for i in range(30)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.delete_records([TopicPartition(topic, 0, 12)])
    for f in result.values():
        assert f.result(30).low_watermark == 12          # the new low watermark
    assert watermarks(bootstrap, topic, 0) == (12, 30)
    starting = json.dumps({topic: {"0": 5}})
    with pytest.raises(Exception, match="(?s)Some data may have been lost") as failure:
        batch(spark, bootstrap, subscribe=topic, startingOffsets=starting, failOnDataLoss="true").collect()
    assert "OffsetOutOfRangeException" in str(failure.value)   # the Java consumer's, from the broker's error
    rows = batch(spark, bootstrap, subscribe=topic, startingOffsets=starting, failOnDataLoss="false").collect()
    assert sorted((r.offset, bytes(r.value)) for r in rows) == [(s.offset, s.value) for s in sent[12:]]
