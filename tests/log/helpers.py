"""Helpers for log tests: build batches at the log end and append them."""

from __future__ import annotations

from kcompat.log import Log
from kcompat.protocol.records import build_batch, iter_batches, iter_records

NOW = 1_700_000_000_000


def make_batch(base_offset: int, n: int = 1, *, ts: int = NOW, value_size: int = 10,
               ts_step: int = 0, timestamps=None, codec: int = 0) -> bytes:
    stamps = list(timestamps) if timestamps is not None else [ts + i * ts_step for i in range(n)]
    recs = [(t, b"k%d" % (base_offset + i), bytes([65 + (base_offset + i) % 26]) * value_size, ())
            for i, t in enumerate(stamps)]
    return build_batch(recs, base_offset=base_offset, codec=codec)


def append(log: Log, n: int = 1, *, ts: int = NOW, value_size: int = 10, ts_step: int = 0,
           timestamps=None, now_ms: int | None = None, codec: int = 0) -> bytes:
    """Append one batch of ``n`` records at the log end; returns its bytes."""
    stamps = list(timestamps) if timestamps is not None else [ts + i * ts_step for i in range(n)]
    base = log.log_end_offset
    batch = make_batch(base, len(stamps), timestamps=stamps, value_size=value_size, codec=codec)
    max_ts = max(stamps)
    log.append(batch, last_offset=base + len(stamps) - 1, max_timestamp=max_ts,
               offset_of_max_timestamp=base + stamps.index(max_ts),
               now_ms=now_ms if now_ms is not None else max_ts)
    return batch


def headers(data: bytes):
    """Batch headers of a read result; asserts it is whole batches only."""
    hs = [h for _pos, h in iter_batches(data)]
    assert sum(h.size for h in hs) == len(data), "read returned a partial batch"
    return hs


def offsets(data: bytes) -> list[int]:
    out = []
    for pos, h in iter_batches(data):
        out += [r.offset for r in iter_records(data[pos:pos + h.size])]
    return out
