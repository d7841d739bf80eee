"""Fetch: from an offset (inside a batch), whole batches, headers and timestamps, null keys/values,
LogAppendTime, out-of-range offsets, long polls (max_wait_ms/min_bytes), isolation levels."""

from __future__ import annotations

import threading
import time

from conformance import wire
from conformance.clients.base import Rec
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, KCAT, WIRE, scenario

ALL = [KAFKA_PYTHON, CONFLUENT, JAVA, KCAT]


@scenario("fetch.from-offset", area="fetch",
          title="Consume from an offset in the middle of a batch: exactly the records from that offset",
          clients=ALL)
def from_offset(ctx):
    """100 records in batches of 10; reading 20 records from offset 37 (inside the batch 30-39)."""
    topic = ctx.topic()
    ctx.setup_produce(topic, [b"v%03d" % i for i in range(100)], linger_ms=50, flush_every=10)
    got = ctx.client.fetch(topic, 0, 37, 20, timeout_s=ctx.timeout(15))
    ctx.expect_eq("offsets", [r.offset for r in got], list(range(37, 57)))
    ctx.expect_eq("values_match", [r.value for r in got] == [b"v%03d" % i for i in range(37, 57)], True)


@scenario("fetch.from-timestamp", area="fetch",
          title="Consume from a timestamp: starts at the first record whose timestamp is >= the target",
          clients=ALL)
def from_timestamp(ctx):
    """Records 1 s apart in batches of 4; start from a timestamp between records 5 and 6."""
    topic = ctx.topic()
    t0 = int(time.time() * 1000) - 3_600_000
    ctx.setup_produce(topic, [b"ts%d" % i for i in range(12)], timestamps=[t0 + i * 1000 for i in range(12)],
                      linger_ms=50, flush_every=4)
    got = ctx.client.fetch_from_timestamp(topic, 0, t0 + 5500, 3, timeout_s=ctx.timeout(15))
    ctx.expect_eq("offsets", [r.offset for r in got], [6, 7, 8])
    ctx.expect_eq("values", [r.value for r in got], [b"ts6", b"ts7", b"ts8"])


@scenario("fetch.whole-batch", area="fetch",
          title="Fetch at an offset inside a batch returns that whole batch (base offset below the fetch offset)",
          clients=[WIRE])
def whole_batch(ctx):
    topic = ctx.topic()
    with ctx.wire() as conn:
        res = wire.produce(conn, topic, 0, wire.record_batch([b"b%d" % i for i in range(10)]))
        ctx.check(res["error"] == 0, f"produce: {wire.error_name(res['error'])}")
        got = wire.fetch(conn, topic, 0, 5, max_wait_ms=100)
        batches = wire.batch_headers(got["records"])
        ctx.check(batches, f"fetch at offset 5 returned no complete batch ({len(got['records'])} bytes, "
                           f"error {wire.error_name(got['error'])})")
        ctx.expect_eq("first_batch", (batches[0].base_offset, batches[0].last_offset_delta, batches[0].record_count),
                      (0, 9, 10))
        ctx.expect_eq("high_watermark", got["high_watermark"], 10)


@scenario("fetch.headers-and-timestamps", area="fetch",
          title="Record headers, keys and CreateTime timestamps survive the round trip", clients=ALL)
def headers_timestamps(ctx):
    topic = ctx.topic()
    client = ctx.case.client
    base = int(time.time() * 1000) - 3_600_000
    sets_ts = client in (KAFKA_PYTHON, CONFLUENT)
    headers = [("h1", b"one"), ("h2", b"two-2"), ("h1", b"dup")]
    recs = [Rec(value=b"val-%d" % i, key=b"key-%d" % i, headers=headers,
                timestamp_ms=base + i * 1000 if sets_ts else None) for i in range(5)]
    ctx.client.produce(topic, recs, acks="all")
    got = ctx.client.fetch(topic, 0, 0, 5, timeout_s=ctx.timeout(15))
    ctx.expect_eq("count", len(got), 5)
    ctx.expect_eq("keys_values", [(r.key, r.value) for r in got], [(r.key, r.value) for r in recs])
    ctx.expect_eq("headers", [r.headers for r in got][0], headers)
    ctx.check(all(r.headers == headers for r in got), "headers differ between records")
    if sets_ts:
        ctx.expect_eq("timestamps", [r.timestamp_ms - base for r in got], [i * 1000 for i in range(5)])
    else:
        now = time.time() * 1000
        ctx.check(all(r.timestamp_ms and abs(r.timestamp_ms - now) < 600_000 for r in got),
                  f"CreateTime timestamps not near now: {[r.timestamp_ms for r in got]}")
    if client in (KAFKA_PYTHON, CONFLUENT, JAVA):
        ctx.expect_eq("timestamp_type", sorted({r.timestamp_type for r in got}), ["create"])


@scenario("fetch.null-key-and-value", area="fetch",
          title="Null key, null value (tombstone) and empty value stay distinct", clients=[KAFKA_PYTHON, CONFLUENT])
def null_values(ctx):
    topic = ctx.topic()
    recs = [Rec(value=None, key=b"k"), Rec(value=b"", key=None), Rec(value=b"v", key=b"")]
    ctx.client.produce(topic, recs, acks="all")
    got = ctx.client.fetch(topic, 0, 0, 3)
    ctx.expect_eq("key_value_pairs", [(r.key, r.value) for r in got], [(b"k", None), (None, b""), (b"", b"v")])


@scenario("fetch.log-append-time", area="fetch",
          title="message.timestamp.type=LogAppendTime: the broker's timestamp replaces CreateTime (CRC still valid)",
          clients=ALL)
def log_append_time(ctx):
    topic = ctx.topic(configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    ctx.setup_produce(topic, [b"a", b"b", b"c"], timestamps=[1_000_000_000_000] * 3, linger_ms=50)
    after = int(time.time() * 1000)
    got = ctx.client.fetch(topic, 0, 0, 3, timeout_s=ctx.timeout(15))
    ctx.expect_eq("count", len(got), 3)
    stamps = [r.timestamp_ms for r in got]
    ctx.check(all(s is not None and before - 5000 <= s <= after + 5000 for s in stamps),
              f"timestamps {stamps} are not the broker's append time (between {before} and {after}); "
              "the producer's CreateTime was 1000000000000")
    ctx.observe(timestamps_are_append_time=True)
    if ctx.case.client != KCAT:
        ctx.expect_eq("timestamp_type", sorted({r.timestamp_type for r in got}), ["log_append"])


@scenario("fetch.out-of-range", area="fetch",
          title="Fetching beyond the log end: OFFSET_OUT_OF_RANGE reaches the client",
          clients=[WIRE, KAFKA_PYTHON, CONFLUENT])
def out_of_range(ctx):
    topic = ctx.topic()
    ctx.setup_produce(topic, [b"x%d" % i for i in range(10)])
    if ctx.client is None:
        with ctx.wire() as conn:
            res = wire.fetch(conn, topic, 0, 1000, max_wait_ms=100)
            ctx.expect_eq("error", wire.error_name(res["error"]), wire.error_name(1))
            # Kafka answers no offsets with the error (ReplicaManager.createLogReadResult: -1)
            ctx.expect_eq("high_watermark_with_error", res["high_watermark"], -1)
            ctx.expect_eq("last_stable_offset_with_error", res["last_stable_offset"], -1)
            at_end = wire.fetch(conn, topic, 0, 10, max_wait_ms=100)
            ctx.expect_eq("fetch_at_log_end", (wire.error_name(at_end["error"]), len(at_end["records"])),
                          (wire.error_name(0), 0))
        return
    try:
        got = ctx.client.fetch(topic, 0, 1000, 1, timeout_s=ctx.timeout(8))
        ctx.expect_eq("error", f"no error ({len(got)} records)", "OFFSET_OUT_OF_RANGE")
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        ok = any(s in text for s in ("OffsetOutOfRange", "OFFSET_OUT_OF_RANGE", "AUTO_OFFSET_RESET",
                                     "NoOffsetForPartition", "out of range"))
        ctx.expect_eq("error", "OFFSET_OUT_OF_RANGE" if ok else text[:200], "OFFSET_OUT_OF_RANGE")


@scenario("fetch.long-poll", area="fetch",
          title="Fetch waits up to max_wait_ms on an empty partition and returns as soon as data arrives",
          clients=[WIRE])
def long_poll(ctx):
    topic = ctx.topic()
    with ctx.wire(timeout=30) as conn:
        t0 = time.monotonic()
        res = wire.fetch(conn, topic, 0, 0, max_wait_ms=1500, min_bytes=1)
        waited = time.monotonic() - t0
        ctx.check(res["error"] == 0 and not res["records"], f"empty fetch: {res}")
        ctx.check(1.2 <= waited <= 6.0, f"an empty fetch with max_wait_ms=1500 returned after {waited:.2f}s")
        ctx.observe(empty_fetch_waited="about max_wait_ms")
        ctx.detail(empty_fetch_seconds=round(waited, 2))

        timer = threading.Timer(0.7, lambda: ctx.setup_produce(topic, [b"wake-up"]))
        timer.start()
        t0 = time.monotonic()
        res = wire.fetch(conn, topic, 0, 0, max_wait_ms=10000, min_bytes=1)
        woke = time.monotonic() - t0
        timer.join()
        ctx.check(res["records"], f"a fetch waiting for data returned without records after {woke:.2f}s")
        ctx.check(woke < 5.0, f"a fetch with max_wait_ms=10000 returned {woke:.2f}s after start; data arrived at "
                              "0.7s, so it should return right after")
        ctx.observe(returned_when_data_arrived=True)
        ctx.detail(wake_seconds=round(woke, 2))

        t0 = time.monotonic()
        res = wire.fetch(conn, topic, 0, 0, max_wait_ms=1500, min_bytes=100_000)
        held = time.monotonic() - t0
        ctx.check(res["records"], "a fetch with min_bytes above the available data returned no records at all")
        ctx.check(1.2 <= held <= 6.0, f"a fetch with min_bytes=100000 (less available) and max_wait_ms=1500 "
                                      f"returned after {held:.2f}s; it must wait for max_wait_ms")
        ctx.observe(min_bytes_not_reached_waits="about max_wait_ms")
        ctx.detail(min_bytes_wait_seconds=round(held, 2))


@scenario("fetch.oversized-first-batch", area="fetch",
          title="A first batch larger than max_bytes is still returned whole (KIP-74), so consumers progress",
          clients=[WIRE])
def oversized_first_batch(ctx):
    topic = ctx.topic()
    with ctx.wire() as conn:
        res = wire.produce(conn, topic, 0, wire.record_batch([b"q" * 3000, b"r" * 3000]))
        ctx.check(res["error"] == 0, f"produce: {wire.error_name(res['error'])}")
        got = wire.fetch(conn, topic, 0, 0, max_wait_ms=100, max_bytes=100)
        batches = wire.batch_headers(got["records"])
        ctx.expect_eq("first_batch_returned", [(b.base_offset, b.record_count) for b in batches[:1]], [(0, 2)])


@scenario("fetch.read-committed-plain", area="fetch",
          title="read_committed on non-transactional data: everything visible, LSO = high watermark",
          clients=[WIRE, KAFKA_PYTHON, CONFLUENT, JAVA, KCAT])
def read_committed_plain(ctx):
    topic = ctx.topic()
    ctx.setup_produce(topic, [b"p%d" % i for i in range(20)])
    if ctx.client is None:
        with ctx.wire() as conn:
            res = wire.fetch(conn, topic, 0, 0, isolation=1, max_wait_ms=100)
            ctx.expect_eq("high_watermark", res["high_watermark"], 20)
            ctx.expect_eq("last_stable_offset", res["last_stable_offset"], 20)
            ctx.expect_eq("aborted_transactions", res["aborted"], [])
        return
    got = ctx.client.fetch(topic, 0, 0, 20, isolation="read_committed", timeout_s=ctx.timeout(15))
    ctx.expect_eq("offsets", [r.offset for r in got], list(range(20)))
