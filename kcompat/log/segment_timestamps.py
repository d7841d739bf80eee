"""Timestamps of a :class:`~kcompat.log.segment.LogSegment`: its largest timestamp (retention,
ListOffsets MAX_TIMESTAMP, KIP-734) and the search by timestamp (ListOffsets by time, Kafka
``LogSegment.findOffsetByTimestamp``), checked against the batches where a damaged ``.timeindex``
could mislead them. Split out of ``segment.py`` by responsibility; ``SegmentTimestamps`` is only
used as a base of ``LogSegment`` and relies on its attributes and methods (declared below).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from kcompat.log.fileio import logger, scan_headers
from kcompat.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from kcompat.log.verify import ReadVerifier
from kcompat.protocol.records import BatchHeader, CorruptRecordError, iter_records


def rebuilds_bad_index(method):
    """Run a lookup method; if it finds the segment's index wrong (CorruptIndexError: an entry
    that does not match its batch), rebuild both indexes from the ``.log`` and run it again."""
    @functools.wraps(method)
    def lookup(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except CorruptIndexError as e:
            logger.warning("segment %s: %s; rebuilding its indexes", self.log_path, e)
            self.rebuild(truncate=False)
            return method(self, *args, **kwargs)
    return lookup


class SegmentTimestamps:
    """Largest timestamp and search by timestamp, mixed into ``LogSegment``."""

    log_path: Path
    active: bool
    size: int
    offset_index: OffsetIndex
    time_index: TimeIndex
    verifier: ReadVerifier
    _max_ts: int | None
    _max_ts_offset: int
    _max_ts_checked: bool
    _max_ts_exact: int | None
    fd: int   # LogSegment.fd: the .log file's descriptor

    # provided by LogSegment
    def rebuild(self, *, truncate: bool) -> int:  # pragma: no cover
        raise NotImplementedError

    def ensure_indexes(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def read(self, position: int, size: int) -> bytes:  # pragma: no cover
        raise NotImplementedError

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:  # pragma: no cover
        raise NotImplementedError

    def _scan_from(self, entry_offset: int, start: int):  # pragma: no cover
        raise NotImplementedError

    # -- timestamps -------------------------------------------------------------------------------
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """``(max timestamp, last offset of its batch)``, ``(-1, -1)`` if no timestamp; for an
        inactive segment read from the time index's last entry (one pread)."""
        if self._max_ts is None:
            te = self.time_index.last_entry()
            self._max_ts, self._max_ts_offset = te if te else (-1, -1)
        return self._max_ts, self._max_ts_offset

    def largest_timestamp(self) -> int:
        """Max record timestamp, else the ``.log`` mtime in ms (Kafka ``largestTimestamp``)."""
        ts, _ = self.max_timestamp_and_offset()
        if ts >= 0:
            return ts
        try:
            return os.stat(self.log_path).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return -1

    def checked_max_timestamp_and_offset(self) -> tuple[int, int]:
        """:meth:`max_timestamp_and_offset`, for an inactive segment first checked (once) against
        the batches after its last offset-index entry: a ``.timeindex`` cut at an entry boundary
        passes the sanity check but lost its largest entries, and a timestamp lookup would skip the
        segment. If a batch there has a larger timestamp, both indexes are rebuilt."""
        ts, off = self.max_timestamp_and_offset()
        if self.active or self._max_ts_checked:
            return ts, off
        self._max_ts_checked = True
        le = self.offset_index.last_entry()
        try:
            stale = any(h.max_timestamp > ts for _pos, h in scan_headers(self.fd, le[1] if le else 0, self.size))
        except CorruptRecordError:
            stale = False      # the lookup itself will meet the damage and handle it
        if stale:
            logger.warning("segment %s: its time index misses the largest timestamps; rebuilding it", self.log_path)
            self.rebuild(truncate=False)
        return self.max_timestamp_and_offset()

    def verified_largest_timestamp(self) -> int:
        """:meth:`largest_timestamp`, checked against the batches (retention calls it before it
        deletes a segment by time): the time index's last entry must name a batch with that max
        timestamp and no later batch may have a larger one, else both indexes are rebuilt from
        the ``.log`` first - a ``.timeindex`` damaged or cut short on disk must not make
        retention delete a segment early. Reads the batch headers after that entry."""
        ts, off = self.max_timestamp_and_offset()
        try:
            found = self.find_position(off) if ts >= 0 else None
            ok = ts < 0 or (found is not None and found[1].last_offset == off and found[1].max_timestamp == ts)
            if ok:
                ok = all(h.max_timestamp <= ts for _pos, h in
                         scan_headers(self.fd, found[0] if found else 0, self.size))
        except CorruptRecordError:
            ok = False
        if not ok:
            logger.warning("segment %s: its time index does not match the batches; rebuilding it "
                           "before retention decides", self.log_path)
            self.rebuild(truncate=False)
        return self.largest_timestamp()

    @rebuilds_bad_index
    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int
                                 ) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp`` and
        offset >= ``starting_offset`` (Kafka ``findOffsetByTimestamp`` +
        ``FileRecords.searchForTimestamp``): time index -> offset index -> header scan, decoding
        only batches whose max timestamp reaches the target."""
        self.ensure_indexes()
        entry_ts, ts_offset = self.time_index.lookup(timestamp)
        # a time-index entry (T, O) names the batch ending at O, whose max timestamp is T: check
        # it, or a damaged entry would make the search start too late
        expect = entry_ts >= 0 and ts_offset >= starting_offset
        for pos, h in self._scan_from(*self.offset_index.lookup(max(ts_offset, starting_offset))):
            if expect and h.last_offset >= ts_offset:
                if h.last_offset != ts_offset or h.max_timestamp != entry_ts:
                    raise CorruptIndexError(f"{self.time_index.path.name}: entry ({entry_ts}, {ts_offset}) "
                                            f"does not match the batch ending at {h.last_offset}")
                expect = False
            if h.max_timestamp >= timestamp and h.last_offset >= starting_offset:
                for rec in iter_records(self._checked_batch(pos, h)):
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        return rec.offset, rec.timestamp
        if expect:
            raise CorruptIndexError(f"{self.time_index.path.name}: entry ({entry_ts}, {ts_offset}) names an "
                                    f"offset beyond the segment")
        return None

    def _checked_batch(self, pos: int, h: BatchHeader) -> bytes:
        """The batch at ``pos`` for decoding; CorruptRecordError if its CRC does not match."""
        data = self.read(pos, h.size)
        if self.verifier.needs_check(pos, pos + h.size) and self.verifier.check(data, pos)[1] is not None:
            raise CorruptRecordError(f"{self.log_path}: CRC mismatch in the batch at position {pos}")
        return data

    @rebuilds_bad_index
    def exact_max_timestamp_and_offset(self) -> tuple[int, int]:
        """``(max timestamp, offset of the first record carrying it)`` (KIP-734): decodes only
        the batch holding it, unless the append path already told us."""
        ts, shallow = self.max_timestamp_and_offset()
        if ts < 0:
            return -1, -1
        if self._max_ts_exact is None:
            self._max_ts_exact = shallow
            self.ensure_indexes()
            for pos, h in self._scan_from(*self.offset_index.lookup(shallow)):
                if h.max_timestamp == ts:
                    for rec in iter_records(self._checked_batch(pos, h)):
                        if rec.timestamp == ts:
                            self._max_ts_exact = rec.offset
                            break
                    break
                if h.last_offset > shallow:
                    break
        return ts, self._max_ts_exact
