"""One topic-partition's log: segments in offset order, the last one active (Kafka's
``UnifiedLog`` + ``LocalLog``, local part only).

Offsets: ``log_start_offset`` <= readable offsets < ``log_end_offset`` (LEO, the next offset to
assign). ``recovery_point``: everything below it is fsynced; after a crash only segments from the
one containing it are scanned. Not thread-safe: call every method from one thread.
"""

from __future__ import annotations

import bisect
import os
import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Callable, NamedTuple

from kcompat.log.config import LogConfig
from kcompat.log.errors import LogClosedError
from kcompat.log.fileio import fsync_dir, fsync_path, logger, unlink_quiet
from kcompat.log.loader import load_segments
from kcompat.log.reads import LogReads
from kcompat.log.segment import BatchInfo, LogSegment, segment_name
from kcompat.log.snapshots import SnapshotStore
from kcompat.log.txn_index import AbortedTxn
from kcompat.protocol.records import HEADER_SIZE, parse_header


class Log(LogReads):
    """The log of one partition in ``directory`` (``<log dir>/<topic>-<partition>``).

    Create with :meth:`open`. ``on_roll`` (optional) is called with the new active segment's base
    offset after every roll (the producer-state owner writes a snapshot there; an exception it
    raises propagates out of ``append``/``apply_retention``, the log itself stays consistent).
    """

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment], *,
                 next_offset: int, recovery_point: int, log_start_offset: int, now_ms: int) -> None:
        self._directory = directory
        self._config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = next_offset
        self._recovery_point = recovery_point
        self._log_start_offset = log_start_offset
        self._size = sum(s.size for s in segments)
        self._snapshots = SnapshotStore(directory)
        self._clock_ms = now_ms
        self._last_flush_ms = now_ms
        self._pending_roll_flush = recovery_point < segments[-1].base_offset
        self._open_inactive: OrderedDict[int, LogSegment] = OrderedDict()
        self._read_cache: OrderedDict[int, tuple[LogSegment, int]] = OrderedDict()
        self._max_ts_cache: tuple[int, int] | None = None
        self._dir_dirty = False
        self._closed = False
        self.on_roll: Callable[[int], None] | None = None
        self._roll_listeners: list[Callable[["Log"], None]] = []
        self._cleaning: CleaningLease | None = None
        self._deferred_deletion = False
        self._truncated_to: int | None = None
        self._fault_hook: Callable[[str], None] | None = None   # tests: simulate a crash at a step

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, recovery_point: int = 0,
             log_start_offset: int = 0, clean_shutdown: bool, now_ms: int) -> "Log":
        """Open (creating if needed) the partition directory; see
        :func:`kcompat.log.loader.load_segments` for what is read and recovered. Bad on-disk
        data is truncated or rebuilt with a log line, never raised. Snapshots beyond the log end
        are deleted. Raises OSError only for I/O failures (permissions, disk)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        r = load_segments(directory, config, recovery_point=recovery_point,
                          log_start_offset=log_start_offset, clean_shutdown=clean_shutdown,
                          now_ms=now_ms)
        log = cls(directory, config, r.segments, next_offset=r.next_offset,
                  recovery_point=r.recovery_point, log_start_offset=r.log_start_offset, now_ms=now_ms)
        if log._snapshots.delete_after(log._leo):
            logger.info("%s: deleted producer snapshots beyond the log end %d", directory, log._leo)
        logger.info("%s: loaded %d segment(s), log start %d, log end %d, recovery point %d",
                    directory, len(r.segments), log._log_start_offset, log._leo, log._recovery_point)
        return log

    # -- properties -------------------------------------------------------------------------------
    @property
    def directory(self) -> Path:
        """The partition directory ``<log dir>/<topic>-<partition>``."""
        return self._directory

    @property
    def config(self) -> LogConfig:
        """The current LogConfig (replace it with :meth:`update_config`)."""
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Apply new topic configs (taking effect at the next append/roll/retention check)."""
        self._config = config
        for seg in self._segments:
            seg.config = config

    @property
    def log_start_offset(self) -> int:
        """First readable offset (reads below raise OffsetOutOfRangeError)."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """LEO: the offset the next appended record gets."""
        return self._leo

    @property
    def recovery_point(self) -> int:
        """Offsets below this are fsynced; unclean recovery starts at its segment."""
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        """Sum of the ``.log`` sizes of all segments."""
        return self._size

    @property
    def segments(self) -> list[LogSegment]:
        """The segments in offset order (a copy of the list; the last one is active)."""
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        """The last, appendable segment."""
        return self._segments[-1]

    @property
    def closed(self) -> bool:
        """True after :meth:`close`, :meth:`close_without_flush` or :meth:`delete`."""
        return self._closed

    def add_roll_listener(self, listener: Callable[["Log"], None]) -> None:
        """Register ``listener(log)``, called after every roll (the LogManager uses it to
        schedule the fsync of the completed segment); independent of ``on_roll``."""
        self._roll_listeners.append(listener)

    # -- append -----------------------------------------------------------------------------------
    def append(self, batches, *, last_offset: int, max_timestamp: int,
               offset_of_max_timestamp: int, now_ms: int) -> None:
        """Append complete RecordBatch v2 bytes whose offsets the caller assigned.

        ``batches``: bytes-like with one or more whole batches, the first base offset equal to
        ``log_end_offset``; ``last_offset``: last offset of the last batch; ``max_timestamp`` /
        ``offset_of_max_timestamp``: largest record timestamp (ms) and the first record carrying
        it (-1 if the caller does not know it without decoding). Rolls first if needed (Kafka
        ``UnifiedLog.maybeRoll``), writes with pwrite (in the page cache on return), and fsyncs
        once ``flush.messages`` offsets are unflushed.

        Raises ValueError on misframed input or offsets not following the LEO; OSError if the
        write fails (the segment is cut back to its previous size).
        """
        self._check_open()
        mv = memoryview(batches).cast("B")
        n = mv.nbytes
        if n < HEADER_SIZE:
            raise ValueError(f"{n} bytes cannot hold a record batch")
        h = parse_header(mv, 0)
        if h.base_offset != self._leo:
            raise ValueError(f"first batch base offset {h.base_offset} != log end offset {self._leo}")
        infos: list[BatchInfo] | None = None
        if h.size == n:
            if h.last_offset != last_offset:
                raise ValueError(f"last_offset {last_offset} != batch last offset {h.last_offset}")
        elif h.size > n:
            raise ValueError(f"incomplete batch: {h.size} bytes announced, {n} given")
        else:
            infos = self._frame(mv, n, last_offset)
        self._clock_ms = now_ms
        seg = self._segments[-1]
        reason = seg.should_roll(n, last_offset, max_timestamp, now_ms)
        if reason is not None:
            logger.debug("%s: rolling segment %d (%s)", self._directory, seg.base_offset, reason)
            seg = self.roll(now_ms)
        seg.append(mv, infos, last_offset, max_timestamp, offset_of_max_timestamp)
        self._leo = last_offset + 1
        self._size += n
        if self._max_ts_cache is not None and max_timestamp > self._max_ts_cache[0]:
            # an unknown (-1) exact offset is found by decoding when next asked
            self._max_ts_cache = ((max_timestamp, offset_of_max_timestamp) if offset_of_max_timestamp >= 0
                                  else None)
        if self._leo - self._recovery_point >= self._config.flush_messages:
            self.flush()

    @staticmethod
    def _frame(mv: memoryview, n: int, last_offset: int) -> list[BatchInfo]:
        infos: list[BatchInfo] = []
        pos = 0
        next_offset = None
        while pos < n:
            h = parse_header(mv, pos)
            if pos + h.size > n:
                raise ValueError(f"incomplete batch at byte {pos}")
            if next_offset is not None and h.base_offset < next_offset:
                raise ValueError(f"batch offsets are not increasing at byte {pos}")
            infos.append((pos, h.size, h.last_offset, h.max_timestamp))
            next_offset = h.next_offset
            pos += h.size
        if infos[-1][2] != last_offset:
            raise ValueError(f"last_offset {last_offset} != last batch's {infos[-1][2]}")
        return infos

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the LEO (no-op if the active one is empty). The old
        one gets its final time-index entry; it is fsynced by the next ``maybe_flush`` /
        ``flush_rolled`` (Kafka schedules that flush asynchronously too)."""
        self._check_open()
        old = self._segments[-1]
        if old.size == 0:
            return old
        now = self._clock_ms if now_ms is None else now_ms
        old.on_become_inactive()
        seg = LogSegment.create(self._directory, self._leo, self._config, created_ms=now)
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self._dir_dirty = True
        self._pending_roll_flush = True
        self._touch(old)
        logger.info("%s: rolled new segment at offset %d", self._directory, seg.base_offset)
        for listener in self._roll_listeners:
            listener(self)
        if self.on_roll is not None:
            self.on_roll(seg.base_offset)
        return seg

    # -- truncation and deletion ------------------------------------------------------------------
    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> bool:
        """Remove every record at ``offset`` and above (replication: truncating a divergent
        follower). A batch containing ``offset`` is removed whole, so the new LEO is
        ``min(offset, that batch's base offset)``. Also deletes producer snapshots beyond the
        new LEO. Returns False if ``offset`` >= LEO (nothing to do). Kafka
        ``UnifiedLog.truncateTo``."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._leo:
            return False
        now = self._clock_ms if now_ms is None else now_ms
        if offset < self._bases[0]:
            self.truncate_fully_and_start_at(offset, now_ms=now)
            return True
        if self._cleaning is not None and offset < self._cleaning.upper:
            self._cleaning.abort(f"truncated to {offset}")
        i = bisect.bisect_right(self._bases, offset)
        for seg in self._segments[i:]:
            self._size -= seg.size
            self._open_inactive.pop(seg.base_offset, None)
            seg.delete()
        del self._segments[i:]
        del self._bases[i:]
        seg = self._segments[-1]
        if not seg.active:
            self._open_inactive.pop(seg.base_offset, None)
            seg.ensure_indexes()
            seg.make_active()
        before = seg.size
        new_leo = seg.truncate_to(offset, now)
        seg.txn_index.truncate_to(new_leo)
        self._size -= before - seg.size
        self._leo = new_leo
        self._log_start_offset = min(self._log_start_offset, new_leo)
        self._recovery_point = min(self._recovery_point, new_leo)
        self._snapshots.delete_after(new_leo)
        self._dir_dirty = True
        self._invalidate()
        self._note_truncation(seg.base_offset)   # Kafka: the cleaner checkpoint drops to the active base
        logger.info("%s: truncated to offset %d", self._directory, new_leo)
        return True

    # -- aborted transactions (.txnindex) ---------------------------------------------------------
    def append_aborted_txn(self, producer_id: int, first_offset: int, last_offset: int,
                           last_stable_offset: int) -> None:
        """Record an aborted transaction whose ABORT marker is at ``last_offset``: the entry goes
        to the ``.txnindex`` of the segment holding the marker (Kafka ``LogSegment.updateTxnIndex``)."""
        self._check_open()
        seg = self._segments[max(0, bisect.bisect_right(self._bases, last_offset) - 1)]
        seg.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset))
        seg.dirty = True

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), for a read-committed
        fetch (Kafka ``LocalLog.collectAbortedTransactions``): searches the segment holding
        ``fetch_offset`` and later ones until an entry shows the search is complete."""
        self._check_open()
        i = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
        found: list[AbortedTxn] = []
        for seg in self._segments[i:]:
            entries, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            found.extend(entries)
            if complete:  # (the entry of a transaction ends up in its marker's segment, maybe far later)
                break
        return found

    def truncate_aborted_txns(self, from_offset: int) -> int:
        """Drop aborted-transaction entries whose marker is at or after ``from_offset`` (before a
        producer-state replay re-adds them); returns how many were dropped."""
        self._check_open()
        i = max(0, bisect.bisect_right(self._bases, from_offset) - 1)
        return sum(seg.txn_index.truncate_to(from_offset) for seg in self._segments[i:])

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Delete all data and snapshots and restart the log empty at ``offset`` (log start =
        LEO = recovery point = ``offset``). Kafka ``UnifiedLog.truncateFullyAndStartAt``."""
        self._check_open()
        if self._cleaning is not None:
            self._cleaning.abort(f"truncated fully to {offset}")
        self._note_truncation(offset)
        for seg in self._segments:
            seg.delete()
        seg = LogSegment.create(self._directory, offset, self._config,
                                created_ms=self._clock_ms if now_ms is None else now_ms)
        self._segments = [seg]
        self._bases = [offset]
        self._open_inactive.clear()
        self._size = 0
        self._leo = self._log_start_offset = self._recovery_point = offset
        self._pending_roll_flush = False
        self._snapshots.delete_after(-1)
        self._dir_dirty = True
        self._invalidate()
        logger.info("%s: truncated fully, restarting at offset %d", self._directory, offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` and delete the segments wholly
        below it (Kafka ``maybeIncrementLogStartOffset`` + ``deleteLogStartOffsetBreachedSegments``).
        The caller guarantees ``offset`` <= HW; ValueError if ``offset`` > LEO. Returns the new
        log start offset (unchanged if ``offset`` is not above it)."""
        self._check_open()
        if offset > self._leo:
            raise ValueError(f"offset {offset} is beyond the log end offset {self._leo}")
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._recovery_point = max(self._recovery_point, offset)
            self._invalidate()
            self._delete_old_segments(lambda s, nxt: nxt is not None and nxt.base_offset <= offset,
                                      None, self._clock_ms, "log start offset")
        return self._log_start_offset

    def apply_retention(self, now_ms: int, *, high_watermark: int | None = None) -> int:
        """Delete old segments as Kafka's ``UnifiedLog.deleteOldSegments``: those wholly below the
        log start offset; then, if ``cleanup.policy`` has ``delete``, by ``retention.bytes``
        (while total size minus the oldest segment stays >= the limit) and by ``retention.ms``
        (segment's largest record timestamp - or file mtime if none - older than
        ``now_ms - retention.ms``). Never beyond ``high_watermark`` (default LEO). If every
        segment goes, a new empty active segment is rolled first. Returns segments deleted."""
        self._check_open()
        self._clock_ms = now_ms
        n = self._delete_old_segments(
            lambda s, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset,
            high_watermark, now_ms, "log start offset")
        cfg = self._config
        if not cfg.delete_enabled:
            return n
        if 0 <= cfg.retention_bytes <= self._size:
            diff = self._size - cfg.retention_bytes

            def by_size(seg: LogSegment, _nxt) -> bool:
                nonlocal diff
                if diff - seg.size >= 0:
                    diff -= seg.size
                    return True
                return False
            n += self._delete_old_segments(by_size, high_watermark, now_ms, "retention.bytes")
        if cfg.retention_ms >= 0:
            n += self._delete_old_segments(
                lambda s, _nxt: now_ms - s.largest_timestamp() > cfg.retention_ms,
                high_watermark, now_ms, "retention.ms")
        return n

    def _delete_old_segments(self, predicate, high_watermark: int | None, now_ms: int,
                             reason: str) -> int:
        if self._cleaning is not None:
            # the cleaner is rewriting the oldest segments: deletion waits for its install (Kafka
            # runs retention of compacted logs on the cleaner thread for the same reason)
            self._deferred_deletion = True
            return 0
        bound = self._leo if high_watermark is None else high_watermark
        segs = self._segments
        n = 0
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if not (bound >= upper and predicate(seg, nxt)):
                break
            n += 1
        if n == 0:
            return 0
        if n == len(segs):
            if segs[-1].size > 0:
                self.roll(now_ms)
            else:
                n -= 1  # the empty active segment stays
            if n == 0:
                return 0
        doomed = self._segments[:n]
        self._log_start_offset = max(self._log_start_offset, self._bases[n])
        self._recovery_point = max(self._recovery_point, self._log_start_offset)
        for seg in doomed:
            self._size -= seg.size
            self._open_inactive.pop(seg.base_offset, None)
            seg.delete()
        del self._segments[:n]
        del self._bases[:n]
        self._dir_dirty = True
        self._invalidate()
        logger.info("%s: deleted %d segment(s) (%s); log start offset %d", self._directory, n,
                    reason, self._log_start_offset)
        return n

    def _invalidate(self) -> None:
        self._read_cache.clear()
        self._max_ts_cache = None

    # -- durability -------------------------------------------------------------------------------
    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync the segments holding offsets in [recovery point, ``up_to_offset``) (default:
        LEO) plus the directory if segments were created/deleted, then advance the recovery
        point to ``up_to_offset`` (Kafka ``UnifiedLog.flush``)."""
        self._check_open()
        target = self._leo if up_to_offset is None else min(up_to_offset, self._leo)
        if target <= self._recovery_point:
            return
        start = max(0, bisect.bisect_right(self._bases, self._recovery_point) - 1)
        for seg in self._segments[start:]:
            if seg.base_offset >= target:
                break
            seg.flush()
        if self._dir_dirty:
            fsync_dir(self._directory)
            self._dir_dirty = False
        self._recovery_point = target
        self._last_flush_ms = self._clock_ms
        if target >= self._bases[-1]:
            self._pending_roll_flush = False

    def flush_plan(self, up_to_offset: int | None = None) -> "FlushPlan | None":
        """The work of :meth:`flush` split for a worker thread (so fsync never blocks the thread
        that serves requests): returns a :class:`FlushPlan` whose :meth:`FlushPlan.sync` may run
        on any thread, after which :meth:`complete_flush` must be called on this log's thread to
        advance the recovery point. None if nothing needs flushing."""
        self._check_open()
        target = self._leo if up_to_offset is None else min(up_to_offset, self._leo)
        if target <= self._recovery_point:
            return None
        start = max(0, bisect.bisect_right(self._bases, self._recovery_point) - 1)
        segments = []
        paths: list[Path] = []
        for seg in self._segments[start:]:
            if seg.base_offset >= target:
                break
            taken = seg.take_sync_paths()
            if taken:
                segments.append(seg)
                paths.extend(taken)
        directory = None
        if self._dir_dirty:
            directory = self._directory
            self._dir_dirty = False
        return FlushPlan(self, target, segments, paths, directory)

    def complete_flush(self, plan: "FlushPlan") -> None:
        """Finish a flush plan: advance the recovery point if every fsync succeeded, otherwise
        mark its segments dirty again so the next flush retries them."""
        if plan.error is not None:
            for seg in plan.segments:
                seg.mark_dirty()
            if plan.directory is not None:
                self._dir_dirty = True
            logger.error("%s: fsync failed, recovery point stays at %d: %s", self._directory,
                         self._recovery_point, plan.error)
            return
        if self._closed or plan.target <= self._recovery_point:
            return
        self._recovery_point = min(plan.target, self._leo)
        self._last_flush_ms = self._clock_ms
        if plan.target >= self._bases[-1]:
            self._pending_roll_flush = False

    def due_flush_plan(self, now_ms: int) -> "FlushPlan | None":
        """:meth:`maybe_flush` as a plan: rolled segments, or everything if ``flush.ms`` elapsed."""
        self._check_open()
        self._clock_ms = now_ms
        if self._leo > self._recovery_point and now_ms - self._last_flush_ms >= self._config.flush_ms:
            self._last_flush_ms = now_ms
            return self.flush_plan()
        if self._pending_roll_flush:
            self._pending_roll_flush = False
            return self.flush_plan(self._bases[-1])
        return None

    def flush_rolled(self) -> None:
        """fsync segments completed by a roll (up to the active segment's base offset)."""
        if self._pending_roll_flush:
            self.flush(self._bases[-1])
            self._pending_roll_flush = False

    @property
    def pending_roll_flush(self) -> bool:
        """True while segments completed by a roll still await their fsync."""
        return self._pending_roll_flush

    def maybe_flush(self, now_ms: int) -> None:
        """Periodic durability: fsync rolled segments, and everything if ``flush.ms`` elapsed
        since the last flush (Kafka ``LogManager.flushDirtyLogs``)."""
        self._check_open()
        self._clock_ms = now_ms
        self.flush_rolled()
        if self._leo > self._recovery_point and now_ms - self._last_flush_ms >= self._config.flush_ms:
            self.flush()
            self._last_flush_ms = now_ms

    # -- producer snapshots -----------------------------------------------------------------------
    def write_snapshot(self, offset: int, data: bytes) -> None:
        """Store producer-state ``data`` as ``<offset>.snapshot`` atomically."""
        self._snapshots.write(offset, data)

    def latest_snapshot(self, max_offset: int) -> tuple[int, bytes] | None:
        """``(offset, data)`` of the newest snapshot at or below ``max_offset``, or None."""
        return self._snapshots.latest(max_offset)

    def delete_snapshots_after(self, offset: int) -> int:
        """Delete snapshots with offset > ``offset``."""
        return self._snapshots.delete_after(offset)

    def delete_snapshots_before(self, offset: int) -> int:
        """Delete snapshots with offset < ``offset``."""
        return self._snapshots.delete_before(offset)

    @property
    def snapshot_offsets(self) -> list[int]:
        """Offsets of the stored producer snapshots, ascending."""
        return self._snapshots.offsets

    # -- log cleaner ------------------------------------------------------------------------------
    @property
    def cleaning(self) -> "CleaningLease | None":
        """The lease of the cleaning in progress, None if the cleaner is not rewriting this log."""
        return self._cleaning

    def begin_cleaning(self, upper: int) -> "CleaningLease":
        """Mark the segments below ``upper`` (a segment base offset, at most the active segment's)
        as being rewritten by the log cleaner. Until :meth:`end_cleaning`, segment deletion
        (retention, log start offset) is deferred, and a truncation below ``upper`` - or closing
        the log - aborts the lease so the cleaner discards its result. Raises RuntimeError if a
        cleaning is already in progress."""
        self._check_open()
        if self._cleaning is not None:
            raise RuntimeError(f"{self._directory}: already being cleaned")
        if upper > self._bases[-1]:
            raise ValueError(f"cleaning bound {upper} is beyond the active segment {self._bases[-1]}")
        self._cleaning = CleaningLease(upper)
        return self._cleaning

    def end_cleaning(self, lease: "CleaningLease") -> None:
        """Release ``lease`` (after :meth:`replace_segments` or when giving up), then run the
        segment deletion deferred meanwhile (segments wholly below the log start offset)."""
        if self._cleaning is not lease:
            return
        self._cleaning = None
        if self._deferred_deletion and not self._closed:
            self._deferred_deletion = False
            self._delete_old_segments(
                lambda s, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset,
                None, self._clock_ms, "log start offset")

    def take_truncation(self) -> int | None:
        """The lowest active-segment base offset after a truncation since the last call (the
        cleaner lowers its checkpoint to it, Kafka ``maybeTruncateCheckpoint``), None if the log
        was not truncated."""
        t, self._truncated_to = self._truncated_to, None
        return t

    def _note_truncation(self, offset: int) -> None:
        self._truncated_to = offset if self._truncated_to is None else min(self._truncated_to, offset)

    def replace_segments(self, lease: "CleaningLease", groups: list["CleanedGroup"], *,
                         now_ms: int) -> bool:
        """Install cleaned segments in one call, fsyncs included (tools, tests, the cleaner's
        in-process mode): :meth:`begin_swap`, fsync the directory, :meth:`complete_swap`, fsync
        the directory, delete the old segments' files. False if the lease was aborted or the
        groups do not match the log (nothing changed, cleaned files deleted)."""
        if not self.begin_swap(lease, groups):
            return False
        fsync_dir(self._directory)
        deleted = self.complete_swap(lease, groups, now_ms=now_ms)
        if deleted is None:
            return False
        fsync_dir(self._directory)
        for path in deleted:
            unlink_quiet(path)
        return True

    def begin_swap(self, lease: "CleaningLease", groups: list["CleanedGroup"]) -> bool:
        """First half of installing cleaned segments (Kafka ``LocalLog.replaceSegments``): each
        group replaces the consecutive segments ``old_bases`` by the segment whose files
        ``<base>.{log,index,timeindex}.cleaned`` the cleaner wrote and fsynced. Renames them all
        to ``.swap`` - from here a crash completes the replacement at start-up (see
        :mod:`kcompat.log.loader`). Returns False - deleting the cleaned files, changing nothing -
        if the lease was aborted or a group no longer matches the log. The caller then fsyncs the
        directory (off this thread if it likes) before :meth:`complete_swap`. Until then an abort
        of the lease (truncation below its bound, close) deletes the swap files again, so a crash
        can never apply them to a log that changed under them."""
        try:
            ok = (self._cleaning is lease and not lease.aborted and not self._closed
                  and bool(groups) and self._check_groups(groups))
        except Exception:
            ok = False
        if not ok:
            for g in groups:
                delete_cleaned_files(self._directory, g.base)
            logger.info("%s: discarding cleaned segments (%s)", self._directory,
                        lease.reason or "log changed")
            return False
        d = self._directory
        for g in groups:
            stem = segment_name(g.base)
            for ext in ("txnindex", "index", "timeindex", "log"):
                swap = d / f"{stem}.{ext}.swap"
                try:
                    os.replace(d / f"{stem}.{ext}.cleaned", swap)
                except FileNotFoundError:
                    if ext == "txnindex":  # only segments with aborted transactions have one
                        continue
                    raise
                lease.swap_paths.append(swap)
                self._step(f"swap {g.base} {ext}")
        lease.groups = list(groups)
        return True

    def complete_swap(self, lease: "CleaningLease", groups: list["CleanedGroup"], *,
                      now_ms: int) -> list[Path] | None:
        """Second half, after the ``.swap`` renames are durable: per group, rename the old
        segments' files to ``.deleted``, the index swaps and then ``.log.swap`` to their final
        names, and swap the in-memory segment list - all in this call, so a reader on this
        thread sees the old segments or the new ones, never a mix. Returns the ``.deleted`` paths
        (unlink them, after an fsync of the directory, on any thread), or None if the lease was
        aborted since :meth:`begin_swap` (its swap files are gone). An OSError midway leaves the
        disk recoverable by a restart (treat the log dir as failed, as Kafka does)."""
        if self._cleaning is not lease or lease.aborted or self._closed or lease.groups != list(groups):
            lease.abort("install abandoned")
            return None
        lease.swap_paths.clear()   # committed: from here on only a restart may complete the swap
        d = self._directory
        deleted: list[Path] = []
        for g in groups:
            stem = segment_name(g.base)
            i = bisect.bisect_left(self._bases, g.old_bases[0])
            olds = self._segments[i:i + len(g.old_bases)]
            for seg in olds:
                self._open_inactive.pop(seg.base_offset, None)
                seg.close()
                old_stem = segment_name(seg.base_offset)
                for ext in ("index", "timeindex", "txnindex", "log"):
                    path = d / f"{old_stem}.{ext}"
                    target = d / f"{old_stem}.{ext}.deleted"
                    try:
                        os.replace(path, target)
                    except FileNotFoundError:
                        continue
                    deleted.append(target)
                    self._step(f"deleted {seg.base_offset} {ext}")
            for ext in ("txnindex", "index", "timeindex", "log"):
                try:
                    os.replace(d / f"{stem}.{ext}.swap", d / f"{stem}.{ext}")
                except FileNotFoundError:
                    if ext == "txnindex":
                        continue
                    raise
                self._step(f"renamed {g.base} {ext}")
            new = LogSegment(d, g.base, self._config, size=g.size, created_ms=now_ms,
                             index_size=g.index_size, timeindex_size=g.timeindex_size)
            self._segments[i:i + len(olds)] = [new]
            self._bases[i:i + len(olds)] = [g.base]
            self._size += g.size - sum(s.size for s in olds)
            self._step(f"installed {g.base}")
        self._dir_dirty = True
        self._invalidate()
        logger.info("%s: installed %d cleaned segment(s)", d, len(groups))
        return deleted

    def _check_groups(self, groups: list["CleanedGroup"]) -> bool:
        for g in groups:
            i = bisect.bisect_left(self._bases, g.old_bases[0])
            if (g.base != g.old_bases[0] or i + len(g.old_bases) >= len(self._segments)
                    or self._bases[i:i + len(g.old_bases)] != list(g.old_bases)
                    or g.old_bases[-1] >= self._cleaning.upper):  # type: ignore[union-attr]
                return False
            if not (self._directory / f"{segment_name(g.base)}.log.cleaned").exists():
                return False
        return True

    def _step(self, name: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(name)

    # -- lifecycle --------------------------------------------------------------------------------
    def close(self) -> None:
        """Write the active segment's final time-index entry, fsync everything unflushed, close
        every fd. Idempotent."""
        if self._closed:
            return
        if self._cleaning is not None:
            self._cleaning.abort("log closed")
        self._segments[-1].on_become_inactive()
        for seg in self._segments:
            seg.flush()
            seg.close()
        if self._dir_dirty:
            fsync_dir(self._directory)
            self._dir_dirty = False
        self._recovery_point = self._leo
        self._open_inactive.clear()
        self._read_cache.clear()
        self._closed = True

    def close_without_flush(self) -> None:
        """Close fds without fsync (the directory is about to be deleted)."""
        if self._closed:
            return
        if self._cleaning is not None:
            self._cleaning.abort("log closed")
        for seg in self._segments:
            seg.close()
        self._closed = True

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close_without_flush()
        shutil.rmtree(self._directory, ignore_errors=True)
        try:
            fsync_dir(self._directory.parent)
        except OSError:
            pass

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self._directory} is closed")


class FlushPlan:
    """fsync work for one log, prepared by :meth:`Log.flush_plan`. :meth:`sync` opens each file
    by path and fsyncs it (fsync covers the inode's dirty pages whichever descriptor is used); a
    file deleted in the meantime (retention) is skipped."""

    __slots__ = ("log", "target", "segments", "paths", "directory", "error")

    def __init__(self, log: Log, target: int, segments: list, paths: list[Path], directory: Path | None) -> None:
        self.log = log
        self.target = target
        self.segments = segments
        self.paths = paths
        self.directory = directory
        self.error: OSError | None = None

    def sync(self) -> None:
        try:
            for path in self.paths:
                fsync_path(path)
            if self.directory is not None:
                fsync_dir(self.directory)
        except OSError as e:
            self.error = e


class CleaningLease:
    """The log cleaner's claim on the segments below ``upper`` (see :meth:`Log.begin_cleaning`).
    ``aborted`` turns True (with a ``reason``) when the log is truncated below ``upper`` or
    closed; the cleaner then discards its result. ``swap_paths``: ``.swap`` files written by
    :meth:`Log.begin_swap` and not yet renamed; an abort deletes them at once."""

    __slots__ = ("upper", "aborted", "reason", "swap_paths", "groups")

    def __init__(self, upper: int) -> None:
        self.upper = upper
        self.aborted = False
        self.reason: str | None = None
        self.swap_paths: list[Path] = []
        self.groups: list | None = None

    def abort(self, reason: str) -> None:
        if not self.aborted:
            self.aborted, self.reason = True, reason
        for path in self.swap_paths:
            unlink_quiet(path)
        self.swap_paths.clear()


class CleanedGroup(NamedTuple):
    """One cleaned segment replacing the consecutive segments ``old_bases``: its base offset
    (``old_bases[0]``, as Kafka keeps the group's first base offset), ``.log`` size and index
    file sizes."""

    old_bases: tuple[int, ...]
    base: int
    size: int
    index_size: int
    timeindex_size: int


def delete_cleaned_files(directory: Path, base: int) -> None:
    """Remove ``<base>.{log,index,timeindex,txnindex}.cleaned`` (an abandoned cleaning)."""
    stem = segment_name(base)
    for ext in ("log", "index", "timeindex", "txnindex"):
        unlink_quiet(directory / f"{stem}.{ext}.cleaned")
