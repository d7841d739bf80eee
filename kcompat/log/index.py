"""Sparse segment indexes: Kafka's ``OffsetIndex`` (``.index``) and ``TimeIndex`` (``.timeindex``).

File formats (big-endian, as Kafka, so ``kafka-dump-log`` reads them):

- ``.index``: 8-byte entries ``int32 offset - baseOffset, int32 position in .log``; the position is
  the start of the batch whose *last* offset is the entry's offset.
- ``.timeindex``: 12-byte entries ``int64 timestamp, int32 offset - baseOffset``; timestamps
  strictly increase (``TimeIndex.maybeAppend``).

Unlike Kafka we do not preallocate: entries are appended with plain writes, so the file size is
always the number of valid entries times the entry size. An index is held in one of three states:

- not loaded (old segments after start-up: nothing read until the first lookup);
- read-only (loaded on first lookup, memory-mapped, sanity-checked);
- appendable (the active segment: a ``bytearray`` mirror plus a write fd).

Lookups are binary searches with ``struct.unpack_from`` over the buffer.
"""

from __future__ import annotations

import mmap
import operator
import os
import struct
import sys
from array import array
from pathlib import Path

from kcompat.log.config import LogConfig
from kcompat.log.fileio import close_abandoned, fsync_path, open_ro, open_rw, pread_full, pwrite_all

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class CorruptIndexError(Exception):
    """An index file that fails its sanity check (or is missing); the segment rebuilds it."""


class _Index:
    ENTRY_SIZE = 0
    _ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, file_size: int | None = None) -> None:
        self.path = path
        self.base_offset = base_offset
        self._buf: bytearray | mmap.mmap | bytes | None = None
        self._wfd: int | None = None
        self._file_size = file_size   # size seen at start-up, while not loaded

    def __del__(self) -> None:
        # an index dropped without close() (its segment abandoned) gives its write fd back; a
        # read-only mmap closes itself when collected
        close_abandoned(getattr(self, "_wfd", None))
        self._wfd = None

    # -- state ---------------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        """True when the entries are in memory (mmap or bytearray)."""
        return self._buf is not None

    @property
    def appendable(self) -> bool:
        """True for the active segment's index (write fd open)."""
        return self._wfd is not None

    @property
    def entries(self) -> int:
        """Number of entries (stats the file if the index is not loaded)."""
        if self._buf is not None:
            return len(self._buf) // self.ENTRY_SIZE
        return self._size_on_disk() // self.ENTRY_SIZE

    def _size_on_disk(self) -> int:
        if self._file_size is None:
            try:
                self._file_size = os.stat(self.path).st_size
            except FileNotFoundError:
                self._file_size = 0
        return self._file_size

    def is_full(self, max_index_size: int) -> bool:
        """Kafka's ``AbstractIndex.isFull``: entries >= maxIndexSize / entrySize."""
        return self.entries >= max_index_size // self.ENTRY_SIZE

    def load(self, segment_size: int) -> None:
        """Load read-only (mmap) and sanity-check; raises CorruptIndexError. No-op if loaded."""
        if self._buf is not None:
            return
        try:
            fd = open_ro(self.path)
        except FileNotFoundError:
            raise CorruptIndexError(f"{self.path.name} is missing") from None
        try:
            size = os.fstat(fd).st_size
            buf: mmap.mmap | bytes = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
        finally:
            os.close(fd)
        problem = self._check(buf, segment_size)
        if problem:
            if isinstance(buf, mmap.mmap):
                buf.close()
            raise CorruptIndexError(f"{self.path.name}: {problem}")
        self._buf = buf

    def open_for_append(self, segment_size: int) -> None:
        """Make appendable (active segment): load into a bytearray, sanity-check, open a write fd.
        Raises CorruptIndexError (the caller rebuilds the index)."""
        if self._wfd is not None:
            return
        if self._buf is None:
            try:
                fd = open_ro(self.path)
            except FileNotFoundError:
                raise CorruptIndexError(f"{self.path.name} is missing") from None
            try:
                raw = pread_full(fd, os.fstat(fd).st_size, 0)
            finally:
                os.close(fd)
            problem = self._check(raw, segment_size)
            if problem:
                raise CorruptIndexError(f"{self.path.name}: {problem}")
            self._buf = bytearray(raw)
        elif not isinstance(self._buf, bytearray):
            old = self._buf
            self._buf = bytearray(old)
            if isinstance(old, mmap.mmap):
                old.close()
        self._wfd = open_rw(self.path)
        os.ftruncate(self._wfd, len(self._buf))

    def replace(self, raw: bytes | bytearray) -> None:
        """Rewrite the file with ``raw`` entries (after a rebuild); stays/becomes loaded."""
        self._drop_buffer()
        fd = self._wfd if self._wfd is not None else open_rw(self.path, truncate=True)
        try:
            os.ftruncate(fd, 0)
            pwrite_all(fd, raw, 0)
        finally:
            if fd != self._wfd:
                os.close(fd)
        self._buf = bytearray(raw)
        self._file_size = len(raw)

    def close_for_append(self) -> None:
        """Back to not-loaded (segment became inactive): frees the in-memory copy."""
        if self._wfd is not None:
            os.close(self._wfd)
            self._wfd = None
        self._file_size = len(self._buf) if self._buf is not None else None
        self._drop_buffer()

    def release(self) -> None:
        """Drop the read-only mapping (LRU eviction); the next lookup loads it again."""
        if self._wfd is None:
            self._drop_buffer()

    def _drop_buffer(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()
        self._buf = None

    def close(self) -> None:
        """Close the write fd and drop the in-memory entries."""
        self.close_for_append()

    def fsync(self) -> None:
        """fsync the index file (through the write fd, or by path when inactive)."""
        if self._wfd is not None:
            os.fsync(self._wfd)
        else:
            fsync_path(self.path)

    def delete(self) -> None:
        """Close and unlink the index file (missing is fine)."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    # -- entries ------------------------------------------------------------------------------
    def _append_raw(self, entry: bytes) -> None:
        assert self._wfd is not None and isinstance(self._buf, bytearray)
        try:
            pwrite_all(self._wfd, entry, len(self._buf))
        except OSError:
            try:   # a partial entry would fail the sanity check at the next load
                os.ftruncate(self._wfd, len(self._buf))
            except OSError:
                pass
            raise
        self._buf += entry

    def truncate_entries(self, n: int) -> None:
        """Keep only the first ``n`` entries (appendable index; undoing appends whose data write
        failed)."""
        if n < self.entries:
            self._truncate_entries(n)

    def _truncate_entries(self, n: int) -> None:
        assert self._wfd is not None and isinstance(self._buf, bytearray)
        del self._buf[n * self.ENTRY_SIZE:]
        os.ftruncate(self._wfd, len(self._buf))

    def reset(self) -> None:
        """Remove every entry (appendable index)."""
        self._truncate_entries(0)

    def _key(self, slot: int, field_off: int, unpack) -> int:
        return unpack(self._buf, slot * self.ENTRY_SIZE + field_off)[0]

    def _largest_le(self, target: int, field_off: int, unpack) -> int:
        """Slot of the last entry whose field is <= target, -1 if none (fields non-decreasing)."""
        n = len(self._buf) // self.ENTRY_SIZE  # type: ignore[arg-type]
        if n == 0 or self._key(0, field_off, unpack) > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._key(mid, field_off, unpack) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _entry(self, slot: int) -> tuple:
        return self._ENTRY.unpack_from(self._buf, slot * self.ENTRY_SIZE)  # type: ignore[arg-type]

    def _last_raw(self) -> tuple | None:
        """Last entry, from memory, or with one pread of the file's tail if not loaded."""
        if self._buf is not None:
            n = len(self._buf) // self.ENTRY_SIZE
            return self._entry(n - 1) if n else None
        size = self._size_on_disk()
        if size < self.ENTRY_SIZE:
            return None
        try:
            fd = open_ro(self.path)
        except FileNotFoundError:
            return None
        try:
            raw = pread_full(fd, self.ENTRY_SIZE, size - size % self.ENTRY_SIZE - self.ENTRY_SIZE)
        finally:
            os.close(fd)
        return self._ENTRY.unpack(raw) if len(raw) == self.ENTRY_SIZE else None

    def _check(self, buf, segment_size: int | None) -> str | None:
        raise NotImplementedError


def _int32_columns(buf) -> tuple[array, array]:
    a = array("i")
    a.frombytes(bytes(buf))
    if sys.byteorder == "little":
        a.byteswap()
    return a[0::2], a[1::2]


class OffsetIndex(_Index):
    """``<base>.index``: relative offset -> file position (Kafka ``OffsetIndex``)."""

    ENTRY_SIZE = 8
    _ENTRY = struct.Struct(">ii")

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry with offset <= ``offset``, or
        ``(base_offset, 0)`` if none (Kafka ``OffsetIndex.lookup``). Index must be loaded."""
        slot = self._largest_le(offset - self.base_offset, 0, _I32.unpack_from)
        if slot < 0:
            return self.base_offset, 0
        rel, pos = self._entry(slot)
        return self.base_offset + rel, pos

    def lookup_by_position(self, position: int) -> tuple[int, int] | None:
        """``(offset, position)`` of the last entry with position <= ``position``, or None."""
        slot = self._largest_le(position, 4, _I32.unpack_from)
        if slot < 0:
            return None
        rel, pos = self._entry(slot)
        return self.base_offset + rel, pos

    def last_entry(self) -> tuple[int, int] | None:
        """``(offset, position)`` of the last entry; one pread when not loaded."""
        e = self._last_raw()
        return None if e is None else (self.base_offset + e[0], e[1])

    def append(self, offset: int, position: int) -> None:
        """Append ``(offset, position)``; ignored unless offset grows (appendable index)."""
        rel = offset - self.base_offset
        buf = self._buf
        if buf and self._key(len(buf) // 8 - 1, 0, _I32.unpack_from) >= rel:  # type: ignore[arg-type]
            return
        self._append_raw(self._ENTRY.pack(rel, position))

    def truncate_to_position(self, position: int) -> None:
        """Remove the entries pointing at ``position`` or later (appendable index)."""
        self._truncate_entries(self._largest_le(position - 1, 4, _I32.unpack_from) + 1)

    def _check(self, buf, segment_size: int | None) -> str | None:
        if len(buf) % 8:
            return f"size {len(buf)} is not a multiple of 8"
        if not buf:
            return None
        offs, poss = _int32_columns(buf)
        if offs[0] < 0 or poss[0] < 0:
            return "negative entry"
        if not all(map(operator.lt, offs, offs[1:])):
            return "offsets are not strictly increasing"
        if not all(map(operator.lt, poss, poss[1:])):
            return "positions are not strictly increasing"
        if segment_size is not None and poss[-1] >= segment_size:
            return f"position {poss[-1]} is beyond the segment size {segment_size}"
        return None


class TimeIndex(_Index):
    """``<base>.timeindex``: timestamp -> relative offset (Kafka ``TimeIndex``)."""

    ENTRY_SIZE = 12
    _ENTRY = struct.Struct(">qi")

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry with timestamp <= ``timestamp``, or
        ``(-1, base_offset)`` if none (Kafka ``TimeIndex.lookup``). Index must be loaded."""
        slot = self._largest_le(timestamp, 0, _I64.unpack_from)
        if slot < 0:
            return -1, self.base_offset
        ts, rel = self._entry(slot)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the last entry; one pread when not loaded."""
        e = self._last_raw()
        return None if e is None else (e[0], self.base_offset + e[1])

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append if ``timestamp`` is larger than the last entry's (``TimeIndex.maybeAppend``)."""
        if timestamp < 0:
            return
        buf = self._buf
        rel = offset - self.base_offset
        if buf:
            last_ts, last_rel = self._entry(len(buf) // 12 - 1)
            if timestamp <= last_ts or rel < last_rel:
                return
        self._append_raw(self._ENTRY.pack(timestamp, rel))

    def truncate_to_offset(self, offset: int) -> None:
        """Remove entries whose offset is >= ``offset`` (appendable index)."""
        self._truncate_entries(
            self._largest_le(offset - self.base_offset - 1, 8, _I32.unpack_from) + 1)

    def _check(self, buf, segment_size: int | None) -> str | None:
        if len(buf) % 12:
            return f"size {len(buf)} is not a multiple of 12"
        n = len(buf) // 12
        if n == 0:
            return None
        flat = struct.unpack(">" + "qi" * n, bytes(buf))
        tss, rels = flat[0::2], flat[1::2]
        if rels[0] < 0:
            return "negative relative offset"
        if not all(map(operator.lt, tss, tss[1:])):
            return "timestamps are not strictly increasing"
        if not all(map(operator.le, rels, rels[1:])):
            return "offsets decrease"
        return None


class IndexBuilder:
    """Index entries for batches laid out back to back from position 0, by Kafka's rule (the
    same as :meth:`LogSegment.append` and ``recover``): a batch gets an offset-index entry (its
    last offset -> its position) when more than ``index.interval.bytes`` were written since the
    previous entry, and with it a time-index entry (max timestamp so far, last offset of the batch
    holding it) if the timestamp grew; :meth:`finish` adds the final time-index entry a closed
    segment always has. Used by index rebuilds and by the log cleaner."""

    __slots__ = ("base", "interval", "max_entries", "off_entries", "time_entries", "max_ts",
                 "max_ts_offset", "last_time_ts", "last_index_pos")

    def __init__(self, base_offset: int, config: LogConfig) -> None:
        self.base = base_offset
        self.interval = config.index_interval_bytes
        self.max_entries = config.segment_index_bytes // 8
        self.off_entries = bytearray()
        self.time_entries = bytearray()
        self.max_ts = self.max_ts_offset = self.last_time_ts = -1
        self.last_index_pos = 0

    def add(self, pos: int, last_offset: int, max_timestamp: int) -> None:
        """Account for the batch at ``pos``."""
        if max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = max_timestamp, last_offset
        if pos - self.last_index_pos > self.interval and len(self.off_entries) // 8 < self.max_entries:
            self.off_entries += OffsetIndex._ENTRY.pack(last_offset - self.base, pos)
            if self.max_ts > self.last_time_ts:
                self.time_entries += TimeIndex._ENTRY.pack(self.max_ts, self.max_ts_offset - self.base)
                self.last_time_ts = self.max_ts
            self.last_index_pos = pos

    def finish(self) -> tuple[bytearray, bytearray]:
        """``(offset index bytes, time index bytes)`` including the final time-index entry."""
        if self.max_ts > self.last_time_ts:
            self.time_entries += TimeIndex._ENTRY.pack(self.max_ts, self.max_ts_offset - self.base)
            self.last_time_ts = self.max_ts
        return self.off_entries, self.time_entries
