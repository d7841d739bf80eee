"""Helpers for the real-client end-to-end tests: record generators, produce/consume wrappers for
kafka-python and confluent-kafka that return what was acknowledged and what was read, and
assertions that compare them field by field (key, value, headers, timestamp, offset, partition).

Everything here talks to a real broker process through the clients' public APIs; every loop has
a deadline.
"""

from __future__ import annotations

import random
import re
import time
import uuid
from dataclasses import dataclass, replace

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]

# Kafka timestamp types as on the wire (batch attribute bit 3)
CREATE_TIME = 0
LOG_APPEND_TIME = 1

_CK_TS_TYPE = {ck.TIMESTAMP_CREATE_TIME: CREATE_TIME, ck.TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME}


def topic_name(request, suffix: str = "") -> str:
    """A topic name unique to the test (its name, sanitized, plus a uuid)."""
    base = re.sub(r"[^a-zA-Z0-9._-]", "_", request.node.name)[:120]
    return f"{base}{'-' + suffix if suffix else ''}-{uuid.uuid4().hex[:8]}"


def now_ms() -> int:
    return int(time.time() * 1000)


# -- records -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    """A record to produce. ``timestamp`` None lets the client stamp it (CreateTime = now)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None


@dataclass(frozen=True)
class Sent:
    """A record as acknowledged: where it went and what it carries. ``offset`` is None when the
    client could not know it (acks=0)."""

    topic: str
    partition: int
    offset: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    timestamp_type: int = CREATE_TIME


@dataclass(frozen=True)
class Got:
    """A consumed record, normalized across clients."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    timestamp_type: int


_HEADER_SHAPES = [
    (),
    (("trace-id", b"0123456789abcdef"),),
    (("dup", b"first"), ("dup", b"second"), ("empty", b"")),
    (("ключ-ü", b"\x00\xff\x7f binary"), ("n", b"1")),
]


def make_records(n: int, tag: str, *, seed: int = 0, timestamps: list[int] | None = None,
                 big_every: int = 17) -> list[Rec]:
    """``n`` deterministic records mixing: keyed, unkeyed and empty keys, null values (tombstones) with keys,
    empty values, random (incompressible) and repetitive (compressible) values of varied sizes,
    zero / one / repeated / binary headers. ``timestamps`` gives explicit CreateTimes."""
    rnd = random.Random(f"{tag}-{seed}")
    out = []
    for i in range(n):
        key = f"key-{tag}-{i}".encode() if i % 3 != 1 else None
        if i % 17 == 9:
            key = b""  # empty, not null
        if key is not None and i % 11 == 5:
            value = None
        elif i % 13 == 7:
            value = b""
        elif big_every and i % big_every == 3:
            value = (f"{tag}-{i}-".encode() * 400)[: 3000 + rnd.randrange(3000)]
        elif i % 2:
            value = rnd.randbytes(rnd.randrange(1, 300))
        else:
            value = f"value {i} of {tag} ".encode() * rnd.randrange(1, 20)
        headers = _HEADER_SHAPES[i % len(_HEADER_SHAPES)]
        if i % 5 == 0:
            headers = headers + (("seq", str(i).encode()),)
        out.append(Rec(key, value, headers, None if timestamps is None else timestamps[i]))
    return out


def with_offsets(sent: list[Sent], first: int) -> list[Sent]:
    """Fill in consecutive offsets from ``first`` for records whose offset the client could not
    report (acks=0: one producer writing one partition in order)."""
    return [replace(s, offset=first + i) for i, s in enumerate(sent)]


# -- kafka-python -----------------------------------------------------------------------------------


def kp_admin(bootstrap: str, **config) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, **config)


def kp_produce(bootstrap: str, topic: str, recs: list[Rec], partition: int | None = None,
               producer: KafkaProducer | None = None, timeout: float = 30.0, **config) -> list[Sent]:
    """Send every record (in order) and wait for each future; returns what was acknowledged.
    With acks=0 the offsets are unknown (None)."""
    own = producer is None
    p = producer or KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        futures = [p.send(topic, key=r.key, value=r.value, headers=list(r.headers), partition=partition,
                          timestamp_ms=r.timestamp) for r in recs]
        p.flush(timeout=timeout)
        out = []
        for r, f in zip(recs, futures):
            md = f.get(timeout=timeout)
            out.append(Sent(md.topic, md.partition, md.offset if md.offset >= 0 else None, r.key, r.value,
                            tuple(r.headers), md.timestamp))
        return out
    finally:
        if own:
            p.close(timeout=10)


def kp_got(m) -> Got:
    return Got(m.topic, m.partition, m.offset, m.key, m.value, tuple(m.headers or ()), m.timestamp,
               m.timestamp_type)


def kp_consume(bootstrap: str, topic: str, partition: int = 0, start: int | None = None, *,
               end: int | None = None, timeout: float = 20.0, consumer: KafkaConsumer | None = None,
               **config) -> list[Got]:
    """Read ``topic``-``partition`` from ``start`` (None: from the beginning, via
    seek_to_beginning) up to ``end`` (None: the end offset when called) with an assigned,
    group-less KafkaConsumer."""
    own = consumer is None
    c = consumer or KafkaConsumer(bootstrap_servers=bootstrap, **config)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        if end is None:
            end = c.end_offsets([tp])[tp]
        if start is None:
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, start)
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while c.position(tp) < end:
            if time.monotonic() > deadline:
                raise AssertionError(f"kafka-python: timed out reading {tp} at position {c.position(tp)} "
                                     f"(end {end}), got {len(out)} records")
            for recs in c.poll(timeout_ms=500).values():
                out.extend(kp_got(m) for m in recs if m.offset < end)
        return out
    finally:
        if own:
            c.close()


# -- confluent-kafka --------------------------------------------------------------------------------


def ck_admin(bootstrap: str, **config) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **config})


def ck_producer(bootstrap: str, **config) -> ck.Producer:
    return ck.Producer({"bootstrap.servers": bootstrap, **config})


def ck_produce(bootstrap: str, topic: str, recs: list[Rec], partition: int | None = None,
               producer: ck.Producer | None = None, timeout: float = 30.0, **config) -> list[Sent]:
    """Produce every record and wait for the delivery reports; raises if any failed. Offsets
    come from the delivery reports (None with acks=0)."""
    own = producer is None
    p = producer or ck_producer(bootstrap, **config)
    try:
        return _ck_produce(p, topic, recs, partition, timeout)
    finally:
        if own:
            close_ck_producer(p)


def close_ck_producer(p: ck.Producer) -> None:
    """Drop anything undelivered (so close() cannot block on a dead broker), then close."""
    p.purge()
    p.flush(0)
    p.close()


def _ck_produce(p: ck.Producer, topic: str, recs: list[Rec], partition: int | None, timeout: float) -> list[Sent]:
    reports: dict[int, tuple] = {}

    def make_cb(i):
        def cb(err, msg):
            reports[i] = (err, msg.partition(), msg.offset(), msg.timestamp())
        return cb

    for i, r in enumerate(recs):
        kwargs = {}
        if partition is not None:
            kwargs["partition"] = partition
        if r.timestamp is not None:
            kwargs["timestamp"] = r.timestamp
        while True:
            try:
                p.produce(topic, key=r.key, value=r.value, headers=list(r.headers) or None, on_delivery=make_cb(i),
                          **kwargs)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    remaining = p.flush(timeout)
    assert remaining == 0, f"confluent producer: {remaining} messages not delivered within {timeout}s"
    out = []
    for i, r in enumerate(recs):
        err, part, off, (ts_type, ts) = reports[i]
        assert err is None, f"delivery of record {i} failed: {err}"
        out.append(Sent(topic, part, off if off is not None and off >= 0 else None, r.key, r.value,
                        tuple(r.headers), ts, _CK_TS_TYPE.get(ts_type, -1)))
    return out


def ck_consumer(bootstrap: str, **config) -> ck.Consumer:
    # group.id is required by the configuration, but assign() never contacts a group coordinator.
    conf = {"bootstrap.servers": bootstrap, "group.id": f"kcompat-tests-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False}
    conf.update(config)
    return ck.Consumer(conf)


def ck_got(m) -> Got:
    ts_type, ts = m.timestamp()
    return Got(m.topic(), m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), ts,
               _CK_TS_TYPE.get(ts_type, -1))


def ck_consume(bootstrap: str, topic: str, partition: int = 0, start: int | None = None, *,
               end: int | None = None, timeout: float = 20.0, consumer: ck.Consumer | None = None,
               **config) -> list[Got]:
    """Read ``topic``-``partition`` from ``start`` (None: OFFSET_BEGINNING) up to ``end`` (None:
    the high watermark when called) with an assigned confluent Consumer (default isolation level:
    read_committed)."""
    own = consumer is None
    c = consumer or ck_consumer(bootstrap, **config)
    try:
        tp = ck.TopicPartition(topic, partition)
        # also warms up the connection and metadata (otherwise the first fetch starts ~0.5 s later)
        high = c.get_watermark_offsets(tp, timeout=10)[1]
        if end is None:
            end = high
        c.assign([ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING if start is None else start)])
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        last = (start if start is not None else 0) - 1
        while last < end - 1:
            if time.monotonic() > deadline:
                raise AssertionError(f"confluent: timed out reading {topic}-{partition} after offset {last} "
                                     f"(end {end}), got {len(out)} records")
            for m in c.consume(num_messages=max(1, min(500, end - 1 - last)), timeout=0.5):
                err = m.error()
                if err is not None:
                    if m.topic() == topic and m.partition() == partition:
                        raise AssertionError(f"confluent consumer error on {topic}-{partition}: {err}")
                    continue  # e.g. errors of the (unused) group coordinator lookup
                last = m.offset()
                if m.offset() < end:
                    out.append(ck_got(m))
        return out
    finally:
        if own:
            c.close()


# -- assertions --------------------------------------------------------------------------------------


def _describe(x) -> str:
    return (f"p{x.partition}@{x.offset} key={x.key!r:.60} value={x.value!r:.60} headers={x.headers!r:.120} "
            f"ts={x.timestamp} type={x.timestamp_type}")


def assert_same_records(sent: list[Sent], got: list[Got], *, check_timestamp_type: bool = True) -> None:
    """``got`` holds exactly ``sent``, in order, with every key, value, header, timestamp,
    timestamp type, offset, partition and topic equal."""
    problems = []
    if len(sent) != len(got):
        problems.append(f"produced {len(sent)} records, consumed {len(got)}")
    for i, (s, g) in enumerate(zip(sent, got)):
        fields = ["topic", "partition", "offset", "key", "value", "headers", "timestamp"]
        if check_timestamp_type:
            fields.append("timestamp_type")
        diff = [f for f in fields if getattr(s, f) != getattr(g, f)]
        if diff:
            problems.append(f"record {i}: {diff} differ:\n   sent {_describe(s)}\n    got {_describe(g)}")
        if len(problems) > 10:
            break
    assert not problems, "records differ:\n" + "\n".join(problems)


def assert_same_reads(a: list[Got], b: list[Got]) -> None:
    """Two reads of the same data (e.g. by two clients, or before and after a restart) agree."""
    assert len(a) == len(b), f"{len(a)} records vs {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        assert x == y, f"record {i} differs:\n {_describe(x)}\n {_describe(y)}"


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
