"""The log cleaner's side of :class:`~kcompat.log.log.Log`: leases on the segments being
compacted and the crash-safe installation of cleaned segments (Kafka ``LocalLog.replaceSegments``
with ``.cleaned`` -> ``.swap`` -> final names). Split out of ``log.py`` by responsibility, like
:mod:`kcompat.log.reads`; ``LogCleaning`` is only used as a base of ``Log`` and relies on its
attributes (declared below).
"""

from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from pathlib import Path
from typing import Callable, NamedTuple

from kcompat.log.config import LogConfig
from kcompat.log.fileio import fsync_dir, logger, unlink_quiet
from kcompat.log.segment import LogSegment, segment_name


class LogCleaning:
    """Cleaner leases and segment swaps, mixed into ``Log``."""

    _directory: Path
    _config: LogConfig
    _segments: list[LogSegment]
    _bases: list[int]
    _size: int
    _log_start_offset: int
    _clock_ms: int
    _closed: bool
    _dir_dirty: bool
    _cleaning: "CleaningLease | None"
    _deferred_deletion: bool
    _truncated_to: int | None
    _open_inactive: OrderedDict[int, LogSegment]
    _fault_hook: Callable[[str], None] | None

    def _check_open(self) -> None:  # pragma: no cover - overridden by Log
        raise NotImplementedError

    def _invalidate(self) -> None:  # pragma: no cover - overridden by Log
        raise NotImplementedError

    def _delete_old_segments(self, predicate, high_watermark, now_ms, reason) -> int:  # pragma: no cover
        raise NotImplementedError

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
