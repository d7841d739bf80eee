"""Retention and the log start offset of :class:`~kcompat.log.log.Log`: DeleteRecords, time and size
retention, and the deletion of the oldest segments they allow (Kafka ``UnifiedLog``
``deleteOldSegments`` / ``maybeIncrementLogStartOffset``). Split out of ``log.py`` by
responsibility, like :mod:`kcompat.log.reads`; ``LogRetention`` is only used as a base of ``Log``
and relies on its attributes (declared below).
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from kcompat.log.config import LogConfig
from kcompat.log.fileio import logger
from kcompat.log.leader_epoch import LeaderEpochFileCache
from kcompat.log.segment import LogSegment

if TYPE_CHECKING:
    from kcompat.log.log_cleaning import CleaningLease


class LogRetention:
    """Segment deletion below the log start offset and by retention, mixed into ``Log``."""

    _directory: Path
    _config: LogConfig
    _segments: list[LogSegment]
    _bases: list[int]
    _size: int
    _leo: int
    _log_start_offset: int
    _recovery_point: int
    _clock_ms: int
    _dir_dirty: bool
    _deferred_deletion: bool
    _epochs: LeaderEpochFileCache
    _open_inactive: OrderedDict[int, LogSegment]
    _cleaning: "CleaningLease | None"
    _highest_remote_offset: int

    def _check_open(self) -> None:  # pragma: no cover - overridden by Log
        raise NotImplementedError

    def _invalidate(self) -> None:  # pragma: no cover - overridden by Log
        raise NotImplementedError

    def roll(self, now_ms: int | None = None, at: int | None = None) -> LogSegment:  # pragma: no cover
        raise NotImplementedError

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
            self._epochs.truncate_from_start(offset)
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
        segment goes, a new empty active segment is rolled first. Returns segments deleted.

        A tiered log (``remote.storage.enable``, KIP-405) applies ``local.retention.bytes/ms``
        instead and deletes only segments already in remote storage (wholly at or below
        :attr:`highest_offset_in_remote_storage`); that moves only the local log start offset
        (the remote log manager applies the total retention to remote segments and raises the
        log start offset, Kafka ``UnifiedLog.deleteOldSegments`` with remote storage)."""
        self._check_open()
        self._clock_ms = now_ms
        n = self._delete_old_segments(
            lambda s, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset,
            high_watermark, now_ms, "log start offset")
        cfg = self._config
        if not cfg.delete_enabled:
            return n
        tiered = cfg.remote_storage_enable
        retention_bytes = cfg.effective_local_retention_bytes if tiered else cfg.retention_bytes
        retention_ms = cfg.effective_local_retention_ms if tiered else cfg.retention_ms
        if tiered:
            remote_end = self._highest_remote_offset + 1
            # a segment whose offsets are all in remote storage (its successor starts at or below)
            bound = remote_end if high_watermark is None else min(high_watermark, remote_end)
            high_watermark = bound
        if 0 <= retention_bytes <= self._size:
            diff = self._size - retention_bytes

            def by_size(seg: LogSegment, _nxt) -> bool:
                nonlocal diff
                if diff - seg.size >= 0:
                    diff -= seg.size
                    return True
                return False
            n += self._delete_old_segments(by_size, high_watermark, now_ms,
                                           "local.retention.bytes" if tiered else "retention.bytes", local_only=tiered)
        if retention_ms >= 0:
            n += self._delete_old_segments(
                lambda s, _nxt: (now_ms - s.largest_timestamp() > retention_ms
                                 and now_ms - s.verified_largest_timestamp() > retention_ms),
                high_watermark, now_ms, "local.retention.ms" if tiered else "retention.ms", local_only=tiered)
        return n

    def _delete_old_segments(self, predicate, high_watermark: int | None, now_ms: int,
                             reason: str, *, local_only: bool = False) -> int:
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
        if not local_only:   # a tiered log keeps the deleted offsets readable from remote storage
            self._log_start_offset = max(self._log_start_offset, self._bases[n])
            self._epochs.truncate_from_start(self._log_start_offset)
        self._recovery_point = max(self._recovery_point, self._bases[n])
        for seg in doomed:
            self._size -= seg.size
            self._open_inactive.pop(seg.base_offset, None)
            seg.delete()
        del self._segments[:n]
        del self._bases[:n]
        self._dir_dirty = True
        self._invalidate()
        logger.info("%s: deleted %d segment(s) (%s); log start offset %d, local log start offset %d",
                    self._directory, n, reason, self._log_start_offset, self._bases[0])
        return n
