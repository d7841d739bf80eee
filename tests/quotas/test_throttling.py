"""Client quotas enforced as Kafka 2+ does (KIP-13, KIP-219) against a real kcompat process with
confluent-kafka clients: a producer over ``producer_byte_rate`` and a consumer over
``consumer_byte_rate`` are held to their quota, see the throttle time in their statistics, and a
client without a quota on the same broker is never throttled.

Robust by design:

- the broker measures rates over ``quota.window.num`` = 1 window of 1 s. Kafka's ``Rate`` counts
  at least ``quota.window.num - 1`` whole windows, so with one there is no burst allowance; with
  more, a greedy client gets the allowance at once and its echo each time the burst's sample
  leaves the window, and a 6 s measurement would catch a varying share of those;
- the held rate is measured between request (fetch) boundaries, from the first one after the
  warm-up to the first one 8 s later (6 s for the consumer), so it counts whole throttle cycles;
- producer requests are ~1 MB (librdkafka's largest, about the quota): each throttle is ~1 s, so
  the round trip and request handling a KIP-219 client adds to each cycle (it waits out the
  throttle, then sends) cost a few percent even on a loaded machine; the producer's rate is
  measured over 8 s;
- consumer fetches are 16 KB: a fetch over the quota is answered empty and its bytes taken back
  (Kafka's ``unrecordQuotaSensor``), and the next one must wait until the whole fetch fits, so a
  consumer reaches ``1 - fetch / (quota x window)`` of its quota at best (~98% here, 50% with
  512 KB fetches).
"""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.quotas.support import MB, VALUE, FlatOutProducer, Throttles, set_quota
from tests.support.broker_process import BrokerProcess

WARM_UP_S = 1.0
MEASURE_S = 6.0
PRODUCE_MEASURE_S = 8.0
CHUNK = 1_000_000   # librdkafka message.max.bytes: the largest request it sends
FETCH = 16384
SMALL = b"s" * 16000   # one record per 16 KB batch


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("quota-throttling") / "data",
                       {"quota.window.num": "1", "quota.window.size.seconds": "1"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in ("held", "free", "data")]).values():
            future.result(30)
        yield b


def _end_offset(client, topic: str) -> int:
    return client.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]


def _next_append(client, topic: str) -> tuple[float, int]:
    """(when, end offset) at the first append to ``topic`` from now on: a request boundary."""
    before = _end_offset(client, topic)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        end = _end_offset(client, topic)
        if end != before:
            return time.monotonic(), end
    raise AssertionError(f"nothing appended to {topic} for 10 s")


def test_a_producer_is_held_to_its_byte_rate_and_an_unthrottled_one_is_not(broker):
    set_quota(broker.bootstrap, [("client-id", "held-producer")], producer_byte_rate=MB)
    held = FlatOutProducer(broker.bootstrap, "held", "held-producer", request_bytes=CHUNK)
    free = FlatOutProducer(broker.bootstrap, "free", "free-producer", rate=2 * MB)
    watcher = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watcher"})
    try:
        held.start()
        free.start()
        time.sleep(WARM_UP_S)
        t0, held0 = _next_append(watcher, "held")
        free0 = _end_offset(watcher, "free")
        time.sleep(PRODUCE_MEASURE_S)
        t1, held1 = _next_append(watcher, "held")
        free1 = _end_offset(watcher, "free")
    finally:
        held.stop()
        free.stop()
        watcher.close()
    held_rate = (held1 - held0) * len(VALUE) / (t1 - t0)
    free_rate = (free1 - free0) * len(VALUE) / (t1 - t0)
    assert 0.9 * MB <= held_rate <= 1.1 * MB, held_rate / MB
    assert held.throttles.max_ms > 0 and max(held.throttles.avgs) > 0   # the client saw the throttle time
    assert free.throttles.max_ms == 0, free.throttles.avgs                  # the other one never did
    assert free_rate > 1.5 * MB, free_rate / MB   # not held to anyone's quota
    assert not held.errors and not free.errors


def test_a_consumer_is_held_to_its_byte_rate_and_an_unthrottled_one_is_not(broker):
    loader = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": FETCH})
    total = 700
    for _ in range(total):   # 11 MB: more than the held consumer can read in the test
        loader.produce("data", SMALL)
        loader.poll(0)
    assert loader.flush(60) == 0
    set_quota(broker.bootstrap, [("client-id", "held-consumer")], consumer_byte_rate=MB)

    def consumer(client_id: str, throttles: Throttles):
        return ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": client_id, "client.id": client_id,
                            "auto.offset.reset": "earliest", "fetch.max.bytes": FETCH,
                            "max.partition.fetch.bytes": FETCH, "message.max.bytes": FETCH,
                            "statistics.interval.ms": 500, "stats_cb": throttles})

    held_throttles, free_throttles = Throttles(), Throttles()
    held, free = consumer("held-consumer", held_throttles), consumer("free-consumer", free_throttles)
    held.assign([TopicPartition("data", 0, 0)])
    free.assign([TopicPartition("data", 0, 0)])
    arrivals: list[float] = []
    free_count = 0
    try:
        deadline = time.monotonic() + WARM_UP_S + MEASURE_S + 30
        while time.monotonic() < deadline and (not arrivals or arrivals[-1] - arrivals[0] < WARM_UP_S + MEASURE_S + 1):
            for m in held.consume(10, timeout=0.01):
                assert m.error() is None, m.error()
                arrivals.append(time.monotonic())
            for m in free.consume(50, timeout=0):
                assert m.error() is None, m.error()
                free_count += 1
        while free_count < total and time.monotonic() < deadline:
            free_count += len(free.consume(50, timeout=0.2))
        held.poll(0.6)   # one more statistics interval
        free.poll(0.6)
    finally:
        held.close()
        free.close()
    # each record is a fetch of its own (one 16 KB batch): arrivals are fetch boundaries
    first = next(i for i, t in enumerate(arrivals) if t >= arrivals[0] + WARM_UP_S)
    last = next(i for i, t in enumerate(arrivals) if t >= arrivals[first] + MEASURE_S)
    rate = (last - first) * len(SMALL) / (arrivals[last] - arrivals[first])
    assert len(arrivals) < total   # still held back at the end, not drained
    assert 0.9 * MB <= rate <= 1.1 * MB, rate / MB
    assert held_throttles.max_ms > 0
    assert free_count == total and free_throttles.max_ms == 0
