"""The read side of :class:`~kcompat.log.log.Log`: fetch reads, timestamp lookups, header
iteration. Split out of ``log.py`` by responsibility; ``LogReads`` is only used as a base of
``Log`` and relies on its attributes (declared below).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from pathlib import Path
from typing import Iterator

from kcompat.log.errors import CorruptLogError, OffsetOutOfRangeError
from kcompat.log.file_records import ZERO_COPY_MIN_BYTES, FileRecords
from kcompat.log.fileio import logger
from kcompat.log.segment import LogSegment
from kcompat.protocol.records import BatchHeader, CorruptRecordError

MAX_OPEN_INACTIVE = 8    # fds of old segments kept open per log (LRU)
READ_CACHE_SIZE = 64     # remembered "next batch" positions (and headers) of recent reads


class LogReads:
    """Read path mixed into ``Log``."""

    _directory: Path
    _segments: list[LogSegment]
    _bases: list[int]
    _leo: int
    _log_start_offset: int
    _open_inactive: OrderedDict[int, LogSegment]
    # next offset -> (segment, position, header of the batch there if read): cleared when data
    # at a position can change (truncation, cleaning, deletion: Log._invalidate)
    _read_cache: OrderedDict[int, tuple[LogSegment, int, BatchHeader | None]]
    _max_ts_cache: tuple[int, int] | None
    _corrupt_seen: set[tuple[int, str]]

    def _check_open(self) -> None:  # pragma: no cover - overridden by Log
        raise NotImplementedError

    # -- reads ------------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True, zero_copy: bool = False) -> bytes | FileRecords:
        """Whole batches starting with the one containing ``offset`` (it may start before
        ``offset``; consumers skip earlier records), from a single segment, at most ``max_bytes``
        bytes - except that with ``min_one_batch`` the first batch is returned even if larger
        (KIP-74). No batch whose base offset is >= ``max_offset`` (HW or LSO, exclusive).
        ``b""`` at the LEO. If ``offset`` falls in a gap at a segment's end, reading continues
        in the next segment (Kafka ``LocalLog.read`` / ``LogSegment.read``).

        Every batch returned has a valid CRC: bytes not yet checked by this process are checked
        first (:mod:`kcompat.log.verify`); the read stops before a damaged batch.

        ``zero_copy``: a range of at least ``ZERO_COPY_MIN_BYTES`` whose CRCs were checked already
        comes back as a :class:`~kcompat.log.file_records.FileRecords` (no bytes read), for the
        caller to send with ``sendfile`` and close.

        Raises OffsetOutOfRangeError if ``offset`` is outside [local log start offset, LEO] (on
        a tiered log, offsets below the local log start are read from remote storage instead),
        ValueError if ``max_bytes`` < 0, CorruptLogError if stored data cannot be framed or the
        batch at ``offset`` is damaged.
        """
        self._check_open()
        local_start = max(self._log_start_offset, self._bases[0])
        if offset < local_start or offset > self._leo:
            raise OffsetOutOfRangeError(offset, local_start, self._leo)
        if max_bytes < 0:
            raise ValueError(f"max_bytes {max_bytes} < 0")
        if offset == self._leo:
            return b""
        try:
            return self._read(offset, max_bytes, max_offset, min_one_batch, zero_copy)
        except CorruptRecordError as e:
            raise CorruptLogError(f"{self._directory}: cannot read offset {offset}: {e}") from e

    def _read(self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool,
              zero_copy: bool = False) -> bytes | FileRecords:
        found = self._locate(offset)
        if found is None:
            return b""
        i, seg, pos, h = found
        if max_offset is not None and h.base_offset >= max_offset:
            return b""
        last = i == len(self._segments) - 1
        end_limit = seg.size
        next_key: int | None = self._leo if last else self._bases[i + 1]
        if max_offset is not None and max_offset < next_key:  # type: ignore[operator]
            mpos, mbase = seg.find_base_at_least(max_offset)
            if mpos < end_limit:
                end_limit, next_key = mpos, mbase
        limit = pos + max_bytes
        after: BatchHeader | None = None   # the header of the batch at the cut, if read
        if limit >= end_limit:
            cut, key = end_limit, next_key
        else:
            cut, after = seg.boundary_before(pos, limit, h)
            key = after.base_offset if after is not None else None
        if cut <= pos:
            if not min_one:
                return b""
            cut, key, after = pos + h.size, None, None
        if zero_copy and cut - pos >= ZERO_COPY_MIN_BYTES and not seg.verifier.needs_check(pos, cut):
            self._remember_next(key, seg, cut, after)
            return seg.file_records(pos, cut - pos)
        data = seg.read(pos, cut - pos)
        if seg.verifier.needs_check(pos, cut):
            good, problem = seg.verifier.check(data, pos)
            if problem is not None:     # never serve a batch whose bytes are damaged on disk
                self._report_corrupt(seg, problem)
                if good == 0:
                    raise CorruptRecordError(f"{seg.log_path}: {problem}")
                data, key = data[:good], None
        self._remember_next(key, seg, cut, after)
        return data

    def _remember_next(self, key: int | None, seg: LogSegment, position: int,
                       header: BatchHeader | None = None) -> None:
        """The next read will likely start at offset ``key``: remember where it is (and the
        header of the batch there, if read)."""
        if key is not None:
            self._read_cache[key] = (seg, position, header)
            self._read_cache.move_to_end(key)
            if len(self._read_cache) > READ_CACHE_SIZE:
                self._read_cache.popitem(last=False)

    def _report_corrupt(self, seg: LogSegment, problem: str) -> None:
        """Log a damaged batch once (every later read stops before it again)."""
        key = (seg.base_offset, problem)
        if key not in self._corrupt_seen:
            self._corrupt_seen.add(key)
            logger.error("%s: %s; it is not served (reads stop before it; restore the partition "
                         "from a replica or a backup)", seg.log_path, problem)

    def _locate(self, offset: int) -> tuple[int, LogSegment, int, BatchHeader] | None:
        """Segment index, segment, position and header of the batch containing ``offset`` (or
        the first batch after it): the read cache, else the offset index + a header scan."""
        hit = self._read_cache.get(offset)
        if hit is not None:
            seg, pos, h = hit
            i = bisect.bisect_left(self._bases, seg.base_offset)
            if i < len(self._segments) and self._segments[i] is seg:
                if pos >= seg.size and i + 1 < len(self._segments):
                    i, seg, pos, h = i + 1, self._segments[i + 1], 0, None
                if pos < seg.size:
                    self._touch(seg)
                    if h is None or pos + h.size > seg.size:
                        h = seg.header_at(pos)
                    if h.base_offset <= offset <= h.last_offset:
                        return i, seg, pos, h
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        while i < len(self._segments):
            seg = self._segments[i]
            self._touch(seg)
            found = self._retrying(seg, lambda: seg.find_position(offset))
            if found is not None:
                return i, seg, found[0], found[1]
            i += 1
        return None

    def _retrying(self, seg: LogSegment, fn):
        """Run a lookup; if an old segment's index led to unframeable bytes, rebuild that index
        from the ``.log`` once and retry (an index entry that does not match its batch is
        rebuilt by the segment itself)."""
        try:
            return fn()
        except CorruptRecordError as e:
            if seg.active:
                raise
            logger.warning("%s: segment %d: %s; rebuilding its indexes", self._directory,
                           seg.base_offset, e)
            seg.rebuild(truncate=False)
            return fn()

    def _touch(self, seg: LogSegment) -> None:
        """LRU of old segments with open fds; the least recently used beyond the cap is closed."""
        if seg.active:
            return
        self._open_inactive[seg.base_offset] = seg
        self._open_inactive.move_to_end(seg.base_offset)
        while len(self._open_inactive) > MAX_OPEN_INACTIVE:
            _, old = self._open_inactive.popitem(last=False)
            old.release()

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record (at or after the log start) whose
        timestamp is >= ``timestamp_ms``, None if there is none (ListOffsets by timestamp; Kafka
        ``UnifiedLog.fetchOffsetByTimestamp``: the first segment whose largest timestamp reaches
        the target, then its time index). Control records count like any other record."""
        self._check_open()
        try:
            for seg in list(self._segments):
                if seg.checked_max_timestamp_and_offset()[0] < timestamp_ms:
                    continue
                self._touch(seg)
                found = self._retrying(seg, lambda: seg.find_offset_by_timestamp(
                    timestamp_ms, self._log_start_offset))
                if found is not None:
                    return found
            return None
        except CorruptRecordError as e:
            raise CorruptLogError(f"{self._directory}: {e}") from e

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """``(max timestamp, offset of the first record carrying it)`` over the log, ``(-1, -1)``
        if no record has a timestamp (ListOffsets MAX_TIMESTAMP, KIP-734). Reads one time-index
        entry per segment once, and decodes only the batch holding the maximum; cached."""
        self._check_open()
        if self._max_ts_cache is None:
            best, best_seg = -1, None
            for seg in self._segments:
                ts, _ = seg.max_timestamp_and_offset()
                if ts > best:
                    best, best_seg = ts, seg
            if best_seg is None:
                self._max_ts_cache = (-1, -1)
            else:
                self._touch(best_seg)
                try:
                    self._max_ts_cache = self._retrying(
                        best_seg, best_seg.exact_max_timestamp_and_offset)
                except CorruptRecordError as e:
                    raise CorruptLogError(f"{self._directory}: {e}") from e
        return self._max_ts_cache  # type: ignore[return-value]

    def iter_batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Yield the header of every batch whose last offset is >= ``from_offset``, in order
        (producer-state rebuild). Do not modify the log while iterating."""
        self._check_open()
        i = max(0, bisect.bisect_right(self._bases, from_offset) - 1)
        for seg in list(self._segments[i:]):
            self._touch(seg)
            try:
                for _pos, h in seg.iter_headers(from_offset):
                    yield h
            except CorruptRecordError as e:
                raise CorruptLogError(f"{self._directory}: {e}") from e

