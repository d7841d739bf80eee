"""One log segment: ``<base>.log`` plus ``.index`` and ``.timeindex`` (Kafka's ``LogSegment``).

The ``.log`` file holds record batches back to back, exactly as appended. It is accessed through
one unbuffered fd with ``os.pwrite``/``os.pread``; old segments open their fd only when first
read (the owning :class:`~kcompat.log.log.Log` closes idle ones again).
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Iterable

from kcompat.log.config import LogConfig
from kcompat.log.file_records import FileRecords
from kcompat.log.fileio import (
    HEADER_CHUNK, MAX_RELATIVE_OFFSET, ValidScan, close_abandoned, logger, open_rw, pread_full, pwrite_all,
    scan_headers, unlink_quiet,
)
from kcompat.log.index import CorruptIndexError, IndexBuilder, OffsetIndex, TimeIndex
from kcompat.log.segment_timestamps import SegmentTimestamps, rebuilds_bad_index
from kcompat.log.txn_index import TransactionIndex
from kcompat.log.verify import ReadVerifier
from kcompat.protocol.records import HEADER_SIZE, BatchHeader, CorruptRecordError, parse_header

#: (relative position, size, last offset, max timestamp) of each batch of a multi-batch append
BatchInfo = tuple[int, int, int, int]


def segment_name(base_offset: int) -> str:
    """Kafka's file stem: the base offset zero-padded to 20 digits."""
    return f"{base_offset:020d}"


class LogSegment(SegmentTimestamps):
    """A segment of one partition's log.

    ``base_offset`` is <= every offset in the segment and > every offset of earlier segments.
    ``size`` is the ``.log`` size in bytes. Only the last segment of a log is *active*
    (appendable, indexes held in memory); others load their indexes lazily on first lookup and
    rebuild them from the ``.log`` if they fail the sanity check.

    Not thread-safe. I/O errors propagate as OSError; unreadable batch framing as
    ``CorruptRecordError``.
    """

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, *, size: int = 0,
                 created_ms: int = 0, roll_jitter_ms: int = 0, index_size: int | None = None,
                 timeindex_size: int | None = None) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        stem = segment_name(base_offset)
        self.log_path = directory / f"{stem}.log"
        self.offset_index = OffsetIndex(directory / f"{stem}.index", base_offset, index_size)
        self.time_index = TimeIndex(directory / f"{stem}.timeindex", base_offset, timeindex_size)
        self.txn_index = TransactionIndex(directory / f"{stem}.txnindex")
        self.size = size
        self.created_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms
        self.active = False
        self.dirty = False                 # bytes written since the last fsync
        self.next_offset: int | None = None  # known once activated/recovered
        self._fd: int | None = None
        self._max_ts: int | None = None    # None: not loaded yet (time index tail)
        self._max_ts_offset = -1           # last offset of the batch holding _max_ts ("shallow")
        self._max_ts_exact: int | None = None  # offset of the record holding _max_ts, if known
        self._rolling_ts: int | None = None    # first batch's max timestamp (rollingBasedTimestamp)
        self._bytes_since_index = 0
        # bytes read from disk that no check has covered yet are CRC-checked before reads serve them
        self.verifier = ReadVerifier(size)
        # ranges handed out for zero-copy sends (file_records): detached before a truncation
        self._ranges: weakref.WeakSet[FileRecords] = weakref.WeakSet()
        self._max_ts_checked = False

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, active={self.active})"

    def __del__(self) -> None:
        # A segment dropped without close() (its Log abandoned, as a test simulating a killed
        # process does, or by an error path) gives its .log fd back when collected instead of
        # holding it for the life of the process. Nothing else holds that fd: zero-copy ranges
        # dup it (FileRecords).
        close_abandoned(getattr(self, "_fd", None))
        self._fd = None

    # -- creation / state ---------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, *, created_ms: int
               ) -> "LogSegment":
        """A new, empty, active segment (creates/overwrites its three files). On an OSError the
        files created so far are removed and the error re-raised."""
        seg = cls(directory, base_offset, config, created_ms=created_ms,
                  roll_jitter_ms=config.random_segment_jitter())
        try:
            seg._fd = open_rw(seg.log_path, truncate=True)
            seg.offset_index.replace(b"")
            seg.time_index.replace(b"")
        except OSError:   # e.g. no inode or directory block left: leave no half-made segment
            seg.delete()
            raise
        seg.verifier.reset(0)
        seg._max_ts, seg._max_ts_offset = -1, -1
        seg.next_offset = base_offset
        seg.make_active()
        seg.dirty = True
        return seg

    @property
    def fd(self) -> int:
        """The ``.log`` fd, opened on first use."""
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CLOEXEC)
        return self._fd

    @property
    def is_open(self) -> bool:
        """True while the ``.log`` fd is open."""
        return self._fd is not None

    def make_active(self) -> None:
        """Open both indexes for appending (they must be valid: after ``create``/``rebuild``/a
        successful ``activate``). Raises CorruptIndexError otherwise."""
        self.offset_index.open_for_append(self.size)
        self.time_index.open_for_append(self.size)
        self.active = True

    def activate(self) -> bool:
        """Make the last segment appendable at start-up *without* scanning it: load the indexes,
        check that the last offset-index entry points at a batch with that last offset, validate
        (CRC) the batches after it, and derive next offset and max timestamp from them (Kafka's
        ``readNextOffset`` + ``readLargestTimestamp``). False if anything is wrong; the caller
        then runs :meth:`recover`."""
        try:
            self.offset_index.open_for_append(self.size)
            self.time_index.open_for_append(self.size)
        except CorruptIndexError as e:
            logger.warning("index of active segment %s is damaged (%s); rebuilding", self.log_path, e)
            return False
        last = self.offset_index.last_entry()
        start = last[1] if last else 0
        te = self.time_index.last_entry()
        max_ts, max_off = te if te else (-1, -1)
        next_offset = self.base_offset
        scan = ValidScan(self.fd, start, self.size, self.base_offset)
        first = True
        for _pos, h in scan:
            if first and last is not None and h.last_offset != last[0]:
                scan.problem = f"index entry {last} does not match batch ending at {h.last_offset}"
                break
            first = False
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
            next_offset = h.next_offset
        if scan.problem is None and last is not None and first:
            scan.problem = f"index entry {last} points past the data"
        if scan.problem is None and te is not None and te[1] >= next_offset:
            scan.problem = f"time index entry {te} is beyond the next offset {next_offset}"
        if scan.problem is not None or scan.valid_end != self.size:
            logger.warning("active segment %s needs recovery: %s", self.log_path,
                           scan.problem or "trailing bytes")
            self.offset_index.close_for_append()
            self.time_index.close_for_append()
            return False
        self.next_offset = next_offset
        self._max_ts, self._max_ts_offset, self._max_ts_exact = max_ts, max_off, None
        self._bytes_since_index = self.size - start
        self.verifier.reset(start)        # the tail was checked just now; the rest was not
        self.active = True
        return True

    def rebuild(self, *, truncate: bool) -> int:
        """Scan the whole ``.log`` from position 0 validating every batch (framing, magic, CRC,
        increasing offsets), rebuild both indexes, and - if ``truncate`` - cut the file at the
        first invalid or torn batch. Returns the number of invalid bytes found at the end
        (truncated if ``truncate``). Kafka ``LogSegment.recover``."""
        base = self.base_offset
        builder = IndexBuilder(base, self.config)
        first_ts: int | None = None
        next_offset = base
        scan = ValidScan(self.fd, 0, self.size, base)
        for pos, h in scan:
            if first_ts is None:
                first_ts = h.max_timestamp
            builder.add(pos, h.last_offset, h.max_timestamp)
            next_offset = h.next_offset
        off_entries, time_entries = builder.finish()
        max_ts, max_off = builder.max_ts, builder.max_ts_offset
        last_index_pos = builder.last_index_pos
        invalid = self.size - scan.valid_end
        if invalid:
            logger.warning("segment %s: %s; %s %d bytes at position %d", self.log_path,
                           scan.problem, "truncating" if truncate else "not indexing",
                           invalid, scan.valid_end)
            if truncate:
                os.ftruncate(self.fd, scan.valid_end)
                self.size = scan.valid_end
                self.dirty = True
        if invalid and not truncate:   # the damaged tail stays: reads must still refuse it
            self.verifier.reset(self.size, (0, scan.valid_end))
        else:
            self.verifier.reset(0)
        self.offset_index.replace(off_entries)
        self.time_index.replace(time_entries)
        self.next_offset = next_offset
        self._max_ts, self._max_ts_offset, self._max_ts_exact = max_ts, max_off, None
        self._rolling_ts = first_ts
        self._bytes_since_index = scan.valid_end - last_index_pos
        return invalid

    def recover(self) -> int:
        """Rebuild indexes and truncate the invalid tail; returns bytes truncated."""
        return self.rebuild(truncate=True)

    def on_become_inactive(self) -> None:
        """On roll: append the final time-index entry (max timestamp so far) and drop the
        in-memory index copies (Kafka ``onBecomeInactiveSegment``)."""
        if self._max_ts is not None and self._max_ts >= 0 and self.time_index.appendable:
            before = self.time_index.entries
            self.time_index.maybe_append(self._max_ts, self._max_ts_offset)
            if self.time_index.entries != before:
                self.dirty = True
        self.offset_index.close_for_append()
        self.time_index.close_for_append()
        self.active = False

    def ensure_indexes(self) -> None:
        """Load both indexes for lookups; rebuild them from the ``.log`` if they fail the sanity
        check (size a multiple of the entry, entries increasing, positions inside the segment)."""
        if self.offset_index.loaded and self.time_index.loaded:
            return
        try:
            self.offset_index.load(self.size)
            self.time_index.load(self.size)
        except CorruptIndexError as e:
            logger.warning("segment %s: %s; rebuilding its indexes", self.log_path, e)
            self.rebuild(truncate=False)

    # -- append -------------------------------------------------------------------------------
    def should_roll(self, msg_size: int, last_offset: int, max_timestamp: int, now_ms: int
                    ) -> str | None:
        """Why the active segment must roll before appending, or None (Kafka
        ``LogSegment.shouldRoll``). Never rolls an empty segment."""
        if self.size == 0:
            return None
        cfg = self.config
        if self.size > cfg.segment_bytes - msg_size:
            return "size"
        if self.time_waited_for_roll(now_ms, max_timestamp) > cfg.max_segment_ms - self.roll_jitter_ms:
            return "time"
        if (self.offset_index.is_full(cfg.segment_index_bytes)
                or self.time_index.is_full(cfg.segment_index_bytes)):
            return "index full"
        if last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            return "offset overflow"
        return None

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka ``timeWaitedForRoll``: the appended batches' max timestamp minus the first
        batch's max timestamp; wall clock minus creation time if the first batch has none."""
        ts = self.rolling_based_timestamp()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def rolling_based_timestamp(self) -> int | None:
        """Max timestamp of the first batch (Kafka ``rollingBasedTimestamp``; one header read
        after a restart), None for an empty segment."""
        if self._rolling_ts is None and self.size > 0:
            self._rolling_ts = self.header_at(0).max_timestamp
        return self._rolling_ts

    def append(self, data: memoryview, batches: Iterable[BatchInfo] | None, last_offset: int,
               max_timestamp: int, offset_of_max_timestamp: int) -> None:
        """Write ``data`` (complete batches) at the end and index it (Kafka
        ``LogSegment.append``): every ``index.interval.bytes`` the batch's last offset -> its
        start position goes to the offset index and (max timestamp so far, its batch's last
        offset) to the time index. ``batches`` is None for a single batch.

        All or nothing: if writing the data or an index entry fails (ENOSPC...), the ``.log`` and
        both indexes are cut back to where they were, the in-memory state is restored and the
        OSError re-raised, so the segment is exactly as before the call."""
        pos0 = self.size
        saved = (self._rolling_ts, self._max_ts, self._max_ts_offset, self._max_ts_exact,
                 self._bytes_since_index, self.offset_index.entries, self.time_index.entries)
        if pos0 == 0:
            self._rolling_ts = max_timestamp
        try:
            pwrite_all(self.fd, data, pos0)
            self.size = pos0 + len(data)
            self.dirty = True
            prev_max = self._max_ts
            if batches is None:
                self._index_batch(pos0, len(data), last_offset, max_timestamp)
            else:
                for rel, size, blast, bmax in batches:
                    self._index_batch(pos0 + rel, size, blast, bmax)
        except OSError:
            self._undo_append(pos0, saved)
            raise
        if self._max_ts != prev_max:
            self._max_ts_exact = (offset_of_max_timestamp
                                  if self._max_ts == max_timestamp and offset_of_max_timestamp >= 0 else None)
        self.next_offset = last_offset + 1

    def _undo_append(self, pos0: int, saved: tuple) -> None:
        """Cut the ``.log`` and the indexes back to ``pos0`` / the saved entry counts after a
        failed append (shrinking never needs space, so this works on a full disk)."""
        (self._rolling_ts, self._max_ts, self._max_ts_offset, self._max_ts_exact,
         self._bytes_since_index, off_entries, time_entries) = saved
        self.size = pos0
        for step in (lambda: os.ftruncate(self.fd, pos0),
                     lambda: self.offset_index.truncate_entries(off_entries),
                     lambda: self.time_index.truncate_entries(time_entries)):
            try:
                step()
            except OSError as e:  # pragma: no cover - shrinking a file does not fail on a sane fs
                logger.error("segment %s: cannot undo a failed append: %s", self.log_path, e)

    def _index_batch(self, pos: int, size: int, last: int, max_ts: int) -> None:
        if max_ts > self._max_ts:  # type: ignore[operator]
            self._max_ts, self._max_ts_offset = max_ts, last
        if self._bytes_since_index > self.config.index_interval_bytes:
            limit = self.config.segment_index_bytes
            if not self.offset_index.is_full(limit):
                self.offset_index.append(last, pos)
            if not self.time_index.is_full(limit):
                self.time_index.maybe_append(self._max_ts, self._max_ts_offset)  # type: ignore[arg-type]
            self._bytes_since_index = 0
        self._bytes_since_index += size

    # -- reads ----------------------------------------------------------------------------------
    def read(self, position: int, size: int) -> bytes:
        """``size`` bytes of the ``.log`` at ``position`` (one pread)."""
        return pread_full(self.fd, size, position)

    def file_records(self, position: int, size: int) -> FileRecords:
        """``size`` bytes at ``position`` as a :class:`FileRecords` for a zero-copy send; it
        stays valid until closed, whatever happens to the segment (see :mod:`kcompat.log.file_records`)."""
        records = FileRecords(self.fd, position, size)
        self._ranges.add(records)
        return records

    def _detach_ranges(self, position: int) -> None:
        """Before truncating the file at ``position``: ranges that reach it copy their bytes."""
        for records in list(self._ranges):
            if records.overlaps_from(position):
                records.detach()

    def header_at(self, position: int) -> BatchHeader:
        """The batch header at ``position``; CorruptRecordError if it is not a whole batch."""
        h = parse_header(pread_full(self.fd, HEADER_SIZE, position))
        if position + h.size > self.size:
            raise CorruptRecordError(f"batch at {position} runs past the segment end {self.size}")
        return h

    @rebuilds_bad_index
    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """``(position, header)`` of the first batch whose last offset is >= ``offset``, None if
        the segment ends before it (Kafka ``translateOffset``: index lookup, then header scan)."""
        self.ensure_indexes()
        for pos, h in self._scan_from(*self.offset_index.lookup(offset)):
            if h.last_offset >= offset:
                return pos, h
        return None

    def _scan_from(self, entry_offset: int, start: int, chunk: int = HEADER_CHUNK):
        """Batch headers from ``start``, the position of the offset-index entry for
        ``entry_offset`` (0: no entry). The first must be the batch that entry names, else
        CorruptIndexError: a damaged index that passed the sanity check would otherwise skip
        records (Kafka trusts such an index)."""
        it = scan_headers(self.fd, start, self.size, chunk)
        if start > 0:
            try:
                first = next(it, None)
            except CorruptRecordError:   # no batch there at all (the rebuild meets real damage again)
                first = None
            if first is None or first[1].last_offset != entry_offset:
                raise CorruptIndexError(
                    f"{self.offset_index.path.name}: entry ({entry_offset}, {start}) does not point at "
                    f"the batch ending at offset {entry_offset}")
            yield first
        yield from it

    @rebuilds_bad_index
    def find_base_at_least(self, offset: int) -> tuple[int, int | None]:
        """``(position, base offset)`` of the first batch whose base offset is >= ``offset``;
        ``(size, None)`` if there is none."""
        self.ensure_indexes()
        for pos, h in self._scan_from(*self.offset_index.lookup(offset)):
            if h.base_offset >= offset:
                return pos, h.base_offset
        return self.size, None

    @rebuilds_bad_index
    def boundary_before(self, start: int, limit: int, first: BatchHeader | None = None
                        ) -> tuple[int, BatchHeader | None]:
        """The last batch boundary ``b`` with ``start <= b <= limit < size`` (``start`` must be a
        boundary), and the header of the batch starting at ``b`` if it was read. Starts
        from the index entry nearest below ``limit``, so it reads at most about
        ``index.interval.bytes`` of headers.

        ``first``, the header of the batch at ``start`` when the caller has it: if that batch
        and the next decide the answer (large batches, as a consumer's fetch of about one
        producer batch), only the next batch's header is read, and no index entry."""
        if first is not None:
            end = start + first.size
            if end > limit:
                return start, first
            following = self.header_at(end)
            if end + following.size > limit:
                return end, following
        self.ensure_indexes()
        entry = self.offset_index.lookup_by_position(limit)
        headers = (self._scan_from(*entry) if entry and entry[1] > start
                   else scan_headers(self.fd, start, self.size))
        cut = max(start, entry[1]) if entry else start
        for pos, h in headers:
            if pos + h.size > limit:
                return cut, h
            cut = pos + h.size
        return cut, None

    def iter_headers(self, from_offset: int):
        """Yield ``(position, header)`` of every batch with last offset >= ``from_offset``."""
        found = self.find_position(from_offset)
        if found is None:
            return
        for pos, h in scan_headers(self.fd, found[0], self.size):
            yield pos, h

    # -- truncation / lifecycle ---------------------------------------------------------------------
    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (a batch containing ``offset``
        goes entirely). The segment must be active. Returns the new next offset:
        ``min(offset, base offset of the first removed batch)`` (Kafka ``LogSegment.truncateTo``)."""
        found = self.find_position(offset)
        new_next = offset
        if found is not None:
            pos, h = found
            new_next = min(offset, h.base_offset)
            self._detach_ranges(pos)
            os.ftruncate(self.fd, pos)
            self.size = pos
            self.verifier.truncate(pos)
            self.offset_index.truncate_to_position(pos)
            self.time_index.truncate_to_offset(new_next)
        te = self.time_index.last_entry()
        max_ts, max_off = te if te else (-1, -1)
        le = self.offset_index.last_entry()
        for _pos, h in scan_headers(self.fd, le[1] if le else 0, self.size):
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
        self._max_ts, self._max_ts_offset, self._max_ts_exact = max_ts, max_off, None
        self._bytes_since_index = 0
        if self.size == 0:
            self._rolling_ts = None
            self.created_ms = now_ms
        self.next_offset = new_next
        self.dirty = True
        return new_next

    def flush(self) -> None:
        """fsync the ``.log`` and both indexes if anything was written since the last flush."""
        if not self.dirty:
            return
        os.fsync(self.fd)
        self.offset_index.fsync()
        self.time_index.fsync()
        self.txn_index.fsync()
        self.dirty = False

    def take_sync_paths(self) -> list[Path]:
        """For a flush run on another thread: the files :meth:`flush` would fsync (empty if
        nothing was written since the last flush). Clears ``dirty`` now, so writes made while the
        fsync runs mark the segment dirty again; call :meth:`mark_dirty` if the fsync fails."""
        if not self.dirty:
            return []
        self.dirty = False
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def mark_dirty(self) -> None:
        self.dirty = True

    def release(self) -> None:
        """Close the fd and drop index mappings of an inactive segment (reopened on demand)."""
        if self.active:
            return
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.offset_index.release()
        self.time_index.release()

    def close(self, *, final_entry: bool = True) -> None:
        """Close every fd (Kafka ``LogSegment.close`` also writes the final time-index entry of
        an active segment; ``final_entry=False`` skips that write, for a segment about to be
        deleted). The fds are closed even if that write fails (the OSError is re-raised)."""
        try:
            if self.active and final_entry:
                self.on_become_inactive()
        finally:
            self.active = False
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self.offset_index.close()
            self.time_index.close()

    def delete(self) -> None:
        """Close and unlink the segment's files (``.log``, ``.index``, ``.timeindex``,
        ``.txnindex``)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.active = False
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        unlink_quiet(self.log_path)
