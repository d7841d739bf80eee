"""librdkafka's KIP-320 offset validation against kcompat: a consumer starting at a position that
carries a leader epoch asks OffsetForLeaderEpoch where that epoch ends, and on a position beyond
it (log truncation) seeks back to the end offset instead of treating the position as out of range
(which with auto.offset.reset=earliest would rewind to the beginning)."""

from __future__ import annotations

import logging
import time

import confluent_kafka as ck

from .common import Rec, ck_admin, ck_consumer, ck_produce, topic_name


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _create(bootstrap: str, topic: str) -> None:
    admin = ck_admin(bootstrap)
    admin.create_topics([ck.admin.NewTopic(topic, 1, 1)])[topic].result(15)


def _consume_from(bootstrap: str, topic: str, offset: int, epoch: int, *, produce_after: int, timeout: float = 20.0):
    """Assign ``topic``-0 at ``(offset, leader epoch)``, let validation happen, then produce
    ``produce_after`` records and read until they arrive. Returns (offsets read, debug lines)."""
    lines = _Lines()
    logger = logging.getLogger(f"rdkafka-{topic}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(lines)
    c = ck_consumer(bootstrap, **{"auto.offset.reset": "earliest", "debug": "fetch,protocol", "logger": logger})
    got: list[int] = []
    try:
        c.assign([ck.TopicPartition(topic, 0, offset, leader_epoch=epoch)])
        deadline = time.monotonic() + timeout
        while not any("OffsetForLeaderEpochResponse" in ln for ln in lines.lines):
            assert time.monotonic() < deadline, "the consumer never sent OffsetForLeaderEpoch"
            got += [m.offset() for m in c.consume(num_messages=100, timeout=0.2) if m.error() is None]
        # whatever the validated position yields before the new records
        got += [m.offset() for m in c.consume(num_messages=100, timeout=1.0) if m.error() is None]
        sent = ck_produce(bootstrap, topic, [Rec(b"k", b"after-%d" % i) for i in range(produce_after)], partition=0)
        last = sent[-1].offset
        while not got or got[-1] < last:
            assert time.monotonic() < deadline, f"timed out, read {got}"
            for m in c.consume(num_messages=100, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.offset())
    finally:
        c.close()
        logger.removeHandler(lines)
    return got, lines.lines


def test_truncation_detected_seeks_to_the_epoch_end(broker, request):
    topic = topic_name(request)
    _create(broker.bootstrap, topic)
    ck_produce(broker.bootstrap, topic, [Rec(b"k", b"v%d" % i) for i in range(5)], partition=0)   # 0-4, epoch 0
    got, lines = _consume_from(broker.bootstrap, topic, 100, 0, produce_after=3)
    # epoch 0 ends at 5 < 100: librdkafka seeks to 5, not back to the beginning (0) as an
    # OFFSET_OUT_OF_RANGE + auto.offset.reset=earliest would
    assert got == [5, 6, 7]
    assert any("Sent OffsetForLeaderEpochRequest" in ln for ln in lines)


def test_valid_position_keeps_fetching_from_it(broker, request):
    topic = topic_name(request)
    _create(broker.bootstrap, topic)
    ck_produce(broker.bootstrap, topic, [Rec(b"k", b"v%d" % i) for i in range(5)], partition=0)
    got, lines = _consume_from(broker.bootstrap, topic, 3, 0, produce_after=2)
    assert got == [3, 4, 5, 6]
    assert any("validation succeeded" in ln for ln in lines), [ln for ln in lines if "VALID" in ln.upper()][:5]
