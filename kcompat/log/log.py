"""One topic-partition's log: segments in offset order, the last one active (Kafka's
``UnifiedLog`` + ``LocalLog``, local part only).

Offsets: ``log_start_offset`` <= readable offsets < ``log_end_offset`` (LEO, the next offset to
assign). ``recovery_point``: everything below it is fsynced; after a crash only segments from the
one containing it are scanned. Not thread-safe: call every method from one thread.
"""

from __future__ import annotations

import bisect
import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Callable

from kcompat.log.config import LogConfig
from kcompat.log.errors import LogClosedError, LogStorageError
from kcompat.log.fileio import MAX_RELATIVE_OFFSET, fsync_dir, logger
from kcompat.log.leader_epoch import LeaderEpochFileCache, load_for_log
from kcompat.log.loader import load_segments
from kcompat.log.log_flush import LogFlush
from kcompat.log.log_cleaning import CleaningLease, LogCleaning
from kcompat.log.reads import LogReads
from kcompat.log.retention import LogRetention
from kcompat.log.segment import BatchInfo, LogSegment
from kcompat.log.snapshots import SnapshotStore
from kcompat.log.txn_index import AbortedTxn
from kcompat.protocol.records import HEADER_SIZE, BatchHeader, parse_header


class Log(LogReads, LogRetention, LogCleaning, LogFlush):
    """The log of one partition in ``directory`` (``<log dir>/<topic>-<partition>``).

    Create with :meth:`open`. ``on_roll`` (optional) is called with the new active segment's base
    offset after every roll (the producer-state owner writes a snapshot there; an exception it
    raises propagates out of ``append``/``apply_retention``, the log itself stays consistent).

    The leader-epoch cache (``leader-epoch-checkpoint``, :mod:`kcompat.log.leader_epoch`) follows
    the log: a batch whose ``partitionLeaderEpoch`` is above the latest cached epoch starts that
    epoch at its base offset; truncations and log start increments trim it (Kafka ``UnifiedLog``).
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
        self._appended = 0
        self._snapshots = SnapshotStore(directory)
        self._clock_ms = now_ms
        self._last_flush_ms = now_ms
        self._pending_roll_flush = recovery_point < segments[-1].base_offset
        self._open_inactive: OrderedDict[int, LogSegment] = OrderedDict()
        self._read_cache: OrderedDict[int, tuple[LogSegment, int, BatchHeader | None]] = OrderedDict()
        self._max_ts_cache: tuple[int, int] | None = None
        self._corrupt_seen: set[tuple[int, str]] = set()
        self._txn_unwritten: set[LogSegment] = set()   # .txnindex files behind their entries
        self._dir_dirty = False
        self._closed = False
        self.on_roll: Callable[[int], None] | None = None
        self._roll_listeners: list[Callable[["Log"], None]] = []
        self._cleaning: CleaningLease | None = None
        self._deferred_deletion = False
        self._truncated_to: int | None = None
        self._fault_hook: Callable[[str], None] | None = None   # tests: simulate a crash at a step
        # an OSError every later operation fails with (:meth:`inject_io_fault`, fault-injection tests)
        self._io_fault: OSError | None = None
        self._epochs = LeaderEpochFileCache(None)   # replaced by the file-backed one in open()
        self._highest_remote_offset = -1   # tiered logs: last offset copied to remote storage

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
        log._epochs = load_for_log(directory, log_start_offset=log._log_start_offset, log_end_offset=log._leo,
                                   headers_from=log.iter_batch_headers,
                                   scan_from=None if clean_shutdown else r.recovery_point)
        if log._snapshots.delete_after(log._leo):
            logger.info("%s: deleted producer snapshots beyond the log end %d", directory, log._leo)
        if r.txn_index_lost_from is not None and log._snapshots.delete_after(r.txn_index_lost_from):
            # the producer-state replay then starts at or below the segment whose aborted-transaction
            # index was damaged, and writes its entries again
            logger.info("%s: deleted producer snapshots beyond offset %d to rebuild the aborted-"
                        "transaction index", directory, r.txn_index_lost_from)
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
    def local_log_start_offset(self) -> int:
        """First offset readable from the local segments (KIP-405 ``localLogStartOffset``): the
        log start offset, or on a tiered log the first local segment's base offset once older
        segments exist only in remote storage."""
        return max(self._log_start_offset, self._bases[0])

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """Last offset copied to remote storage (-1 if none or not tiered; KIP-405)."""
        return self._highest_remote_offset

    def update_highest_offset_in_remote_storage(self, offset: int) -> None:
        """Record that every offset up to ``offset`` is in remote storage (the remote log manager
        calls this after a copy, or a follower from the remote log metadata). Local retention of
        a tiered log deletes only segments at or below it. Ignored on a log that is not tiered."""
        if self._config.remote_storage_enable:
            self._highest_remote_offset = offset

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
    def bytes_appended(self) -> int:
        """Bytes appended since this Log was opened: only ever grows, unlike :attr:`size_in_bytes`,
        which cleaning, retention and truncation shrink (a waiting fetch measures new data by it)."""
        return self._appended

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

    # -- leader epochs ----------------------------------------------------------------------------
    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        """Epoch -> start offset of this log (``assign`` it at the LEO on becoming leader, as
        Kafka's ``Partition.makeLeader`` does)."""
        return self._epochs

    @property
    def latest_epoch(self) -> int | None:
        """The largest leader epoch in the cache, None if it is empty (Kafka ``latestEpoch``)."""
        return self._epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch, ``(-1, -1)`` when undefined; see
        :meth:`LeaderEpochFileCache.end_offset_for` (the LEO ends the latest epoch)."""
        return self._epochs.end_offset_for(epoch, self._leo)

    # -- append -----------------------------------------------------------------------------------
    def append(self, batches, *, last_offset: int, max_timestamp: int,
               offset_of_max_timestamp: int, now_ms: int, allow_gap: bool = False) -> None:
        """Append complete RecordBatch v2 bytes whose offsets the caller assigned.

        ``batches``: bytes-like with one or more whole batches, the first base offset equal to
        ``log_end_offset``; ``last_offset``: last offset of the last batch; ``max_timestamp`` /
        ``offset_of_max_timestamp``: largest record timestamp (ms) and the first record carrying
        it (-1 if the caller does not know it without decoding). ``allow_gap``: the first base
        offset may also be above the LEO (a follower copying a compacted leader, Kafka
        ``appendAsFollower``). Rolls first if needed (Kafka ``UnifiedLog.maybeRoll``), writes
        with pwrite (in the page cache on return), fsyncs once ``flush.messages`` offsets are
        unflushed, and starts a new leader epoch for each batch whose epoch is above the latest
        (if writing ``leader-epoch-checkpoint`` fails, the cache keeps the epoch in memory and
        writes it again later: see :class:`LeaderEpochFileCache`).

        Raises ValueError on misframed input or offsets not following the LEO; LogStorageError
        (an OSError: ENOSPC, EIO...) if the roll or the write fails - the log is then exactly as
        before the call (the segment is cut back, a half-made roll undone), so the append may be
        retried, e.g. once disk space is freed. A failed fsync of ``flush.messages`` is logged,
        not raised: the data is appended, the recovery point stays.
        """
        self._check_open()
        mv = memoryview(batches).cast("B")
        n = mv.nbytes
        if n < HEADER_SIZE:
            raise ValueError(f"{n} bytes cannot hold a record batch")
        h = parse_header(mv, 0)
        if h.base_offset < self._leo or (h.base_offset > self._leo and not allow_gap):
            raise ValueError(f"first batch base offset {h.base_offset} != log end offset {self._leo}")
        infos: list[BatchInfo] | None = None
        epochs = [(h.partition_leader_epoch, h.base_offset)]
        if h.size == n:
            if h.last_offset != last_offset:
                raise ValueError(f"last_offset {last_offset} != batch last offset {h.last_offset}")
        elif h.size > n:
            raise ValueError(f"incomplete batch: {h.size} bytes announced, {n} given")
        else:
            infos, epochs = self._frame(mv, n, last_offset)
        if last_offset - h.base_offset > MAX_RELATIVE_OFFSET:
            raise ValueError(f"offsets {h.base_offset}-{last_offset} span more than one segment can index")
        self._clock_ms = now_ms
        seg = self._segments[-1]
        reason = seg.should_roll(n, last_offset, max_timestamp, now_ms)
        if reason is None and last_offset - seg.base_offset > MAX_RELATIVE_OFFSET:
            reason = "offset overflow"  # an empty active segment far below a follower's first offset
        if reason is not None:
            logger.debug("%s: rolling segment %d (%s)", self._directory, seg.base_offset, reason)
            seg = self.roll(now_ms, at=h.base_offset)
        try:
            seg.append(mv, infos, last_offset, max_timestamp, offset_of_max_timestamp)
        except OSError as e:
            raise LogStorageError(f"appending offsets {h.base_offset}-{last_offset} to {seg.log_path}", e) from e
        self._leo = last_offset + 1
        self._size += n
        self._appended += n
        if self._max_ts_cache is not None and max_timestamp > self._max_ts_cache[0]:
            # an unknown (-1) exact offset is found by decoding when next asked
            self._max_ts_cache = ((max_timestamp, offset_of_max_timestamp) if offset_of_max_timestamp >= 0
                                  else None)
        for epoch, base in epochs:
            self._epochs.maybe_assign_from_batch(epoch, base)
        if self._leo - self._recovery_point >= self._config.flush_messages:
            try:
                self.flush()
            except OSError as e:   # the data is appended: report the append, retry the fsync later
                logger.error("%s: fsync failed, recovery point stays at %d: %s", self._directory,
                             self._recovery_point, e)

    @staticmethod
    def _frame(mv: memoryview, n: int, last_offset: int) -> tuple[list[BatchInfo], list[tuple[int, int]]]:
        """Batch infos of a multi-batch append, and ``(epoch, base offset)`` where the
        partition leader epoch changes."""
        infos: list[BatchInfo] = []
        epochs: list[tuple[int, int]] = []
        pos = 0
        next_offset = None
        while pos < n:
            h = parse_header(mv, pos)
            if pos + h.size > n:
                raise ValueError(f"incomplete batch at byte {pos}")
            if next_offset is not None and h.base_offset < next_offset:
                raise ValueError(f"batch offsets are not increasing at byte {pos}")
            infos.append((pos, h.size, h.last_offset, h.max_timestamp))
            if not epochs or epochs[-1][0] != h.partition_leader_epoch:
                epochs.append((h.partition_leader_epoch, h.base_offset))
            next_offset = h.next_offset
            pos += h.size
        if infos[-1][2] != last_offset:
            raise ValueError(f"last_offset {last_offset} != last batch's {infos[-1][2]}")
        return infos, epochs

    def roll(self, now_ms: int | None = None, at: int | None = None) -> LogSegment:
        """Start a new active segment at the LEO, or at ``at`` if that is above it (a follower's
        next batch after a gap, so that its offsets fit the segment's 32-bit relative offsets;
        Kafka ``UnifiedLog.roll(expectedNextOffset)``). No-op if the active segment is empty and
        already starts there; an empty one below ``at`` is replaced. The old one gets its final
        time-index entry; it is fsynced by the next ``maybe_flush`` /
        ``flush_rolled`` (Kafka schedules that flush asynchronously too). Raises LogStorageError
        if the new segment's files or the final time-index entry cannot be written (the roll is
        then undone), or if ``on_roll`` fails with an OSError (the roll is done)."""
        self._check_open()
        old = self._segments[-1]
        base = self._leo if at is None else max(at, self._leo)
        if old.size == 0 and old.base_offset == base:
            return old
        now = self._clock_ms if now_ms is None else now_ms
        try:
            seg = LogSegment.create(self._directory, base, self._config, created_ms=now)
        except OSError as e:
            raise LogStorageError(f"rolling a new segment at offset {base} in {self._directory}", e) from e
        if old.size == 0:
            old.delete()
            self._segments[-1] = seg
            self._bases[-1] = base
            self._dir_dirty = True
            logger.info("%s: empty active segment %d replaced by one at offset %d", self._directory,
                        old.base_offset, base)
            return seg
        try:
            old.on_become_inactive()
        except OSError as e:
            seg.delete()
            raise LogStorageError(f"rolling a new segment at offset {base} in {self._directory}", e) from e
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self._dir_dirty = True
        self._pending_roll_flush = True
        self._touch(old)
        logger.info("%s: rolled new segment at offset %d", self._directory, seg.base_offset)
        for listener in self._roll_listeners:
            listener(self)
        if self.on_roll is not None:
            try:
                self.on_roll(seg.base_offset)
            except LogStorageError:
                raise
            except OSError as e:
                raise LogStorageError(f"writing the producer snapshot at offset {seg.base_offset} in "
                                      f"{self._directory}", e) from e
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
        self._epochs.truncate_from_end(new_leo)
        self._dir_dirty = True
        self._invalidate()
        self._note_truncation(seg.base_offset)   # Kafka: the cleaner checkpoint drops to the active base
        logger.info("%s: truncated to offset %d", self._directory, new_leo)
        return True

    # -- aborted transactions (.txnindex) ---------------------------------------------------------
    def append_aborted_txn(self, producer_id: int, first_offset: int, last_offset: int,
                           last_stable_offset: int) -> None:
        """Record an aborted transaction whose ABORT marker is at ``last_offset``: the entry goes
        to the ``.txnindex`` of the segment holding the marker (Kafka ``LogSegment.updateTxnIndex``).
        If the file cannot be written (disk full) the entry is kept in memory and written again
        at the next flush, snapshot or close; until then no producer snapshot is written, so that
        a restart replays the marker and rebuilds the entry (Kafka marks the log dir offline)."""
        self._check_open()
        seg = self._segments[max(0, bisect.bisect_right(self._bases, last_offset) - 1)]
        if not seg.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset)):
            self._txn_unwritten.add(seg)   # see write_snapshot: the replay must be able to rebuild it
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

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None,
                                    log_start_offset: int | None = None) -> None:
        """Delete all data and snapshots and restart the log empty at ``offset`` (log start =
        LEO = recovery point = ``offset``). Kafka ``UnifiedLog.truncateFullyAndStartAt``. On a
        tiered log ``log_start_offset`` (<= ``offset``) may keep an earlier log start: the
        offsets below ``offset`` are in remote storage (KIP-405)."""
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
        if log_start_offset is not None and self._config.remote_storage_enable:
            self._log_start_offset = min(log_start_offset, offset)
        self._pending_roll_flush = False
        self._snapshots.delete_after(-1)
        self._epochs.clear()
        self._dir_dirty = True
        self._invalidate()
        logger.info("%s: truncated fully, restarting at offset %d", self._directory, offset)

    def _invalidate(self) -> None:
        self._read_cache.clear()
        self._max_ts_cache = None

    # -- producer snapshots -----------------------------------------------------------------------
    def write_snapshot(self, offset: int, data: bytes) -> None:
        """Store producer-state ``data`` as ``<offset>.snapshot`` atomically. Skipped (logged)
        while an aborted-transaction entry is only in memory: a snapshot beyond its marker would
        let a restart skip the replay that rebuilds it."""
        if self._txn_unwritten and not self.persist_txn_indexes():
            logger.warning("%s: producer snapshot at %d not written: an aborted-transaction index could "
                           "not be written yet", self._directory, offset)
            return
        self._snapshots.write(offset, data)

    def persist_txn_indexes(self) -> bool:
        """Write the ``.txnindex`` files that hold entries only in memory; True if none is left."""
        for seg in list(self._txn_unwritten):
            if seg.txn_index.persist():
                self._txn_unwritten.discard(seg)
        return not self._txn_unwritten

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

    # -- lifecycle --------------------------------------------------------------------------------
    def close(self) -> bool:
        """Write the active segment's final time-index entry, fsync everything unflushed, close
        every fd. Idempotent. Returns True if everything was made durable (the recovery point is
        then the LEO); False if a write or fsync failed (logged; e.g. a full disk): the recovery
        point stays and the log must not be marked as cleanly shut down. The fds are closed
        either way."""
        if self._closed:
            return True
        if self._cleaning is not None:
            self._cleaning.abort("log closed")
        ok = True

        def attempt(what: str, fn) -> None:
            nonlocal ok
            try:
                fn()
            except OSError as e:
                ok = False
                logger.error("%s: %s failed at close: %s", self._directory, what, e)
        attempt("the final time-index entry", self._segments[-1].on_become_inactive)
        for seg in self._segments:
            attempt(f"fsync of segment {seg.base_offset}", seg.flush)
            attempt(f"closing segment {seg.base_offset}", lambda seg=seg: seg.close(final_entry=False))
        if self._dir_dirty:
            attempt("fsync of the directory", lambda: fsync_dir(self._directory))
        ok = self._epochs.flush_if_dirty() and ok
        ok = self.persist_txn_indexes() and ok
        if ok:
            self._dir_dirty = False
            self._recovery_point = self._leo
        self._open_inactive.clear()
        self._read_cache.clear()
        self._closed = True
        return ok

    def close_without_flush(self) -> None:
        """Close fds without fsync (the directory is about to be deleted)."""
        if self._closed:
            return
        if self._cleaning is not None:
            self._cleaning.abort("log closed")
        for seg in self._segments:
            seg.close(final_entry=False)   # writes nothing: works on a full disk too
        self._closed = True

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close_without_flush()
        shutil.rmtree(self._directory, ignore_errors=True)
        try:
            fsync_dir(self._directory.parent)
        except OSError:
            pass

    def inject_io_fault(self, error: OSError) -> None:
        """Make every later append, read, flush or truncation fail with LogStorageError caused
        by ``error`` (e.g. EIO), as a failing disk would: the fault-injection hook of the log-dir
        failure tests (:meth:`kcompat.log.LogManager.poll_injected_faults`), never set otherwise."""
        self._io_fault = error

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self._directory} is closed")
        if self._io_fault is not None:
            raise LogStorageError(f"I/O on {self._directory}", self._io_fault)
