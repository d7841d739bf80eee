"""The cleaner's offset map (Kafka ``SkimpyOffsetMap``) and the segment reading it is built from.

:class:`OffsetMap` maps every key of a log's dirty section to its latest offset within a memory
budget (``log.cleaner.dedupe.buffer.size``); :func:`iter_batches` reads a segment file's batches
in large preads and :func:`batch_body` gives a batch's (decompressed) records. Used by
:mod:`kcompat.log.compaction` in the cleaner's worker processes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from kcompat.log.fileio import pread_full
from kcompat.protocol import compression
from kcompat.protocol.records import HEADER_SIZE, BatchHeader, CorruptRecordError, parse_header

READ_CHUNK = 8 << 20          # bytes read per pread while scanning a segment
MAP_ENTRY_OVERHEAD = 96       # approximate bytes a dict entry costs beyond its key's length


def uvarint_rest(buf, p: int, first: int) -> tuple[int, int]:
    """Continue an unsigned varint whose first byte ``first`` (>= 0x80) was read before ``p``."""
    v = first & 0x7F
    shift = 7
    while True:
        b = buf[p]
        p += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, p
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")



def iter_batches(path: Path, size: int) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """``(position, header, batch bytes)`` of every batch of a segment file, read in
    ``READ_CHUNK`` preads. CorruptRecordError if the framing is broken."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        buf = memoryview(b"")
        buf_pos = pos = 0
        while pos < size:
            rel = pos - buf_pos
            if rel + HEADER_SIZE > len(buf):
                buf = memoryview(pread_full(fd, min(READ_CHUNK, size - pos), pos))
                buf_pos, rel = pos, 0
            h = parse_header(buf, rel)
            if pos + h.size > size:
                raise CorruptRecordError(f"{path}: batch at {pos} runs past the segment end {size}")
            if rel + h.size > len(buf):
                buf = memoryview(pread_full(fd, max(READ_CHUNK, h.size), pos))
                buf_pos, rel = pos, 0
                if len(buf) < h.size:
                    raise CorruptRecordError(f"{path}: batch at {pos} is truncated")
            yield pos, h, buf[rel:rel + h.size]
            pos += h.size
    finally:
        os.close(fd)


def batch_body(h: BatchHeader, batch: memoryview) -> bytes:
    """The records section of one batch (``batch``: the whole batch, header included),
    decompressed per its codec. CorruptRecordError if it does not decompress."""
    body = batch[HEADER_SIZE:]
    if h.compression != compression.NONE:
        try:
            return compression.decompress(h.compression, body)
        except compression.CompressionError as e:
            raise CorruptRecordError(f"batch at offset {h.base_offset}: {e}") from e
    return bytes(body)


class OffsetMap:
    """key -> latest offset over the dirty section (Kafka ``SkimpyOffsetMap``, with exact keys
    instead of MD5 hashes). ``latest_offset`` is the last offset covered; ``full`` says the memory
    budget stopped the scan early. Also collects the offsets of keyless records (kept), the base
    offsets of batches holding a tombstone, and - when asked - each producer id's last batch."""

    def __init__(self, budget_bytes: int) -> None:
        self.map: dict[bytes, int] = {}
        self.keyless: list[int] = []
        self.tombstone_batches: set[int] = set()
        self.producer_last: dict[int, int] = {}
        self.latest_offset = -1
        self.budget = budget_bytes
        self.used = 0
        self.full = False
        self.records = 0

    def add_batch(self, h: BatchHeader, batch: memoryview, start: int) -> bool:
        """Map the records of ``batch`` at offsets >= ``start``; False (and ``full``) if the
        budget ran out in the middle (``latest_offset`` then stays before this batch)."""
        body = batch_body(h, batch)
        omap = self.map
        base = h.base_offset
        keyless = self.keyless
        budget, used = self.budget, self.used
        tomb = False
        pos = 0
        try:
            for _ in range(h.records_count):
                b = body[pos]
                pos += 1
                if b & 0x80:
                    ln, pos = uvarint_rest(body, pos, b)
                else:
                    ln = b
                ln = (ln >> 1) ^ -(ln & 1)
                end = pos + ln
                p = pos + 1                       # record attributes
                while body[p] & 0x80:             # timestamp delta, skipped
                    p += 1
                p += 1
                b = body[p]
                p += 1
                if b & 0x80:
                    od, p = uvarint_rest(body, p, b)
                else:
                    od = b
                offset = base + ((od >> 1) ^ -(od & 1))
                b = body[p]
                p += 1
                if b & 0x80:
                    kl, p = uvarint_rest(body, p, b)
                else:
                    kl = b
                kl = (kl >> 1) ^ -(kl & 1)
                if ln < 0 or end > len(body) or p + kl > end:
                    raise CorruptRecordError(f"record of batch {base} out of range")
                pos = end
                if offset < start:
                    continue
                if kl < 0:
                    keyless.append(offset)
                    continue
                key = body[p:p + kl]
                if key not in omap:
                    used += kl + MAP_ENTRY_OVERHEAD
                    if used > budget:
                        self.full = True
                        self.used = used
                        return False
                omap[key] = offset
                if body[p + kl] == 1:             # value length -1 (zigzag 1): a tombstone
                    tomb = True
        except IndexError:
            raise CorruptRecordError(f"truncated record in batch at offset {base}") from None
        if pos != len(body):
            raise CorruptRecordError(f"batch at offset {base}: record count does not match its bytes")
        self.used = used
        self.records += h.records_count
        if tomb:
            self.tombstone_batches.add(base)
        return True
