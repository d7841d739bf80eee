"""Durability of :class:`~kcompat.log.log.Log`: fsync up to an offset and advance the recovery
point (Kafka ``UnifiedLog.flush``, ``LogManager.flushDirtyLogs``), directly or as a
:class:`FlushPlan` whose fsyncs run on a worker thread. Split out of ``log.py`` by
responsibility, like :mod:`kcompat.log.reads`; ``LogFlush`` is only used as a base of ``Log`` and
relies on its attributes (declared below).
"""

from __future__ import annotations

import bisect
from pathlib import Path

from kcompat.log.config import LogConfig
from kcompat.log.fileio import fsync_dir, fsync_path, logger
from kcompat.log.leader_epoch import LeaderEpochFileCache
from kcompat.log.segment import LogSegment


class LogFlush:
    """fsync and recovery-point bookkeeping, mixed into ``Log``."""

    _directory: Path
    _config: LogConfig
    _segments: list[LogSegment]
    _bases: list[int]
    _leo: int
    _recovery_point: int
    _clock_ms: int
    _last_flush_ms: int
    _pending_roll_flush: bool
    _dir_dirty: bool
    _closed: bool
    _epochs: "LeaderEpochFileCache"

    def _check_open(self) -> None:  # pragma: no cover - overridden by Log
        raise NotImplementedError

    def persist_txn_indexes(self) -> bool:  # pragma: no cover - overridden by Log
        raise NotImplementedError

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync the segments holding offsets in [recovery point, ``up_to_offset``) (default:
        LEO) plus the directory if segments were created/deleted, then advance the recovery
        point to ``up_to_offset`` (Kafka ``UnifiedLog.flush``) - unless ``leader-epoch-checkpoint``
        has changes that cannot be written (disk full): then the recovery point stays, so that a
        recovery after a crash re-reads the epochs from the batches. Raises OSError if an fsync
        fails."""
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
        if not self._epochs.flush_if_dirty():
            return   # an epoch of the flushed range may be missing from the file: keep the recovery point
        self.persist_txn_indexes()
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
        if not self._epochs.flush_if_dirty():
            return   # recovery after a crash must still see the epochs the file is missing
        self.persist_txn_indexes()
        self._recovery_point = min(plan.target, self._leo)
        self._last_flush_ms = self._clock_ms
        if plan.target >= self._bases[-1]:
            self._pending_roll_flush = False

    def due_flush_plan(self, now_ms: int) -> "FlushPlan | None":
        """:meth:`maybe_flush` as a plan: rolled segments, or everything if ``flush.ms`` elapsed."""
        self._check_open()
        self._clock_ms = now_ms
        if self._leo > self._recovery_point and not 0 <= now_ms - self._last_flush_ms < self._config.flush_ms:
            self._last_flush_ms = now_ms   # (a clock that stepped back counts as elapsed)
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
        if self._leo > self._recovery_point and not 0 <= now_ms - self._last_flush_ms < self._config.flush_ms:
            self.flush()
            self._last_flush_ms = now_ms


class FlushPlan:
    """fsync work for one log, prepared by :meth:`Log.flush_plan`. :meth:`sync` opens each file
    by path and fsyncs it (fsync covers the inode's dirty pages whichever descriptor is used); a
    file deleted in the meantime (retention) is skipped."""

    __slots__ = ("log", "target", "segments", "paths", "directory", "error")

    def __init__(self, log, target: int, segments: list, paths: list[Path], directory: Path | None) -> None:
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
