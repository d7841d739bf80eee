"""Reads from remote segments (KIP-405; Kafka ``RemoteLogManager.read`` / ``RemoteLogReader``):
whole batches of one remote segment starting with the one holding the fetch offset, at most
``max_bytes`` unless the first batch alone is larger (KIP-74) - the batch boundaries a local read
of the same segment gives. The segment's offset index (fetched once and cached) gives where to
start; the ``.log`` is then read in ranges. Also timestamp lookups and aborted transactions
from remote segments.
"""

from __future__ import annotations

import struct
import uuid
from collections import OrderedDict

from kcompat.log.txn_index import AbortedTxn, parse_txn_index
from kcompat.protocol.records import HEADER_SIZE, iter_records, parse_header
from kcompat.tiered.metadata import RemoteSegment
from kcompat.tiered.storage import IndexType, RemoteResourceNotFoundError, RemoteStorageManager

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
MIN_CHUNK = 64 * 1024
INDEX_CACHE_ENTRIES = 256


def _floor_entry(index: bytes, entry: struct.Struct, key_field: int, target: int):
    """The last entry whose field ``key_field`` is <= ``target`` (entries ascend), else None."""
    lo, hi = 0, len(index) // entry.size
    found = None
    while lo < hi:
        mid = (lo + hi) // 2
        e = entry.unpack_from(index, mid * entry.size)
        if e[key_field] <= target:
            found, lo = e, mid + 1
        else:
            hi = mid
    return found


class RemoteLogReader:
    """Reads remote segments through ``storage``, caching fetched index objects (LRU of
    :data:`INDEX_CACHE_ENTRIES`). Every method raises ``RemoteStorageError`` when the store
    fails."""

    def __init__(self, storage: RemoteStorageManager) -> None:
        self.storage = storage
        self._indexes: OrderedDict[tuple[uuid.UUID, IndexType], bytes] = OrderedDict()

    async def index(self, seg: RemoteSegment, kind: IndexType) -> bytes:
        """The segment's index object of ``kind`` (a missing transaction index is empty)."""
        key = (seg.key.segment_id, kind)
        data = self._indexes.get(key)
        if data is None:
            try:
                data = await self.storage.fetch_index(seg.key, kind)
            except RemoteResourceNotFoundError:
                if kind != IndexType.TRANSACTION:
                    raise
                data = b""
            self._indexes[key] = data
            while len(self._indexes) > INDEX_CACHE_ENTRIES:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(key)
        return data

    async def read(self, seg: RemoteSegment, offset: int, max_bytes: int, *, min_one_batch: bool = True) -> bytes:
        """Whole batches of ``seg`` from the one containing ``offset`` (or the first after it),
        at most ``max_bytes`` bytes unless ``min_one_batch`` and the first is larger; ``b""``
        if the segment has nothing at or after ``offset``."""
        base = seg.start_offset
        entry = _floor_entry(await self.index(seg, IndexType.OFFSET), _OFFSET_ENTRY, 0, offset - base)
        pos = entry[1] if entry is not None else 0
        chunk = max(MIN_CHUNK, max_bytes + HEADER_SIZE)
        data = bytearray()
        eof = False

        async def more(n: int) -> None:
            nonlocal eof
            start = pos + len(data)
            end = min(start + n, seg.size)   # never past the object's end (S3 answers 416 there)
            got = await self.storage.fetch_log_segment(seg.key, start, end) if end > start else b""
            data.extend(got)
            eof = len(got) < n

        off, start = 0, None
        while True:
            if len(data) - off < HEADER_SIZE:
                if eof:
                    break
                await more(chunk)
                continue
            h = parse_header(data, off)
            if start is None and h.last_offset < offset:      # before the fetch offset: skip it
                if off + h.size > len(data):
                    pos += off + h.size
                    del data[:]
                    off = 0
                    eof = False
                else:
                    off += h.size
                continue
            if start is None:
                start = off
            if off + h.size - start > max_bytes and not (off == start and min_one_batch):
                break
            if off + h.size > len(data):
                if eof:
                    break
                await more(max(chunk, off + h.size - len(data)))
                continue
            off += h.size
        return bytes(data[start:off]) if start is not None else b""

    async def offset_for_timestamp(self, seg: RemoteSegment, timestamp_ms: int, starting_offset: int
                                   ) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record of ``seg`` at or after
        ``starting_offset`` with a timestamp >= ``timestamp_ms``, None if none (ListOffsets
        by timestamp over a remote segment: its time index, then a scan of its batches)."""
        tindex = await self.index(seg, IndexType.TIMESTAMP)
        below = _floor_entry(tindex, _TIME_ENTRY, 0, timestamp_ms - 1)
        from_offset = max(starting_offset, seg.start_offset + below[1] if below is not None else seg.start_offset)
        offset = from_offset
        while offset <= seg.end_offset:
            data = await self.read(seg, offset, 1 << 20)
            if not data:
                return None
            pos = 0
            while pos + HEADER_SIZE <= len(data):
                h = parse_header(data, pos)
                if h.max_timestamp >= timestamp_ms and h.last_offset >= from_offset:
                    for r in iter_records(data[pos:pos + h.size]):
                        if r.offset >= from_offset and r.timestamp >= timestamp_ms:
                            return r.offset, r.timestamp
                pos += h.size
                offset = h.last_offset + 1
        return None

    async def aborted_transactions(self, seg: RemoteSegment, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions of ``seg``'s transaction index overlapping ``[fetch_offset,
        upper_bound)``."""
        return [e for e in parse_txn_index(await self.index(seg, IndexType.TRANSACTION))
                if e.last_offset >= fetch_offset and e.first_offset < upper_bound]
