"""Helpers for the log cleaner tests: keyed appends, reading a log like a consumer, checks."""

from __future__ import annotations

import random
from pathlib import Path

from kafka.record.memory_records import MemoryRecords

from kcompat.log import Log, LogCleaner, LogConfig
from kcompat.protocol.records import build_batch, iter_batches, iter_records, parse_header

NOW = 1_700_000_000_000
TP = ("t", 0)


def compact_config(**kw) -> LogConfig:
    base = dict(segment_bytes=4000, index_interval_bytes=300, cleanup_policy="compact",
                min_cleanable_dirty_ratio=0.0, delete_retention_ms=1000)
    base.update(kw)
    return LogConfig(**base)


def open_log(path: Path, config: LogConfig | None = None, *, clean: bool = True,
             now_ms: int = NOW) -> Log:
    return Log.open(path, config or compact_config(), clean_shutdown=clean, now_ms=now_ms)


def value_of(offset: int, size: int = 20) -> bytes:
    return (b"v%d-" % offset).ljust(size, b"x")


def append_records(log: Log, records, *, codec: int = 0, producer_id: int = -1,
                   producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
                   ts: int | None = None, now_ms: int | None = None) -> tuple[int, int]:
    """Append one batch of ``(key, value)`` or ``(key, value, headers)`` records (value
    ``...`` means the default value for the offset); returns (base, last offset)."""
    base = log.log_end_offset
    t0 = NOW if ts is None else ts
    recs = []
    for i, r in enumerate(records):
        key, value = r[0], r[1]
        hdrs = r[2] if len(r) > 2 else ()
        if value is ...:
            value = value_of(base + i)
        recs.append((t0 + base + i, key, value, hdrs))
    batch = build_batch(recs, base_offset=base, codec=codec, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=base_sequence,
                        transactional=transactional)
    last = base + len(recs) - 1
    log.append(batch, last_offset=last, max_timestamp=t0 + last, offset_of_max_timestamp=last,
               now_ms=t0 if now_ms is None else now_ms)
    return base, last


def append_random(log: Log, n_batches: int, *, keys: int = 30, per_batch: int = 5, seed: int = 1,
                  codecs=(0,), tombstone_rate: float = 0.0, expected: dict | None = None) -> dict:
    """Random updates; returns (and updates) ``{key: (offset, value)}`` of the latest per key."""
    rnd = random.Random(seed)
    expected = {} if expected is None else expected
    for _ in range(n_batches):
        recs = []
        for _ in range(per_batch):
            key = b"k%03d" % rnd.randrange(keys)
            tomb = rnd.random() < tombstone_rate
            recs.append((key, None if tomb else ..., ((("h", key),) if rnd.random() < 0.3 else ())))
        base, _ = append_records(log, recs, codec=rnd.choice(codecs))
        for i, (key, value, _h) in enumerate(recs):
            expected[key] = (base + i, None if value is None else value_of(base + i))
    return expected


def read_all(log: Log, *, max_bytes: int = 1 << 20):
    """What a consumer reading from the log start gets: (records, batch headers); asserts that
    offsets strictly increase and the data is whole batches."""
    records, hdrs = [], []
    off = log.log_start_offset
    last = -1
    while off < log.log_end_offset:
        data = log.read(off, max_bytes)
        if not data:
            break
        for pos, h in iter_batches(data):
            hdrs.append(h)
            for r in iter_records(data[pos:pos + h.size]):
                if r.offset < off:
                    continue
                assert r.offset > last, f"offset {r.offset} after {last}"
                last = r.offset
                records.append(r)
            off = h.next_offset
    return records, hdrs


def latest(log: Log) -> dict:
    """``{key: (offset, value)}`` a consumer ends up with."""
    out = {}
    for r in read_all(log)[0]:
        out[r.key] = (r.offset, r.value)
    return out


def check_kafka_python(log: Log) -> int:
    """Every stored batch passes kafka-python's CRC check and decodes there; returns records."""
    n = 0
    for seg in log.segments:
        data = seg.read(0, seg.size)
        mr = MemoryRecords(data)
        while mr.has_next():
            b = mr.next_batch()
            assert b.validate_crc(), "kafka-python rejects the CRC"
            for _rec in b:
                n += 1
    return n


def segment_bytes(log: Log) -> bytes:
    return b"".join(seg.read(0, seg.size) for seg in log.segments)


def clean(log: Log, now_ms: int = NOW, cleaner: LogCleaner | None = None, **kw):
    """One synchronous cleaning of ``log`` (asserts it ran and installed)."""
    c = cleaner or LogCleaner()
    out = c.clean_now({TP: log}, now_ms, **kw)
    assert out is not None, "nothing to clean"
    assert out.installed, out.error
    return out


def headers_of(data: bytes):
    return [parse_header(data, pos) for pos, _h in iter_batches(data)]
