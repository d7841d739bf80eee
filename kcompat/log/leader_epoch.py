"""The leader-epoch cache of one partition and its ``leader-epoch-checkpoint`` file (KIP-101,
KIP-279; Kafka ``LeaderEpochFileCache`` + ``LeaderEpochCheckpointFile``).

Each entry says "leader epoch E wrote its first record at offset S"; entries are strictly
increasing in both epoch and start offset. The file, in the partition directory, is Kafka's
checkpoint format::

    0          <- version
    2          <- entry count
    0 0        <- epoch start_offset
    3 1200

Durability: :meth:`LeaderEpochFileCache.assign`, :meth:`~LeaderEpochFileCache.truncate_from_end`
and :meth:`~LeaderEpochFileCache.clear` rewrite the file at once (tmp file, fsync, rename, fsync
dir), so the file never misses an epoch the log holds and never keeps one a truncation removed -
unless the write fails (disk full): then the cache stays dirty and retries, and the log keeps its
recovery point until the file is written (see ``LeaderEpochFileCache._write``).
:meth:`~LeaderEpochFileCache.truncate_from_start` (retention, DeleteRecords) only marks the cache
dirty - the next write or :meth:`~LeaderEpochFileCache.flush_if_dirty` persists it - since stale
entries below the log start are harmless: :func:`load_for_log` trims them again at open (Kafka
flushes that case asynchronously for the same reason).
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

from kcompat.log.checkpoint import java_int, java_split, parse_kafka_checkpoint, read_kafka_checkpoint, unreadable
from kcompat.log.errors import CheckpointError, LogDirError, OffsetOutOfRangeError
from kcompat.log.fileio import atomic_write, logger
from kcompat.protocol.records import BatchHeader

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1          # Kafka OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET = -1   # Kafka OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH_OFFSET


class EpochEntry(NamedTuple):
    """Leader ``epoch`` (int32 >= 0) started writing at ``start_offset`` (>= 0)."""

    epoch: int
    start_offset: int


# -- the file ------------------------------------------------------------------------------------
def format_leader_epoch_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    """``entries`` in Kafka's ``leader-epoch-checkpoint`` format (version 0)."""
    entries = list(entries)
    lines = ["0", str(len(entries))] + [f"{e} {s}" for e, s in entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def read_leader_epoch_checkpoint(path: Path) -> list[EpochEntry] | None:
    """Entries of a checkpoint written by Kafka or kcompat; None if the file does not exist.
    An empty file, or one cut off after the version line, also reads as None (Kafka reads both as
    no entries; kcompat rebuilds the cache from the log). Raises CheckpointError on an unknown
    version, a wrong count or a malformed line (parsed as Kafka's ``CheckpointReadBuffer``, with
    ``epoch start_offset`` lines; negative values are malformed too)."""
    return read_kafka_checkpoint(path, _epoch_entry)


def parse_leader_epoch_checkpoint(data: bytes) -> list[EpochEntry]:
    """Entries of ``leader-epoch-checkpoint`` content (e.g. a copy from remote storage, KIP-405);
    content that is not a valid checkpoint gives no entries."""
    try:
        return parse_kafka_checkpoint(data, _epoch_entry, "remote leader-epoch checkpoint") or []
    except CheckpointError:
        return []


def _epoch_entry(line: str) -> EpochEntry | None:
    parts = java_split(line)
    if len(parts) != 2:
        return None
    entry = EpochEntry(java_int(parts[0], 32), java_int(parts[1], 64))
    return entry if entry.epoch >= 0 and entry.start_offset >= 0 else None


# -- the cache -----------------------------------------------------------------------------------
class LeaderEpochFileCache:
    """Epoch -> start offset of one partition, backed by ``path`` (None: memory only).

    Kafka ``LeaderEpochFileCache`` semantics; not thread-safe (the owning ``Log`` calls it from
    its thread). Entries are held as two parallel ascending lists.
    """

    def __init__(self, path: Path | None, entries: Iterable[EpochEntry] = ()) -> None:
        self.path = path
        self._write_error: str | None = None
        self._epochs: list[int] = []
        self._starts: list[int] = []
        given = list(entries)
        for e, s in given:   # through assign, as Kafka's constructor: enforces monotonicity
            self._assign(e, s)
        self._dirty = len(self._epochs) != len(given)   # conflicting entries dropped: rewrite

    # -- reading --------------------------------------------------------------------------------
    @property
    def entries(self) -> list[EpochEntry]:
        """All entries, ascending."""
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._starts)]

    @property
    def latest_epoch(self) -> int | None:
        """The largest cached epoch (the current leader's on a leader), None if empty."""
        return self._epochs[-1] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    @property
    def dirty(self) -> bool:
        """True when the in-memory entries differ from the file (after truncate_from_start)."""
        return self._dirty

    def __len__(self) -> int:
        return len(self._epochs)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (the largest entry with start <= offset), None
        if ``offset`` is below every entry. Kafka ``epochForOffset``."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` answering OffsetForLeaderEpoch for ``requested_epoch``
        (Kafka ``LeaderEpochFileCache.endOffsetFor``):

        - ``requested_epoch`` == UNDEFINED_EPOCH (-1): ``(-1, -1)``;
        - the latest cached epoch: ``(epoch, log_end_offset)`` - the epoch still being written;
        - larger than every cached epoch (or an empty cache): ``(-1, -1)``;
        - smaller than every cached epoch: ``(requested_epoch, start of the first epoch)``;
        - otherwise: the largest cached epoch <= requested, ending where the next larger
          cached epoch starts.
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs and self._epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        i = bisect.bisect_right(self._epochs, requested_epoch)   # first epoch > requested
        if i == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if i == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[i - 1], self._starts[i]

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int, log_start_offset: int,
                        log_end_offset: int) -> tuple[int, int] | None:
        """Leader side of KIP-320 truncation on Fetch v12+: ``(epoch, end_offset)`` to send back
        as ``diverging_epoch`` when a fetcher's ``last_fetched_epoch`` / ``fetch_offset`` do not
        match this log, None when they do (Kafka ``Partition.readRecords``). Raises
        OffsetOutOfRangeError if the epoch's end cannot be determined or ``fetch_offset`` is
        below ``log_start_offset`` (Kafka answers OFFSET_OUT_OF_RANGE in both cases)."""
        epoch, end = self.end_offset_for(last_fetched_epoch, log_end_offset)
        if end == UNDEFINED_EPOCH_OFFSET or epoch == UNDEFINED_EPOCH:
            raise OffsetOutOfRangeError(fetch_offset, log_start_offset, log_end_offset)
        if fetch_offset < log_start_offset:
            raise OffsetOutOfRangeError(fetch_offset, log_start_offset, log_end_offset)
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    # -- changing -------------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True (and the file rewritten) if
        that changed anything. Kafka ``assign``: nothing happens if ``epoch`` is the latest one
        and ``start_offset`` is not below its start; otherwise entries that would break
        monotonicity (epoch >= ``epoch`` or start >= ``start_offset``) are removed from the end
        first - e.g. an epoch that never wrote a record, replaced by the next one at the same
        offset. Raises ValueError for a negative epoch or offset."""
        if self._assign(epoch, start_offset):
            self._write()
            return True
        return False

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed.append(EpochEntry(self._epochs.pop(), self._starts.pop()))
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            logger.warning("%s: new epoch entry (%d, %d) removed conflicting entries %s", self.path, epoch,
                           start_offset, removed[::-1])
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def maybe_assign_from_batch(self, epoch: int, base_offset: int) -> bool:
        """The append/recovery rule (Kafka ``LogSegment.recover``): assign ``epoch`` at the
        batch's ``base_offset`` only if it is valid (>= 0) and above the latest cached epoch."""
        if epoch >= 0 and (not self._epochs or epoch > self._epochs[-1]):
            return self.assign(epoch, base_offset)
        return False

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """Remove the entries starting at or after ``end_offset`` (the log was truncated to it);
        writes the file if anything was removed. Returns the removed entries, ascending.
        Kafka ``truncateFromEnd``; a negative ``end_offset`` does nothing."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return []
        i = bisect.bisect_left(self._starts, end_offset)
        removed = self.entries[i:]
        del self._epochs[i:], self._starts[i:]
        self._write()
        return removed

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """The log start moved to ``start_offset``: drop the entries starting at or below it and
        re-add the last of them at ``start_offset`` (the epoch in force there), so an entry at
        exactly ``start_offset`` stays. Marks the cache dirty instead of writing (see the module
        doc). Returns the removed entries. Kafka ``truncateFromStart``."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0 or (i == 1 and self._starts[0] == start_offset):
            return []   # nothing below the new start (an entry exactly at it stays as it is)
        removed = self.entries[:i]
        del self._epochs[:i], self._starts[:i]
        self._epochs.insert(0, removed[-1].epoch)
        self._starts.insert(0, start_offset)
        self._dirty = True
        return removed

    def clear(self) -> None:
        """Remove every entry and write the empty file (Kafka ``clearAndFlush``)."""
        self._epochs.clear()
        self._starts.clear()
        self._write()

    def flush_if_dirty(self) -> bool:
        """Write the file if the entries changed since the last successful write (after
        :meth:`truncate_from_start`, or a write that failed). True if the file is up to date."""
        if self._dirty:
            self._write()
        return not self._dirty

    def _write(self) -> None:
        """Rewrite the file with the current entries. An OSError (ENOSPC...) is logged, not
        raised: the entries stay in memory, the cache stays :attr:`dirty` and the next write or
        :meth:`flush_if_dirty` tries again (the old file stays whole: the write is atomic). The
        owning log does not advance its recovery point, nor mark a clean shutdown, while the cache
        is dirty, so a crash meanwhile recovers the missing epochs from the batches (Kafka marks
        the log dir offline instead)."""
        self._dirty = True
        if self.path is not None:
            try:
                atomic_write(self.path, format_leader_epoch_checkpoint(self.entries))
            except OSError as e:
                if self._write_error != str(e):
                    logger.error("cannot write %s (kept in memory, retried at the next change or "
                                 "flush): %s", self.path, e)
                self._write_error = str(e)
                return
            if self._write_error is not None:
                logger.info("%s written again", self.path)
                self._write_error = None
        self._dirty = False


def check_leader_epoch_checkpoint(directory: Path) -> None:
    """Raise LogDirError if the ``leader-epoch-checkpoint`` of a partition directory is malformed
    or unreadable (what :func:`load_for_log` would refuse), before anything of the partition is
    loaded or recovered."""
    path = directory / LEADER_EPOCH_CHECKPOINT
    try:
        read_leader_epoch_checkpoint(path)
    except (CheckpointError, OSError) as e:
        raise LogDirError(_malformed(path, e)) from None


def _malformed(path: Path, e: Exception) -> str:
    return (f"{unreadable(path, e)} (Kafka fails the log dir for a malformed checkpoint: remove the "
            f"file to rebuild it from the log)")


def load_for_log(directory: Path, *, log_start_offset: int, log_end_offset: int,
                 headers_from: Callable[[int], Iterator[BatchHeader]],
                 scan_from: int | None) -> LeaderEpochFileCache:
    """The cache of a partition log being opened (Kafka ``UnifiedLog`` initialisation +
    ``LogLoader``): read ``leader-epoch-checkpoint``; if it is missing or empty, rebuild it
    from the ``partitionLeaderEpoch`` of every batch from ``log_start_offset`` (``headers_from``
    yields the batch headers from an offset) and write it. Otherwise, after an unclean shutdown
    (``scan_from`` = the recovery point, None after a clean one), the batches above the recovery
    point are scanned too, so an epoch appended but not yet checkpointed when the process died is
    added. Entries beyond ``log_end_offset`` (a truncation the file had not seen) and below
    ``log_start_offset`` are trimmed. A malformed file raises LogDirError (as Kafka, which marks
    the log dir offline)."""
    path = directory / LEADER_EPOCH_CHECKPOINT
    try:
        entries = read_leader_epoch_checkpoint(path)
    except (CheckpointError, OSError) as e:
        # Kafka (CheckpointFileWithFailureHandler.read) fails the whole log dir on a malformed
        # checkpoint; a missing or empty file is rebuilt from the batches below instead
        raise LogDirError(_malformed(path, e)) from None
    if entries is None:
        cache = LeaderEpochFileCache(None)   # no path yet: one write at the end
        if log_end_offset > log_start_offset:
            for h in headers_from(log_start_offset):
                cache.maybe_assign_from_batch(h.partition_leader_epoch, h.base_offset)
            cache.truncate_from_start(log_start_offset)
            logger.info("%s: rebuilt %s from the log: %s", directory, LEADER_EPOCH_CHECKPOINT, cache.entries)
        cache.path = path
        cache._write()
        return cache
    cache = LeaderEpochFileCache(path, entries)   # assign/truncate_from_end below write the file themselves
    cache.truncate_from_end(log_end_offset)
    if scan_from is not None:
        for h in headers_from(max(scan_from, log_start_offset)):
            cache.maybe_assign_from_batch(h.partition_leader_epoch, h.base_offset)
    cache.truncate_from_start(log_start_offset)
    cache.flush_if_dirty()
    return cache
