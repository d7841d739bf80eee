"""The example pipeline of ``spark_it`` end to end against kcompat: JSON page views in, per-page
counts of 10-second event-time windows out through the Kafka sink. Run in three steps from one
checkpoint (each step processes what is there and stops, in several micro-batches), the output
topic read with read_committed holds every expected aggregate exactly once.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from datetime import datetime, timezone

from spark_it import events, pipeline
from tests.spark.support import consume_all, create_topic, unique

START_MS = int(datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc).timestamp() * 1000)
WINDOW_MS = 10_000
WATERMARK_MS = 5_000


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def expected_aggregates(views, watermark_ms: int) -> list[dict]:
    """The pipeline's output for ``views`` once the watermark is at ``watermark_ms``: one record per
    page and window whose end is at or below the watermark."""
    groups: dict = defaultdict(list)
    for v in views:
        start = v.ts_ms - v.ts_ms % WINDOW_MS
        groups[(start, v.page)].append(v.user)
    return sorted(({"window_start": _iso(s), "window_end": _iso(s + WINDOW_MS), "page": page,
                    "views": len(users), "users": len(set(users))}
                   for (s, page), users in groups.items() if s + WINDOW_MS <= watermark_ms),
                  key=lambda a: (a["window_start"], a["page"]))


def _output(bootstrap, topic):
    rows = consume_all(bootstrap, topic, [0], isolation="read_committed")
    out = [json.loads(v) for _, _, _, v in rows]
    assert [k.decode() for _, _, k, _ in rows] == [f"{a['page']}|{a['window_start']}" for a in out]
    return sorted(out, key=lambda a: (a["window_start"], a["page"]))


def _wait_output(bootstrap, topic, want, query, timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if query.exception() is not None:
            raise query.exception()
        got = _output(bootstrap, topic)
        if len(got) >= len(want):
            return got
        time.sleep(0.5)
    raise AssertionError(f"{len(_output(bootstrap, topic))} aggregates after {timeout}s, expected {len(want)}")


def test_pipeline_exactly_once_across_restarts(spark, bootstrap, tmp_path):
    # record timestamps are the events' times (May 2024): keep them from time-based retention
    in_topic = create_topic(bootstrap, unique("views"), partitions=2, config={"retention.ms": "-1"})
    out_topic = create_topic(bootstrap, unique("counts"))
    views = events.page_views(600, START_MS, step_ms=100, seed=7)   # 60 s of event time
    checkpoint = str(tmp_path / "checkpoint")
    rows_read = []

    def start(trigger):
        return pipeline.start(spark, bootstrap, in_topic, out_topic, checkpoint, trigger=trigger,
                              source_options={"maxOffsetsPerTrigger": "70"})

    produced: list = []

    def produce_up_to(n):
        events.produce(bootstrap, in_topic, views[len(produced):n])
        produced[:] = views[:n]
        return list(produced)

    # steps 1 and 2: process what is there (several micro-batches) and stop; restart from the checkpoint
    for upto in (250, 450):
        produce_up_to(upto)
        q = start({"availableNow": True})
        assert q.awaitTermination(180), q.lastProgress
        rows_read += [p["numInputRows"] for p in q.recentProgress]
        want = expected_aggregates(produced, produced[-1].ts_ms - WATERMARK_MS)
        assert _output(bootstrap, out_topic) == want

    # step 3: a continuously running query, stopped once idle, as a user would
    produce_up_to(600)
    want = expected_aggregates(produced, produced[-1].ts_ms - WATERMARK_MS)
    q = start({"processingTime": "1 second"})
    try:
        _wait_output(bootstrap, out_topic, want, q)
        _wait_idle(q)
    finally:
        q.stop()
    rows_read += [p["numInputRows"] for p in q.recentProgress]
    assert _output(bootstrap, out_topic) == want

    # every input record was read exactly once over the three runs
    assert sum(rows_read) == len(views)
    # and a run with nothing new writes nothing
    q = start({"availableNow": True})
    assert q.awaitTermination(120)
    assert _output(bootstrap, out_topic) == want


def _wait_idle(query, timeout=60.0):
    """Wait until the query has consumed everything and no batch is running (so stop() interrupts nothing)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = query.status
        if not status["isDataAvailable"] and not status["isTriggerActive"]:
            return
        time.sleep(0.2)
    raise AssertionError(f"query still busy after {timeout}s: {query.status}")
