"""The replicated log the Raft core drives, as an interface, and an in-memory implementation.

Entries are RecordBatch v2 bytes kept opaque except for their 61-byte header: the base offset and
``partitionLeaderEpoch`` (both outside the CRC) are stamped by the leader on append, and every batch
carries the epoch of the leader that appended it. A leader-epoch cache (epoch -> first offset)
answers "where did epoch E end", which is how a leader tells a follower where their logs diverge
(Kafka ``ReplicatedLog`` / ``KafkaMetadataLog`` and ``LeaderEpochFileCache``, KIP-595 and KIP-101).

Snapshots (KIP-630) are named by ``SnapshotId(end_offset, epoch)``: they contain the state of every
record below ``end_offset``; ``epoch`` is the epoch of the record at ``end_offset - 1``. Once a
snapshot exists the log may start at its end offset.

Durability contract (what survives a crash): batches up to ``flushed_offset``, the snapshots, and the
log start offset. The core calls :meth:`RaftLog.flush` before it returns from any call that
appended, so nothing it has acted on is ever lost. The high watermark is not durable.
"""

from __future__ import annotations

import bisect
from typing import Iterator, Protocol

from kcompat.kraft.raft.types import OffsetAndEpoch, RaftInvariantError, SnapshotId
from kcompat.protocol import records as rb


class RaftLog(Protocol):
    """What the Raft core needs from the ``__cluster_metadata-0`` log (Kafka ``ReplicatedLog``)."""

    @property
    def start_offset(self) -> int:
        """Log start offset: the first offset still in the log (a snapshot covers everything below)."""

    @property
    def end_offset(self) -> int:
        """Log end offset (LEO): the offset the next appended record gets."""

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last batch, or of the snapshot at the log start when the log is empty, or 0."""

    @property
    def flushed_offset(self) -> int:
        """Every record below this offset is durable."""

    def append_as_leader(self, records: bytes, epoch: int) -> tuple[int, int]:
        """Append one or more batches at the end, stamping base offsets and ``epoch``; returns the
        (first, last) offset appended."""

    def append_as_follower(self, records: bytes) -> tuple[int, int] | None:
        """Append batches copied from the leader; they must start at ``end_offset``. Returns the
        (first, last) offset appended, None for no batches."""

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the batch starting at ``offset`` (a batch boundary), at least one batch
        even if larger than ``max_bytes``; b"" at the end of the log."""

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= ``epoch`` in the log and the offset where it ended (Kafka
        ``endOffsetForEpoch``); ``(-1, -1)`` when the answer is hidden inside a snapshot."""

    def epoch_for_offset(self, offset: int) -> int:
        """Epoch of the batch holding ``offset`` (start_offset - 1 maps to the snapshot epoch)."""

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or above ``offset`` (a batch boundary)."""

    def flush(self) -> None:
        """Make everything appended so far durable."""

    def update_high_watermark(self, offset: int) -> None:
        """Inform the log of the committed offset (volatile; Kafka ``updateHighWatermark``)."""

    def latest_snapshot_id(self) -> SnapshotId | None: ...

    def earliest_snapshot_id(self) -> SnapshotId | None: ...

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store a complete snapshot durably (Kafka writes ``<offset>-<epoch>.checkpoint``)."""

    def read_snapshot(self, snapshot_id: SnapshotId, position: int = 0,
                      max_bytes: int | None = None) -> bytes | None:
        """Bytes of a stored snapshot from ``position`` (all of it by default); None if absent."""

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None: ...

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        """Advance the log start to ``snapshot_id.offset`` (deleting the log and older snapshots
        below it); False if the snapshot is beyond the log end."""

    def truncate_fully_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Drop the whole log so that it starts and ends at the snapshot (a follower that downloaded
        a snapshot past its own log, Kafka ``truncateToLatestSnapshot``)."""


class LeaderEpochCache:
    """Epoch -> start offset of the first batch of that epoch, in increasing order of both
    (Kafka ``LeaderEpochFileCache``)."""

    __slots__ = ("epochs", "starts")

    def __init__(self) -> None:
        self.epochs: list[int] = []
        self.starts: list[int] = []

    def assign(self, epoch: int, start_offset: int) -> None:
        if self.epochs:
            last = self.epochs[-1]
            if epoch == last:
                return
            if epoch < last or start_offset < self.starts[-1]:
                raise RaftInvariantError(
                    f"epoch {epoch} at {start_offset} after epoch {last} at {self.starts[-1]}")
        self.epochs.append(epoch)
        self.starts.append(start_offset)

    @property
    def latest_epoch(self) -> int | None:
        return self.epochs[-1] if self.epochs else None

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset``."""
        i = bisect.bisect_left(self.starts, end_offset)
        del self.epochs[i:]
        del self.starts[i:]

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget what lies below ``start_offset``, keeping the epoch in force at it."""
        i = bisect.bisect_right(self.starts, start_offset) - 1
        if i > 0:
            del self.epochs[:i]
            del self.starts[:i]
        if self.starts and self.starts[0] < start_offset:
            self.starts[0] = start_offset

    def clear(self) -> None:
        self.epochs.clear()
        self.starts.clear()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> OffsetAndEpoch | None:
        """Largest cached epoch <= ``epoch`` and where it ends; None if all cached epochs are larger."""
        i = bisect.bisect_right(self.epochs, epoch) - 1
        if i < 0:
            return None
        end = self.starts[i + 1] if i + 1 < len(self.starts) else log_end_offset
        return OffsetAndEpoch(end, self.epochs[i])

    def epoch_for(self, offset: int) -> int | None:
        i = bisect.bisect_right(self.starts, offset) - 1
        return self.epochs[i] if i >= 0 else None


class MemoryRaftLog:
    """An in-memory :class:`RaftLog` for tests and the simulation. :meth:`crash` drops whatever was
    not flushed, like a process killed with unwritten page cache."""

    def __init__(self) -> None:
        self._bases: list[int] = []       # base offset of each batch
        self._lasts: list[int] = []       # last offset of each batch
        self._epochs: list[int] = []      # partition leader epoch of each batch
        self._data: list[bytes] = []
        self._start = 0
        self._end = 0
        self._flushed = 0
        self._hw = 0
        self._cache = LeaderEpochCache()
        self._snapshots: dict[SnapshotId, bytes] = {}
        self._start_epoch = 0  # epoch of the record at start_offset - 1

    # -------------------------------------------------------------------------------- offsets
    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._end

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def last_fetched_epoch(self) -> int:
        latest = self._cache.latest_epoch
        return latest if latest is not None else self._start_epoch

    # -------------------------------------------------------------------------------- appends
    def append_as_leader(self, records: bytes, epoch: int) -> tuple[int, int]:
        buf = bytearray(records)
        first = self._end
        count = 0
        for pos, header in rb.iter_batches(buf):
            rb.set_base_offset(buf, pos, self._end)
            rb.set_partition_leader_epoch(buf, pos, epoch)
            self._add(self._end, self._end + header.last_offset_delta, epoch,
                      bytes(buf[pos:pos + header.size]))
            count += header.size
        if count != len(buf) or count == 0:
            raise ValueError("records must be one or more complete record batches")
        return first, self._end - 1

    def append_as_follower(self, records: bytes) -> tuple[int, int] | None:
        view = memoryview(records)
        first = self._end
        count = 0
        for pos, header in rb.iter_batches(view):
            if header.base_offset != self._end:
                raise RaftInvariantError(
                    f"follower append at {header.base_offset}, log end is {self._end}")
            self._add(header.base_offset, header.last_offset, header.partition_leader_epoch,
                      bytes(view[pos:pos + header.size]))
            count += 1
        return (first, self._end - 1) if count else None

    def _add(self, base: int, last: int, epoch: int, data: bytes) -> None:
        if epoch < self.last_fetched_epoch:
            raise RaftInvariantError(f"batch epoch {epoch} below last epoch {self.last_fetched_epoch}")
        self._cache.assign(epoch, base)
        self._bases.append(base)
        self._lasts.append(last)
        self._epochs.append(epoch)
        self._data.append(data)
        self._end = last + 1

    # -------------------------------------------------------------------------------- reads
    def _index_of(self, offset: int) -> int:
        i = bisect.bisect_left(self._bases, offset)
        if i >= len(self._bases) or self._bases[i] != offset:
            raise RaftInvariantError(f"offset {offset} is not a batch boundary "
                                     f"(log {self._start}..{self._end})")
        return i

    def read(self, offset: int, max_bytes: int) -> bytes:
        if offset == self._end:
            return b""
        if offset < self._start or offset > self._end:
            raise RaftInvariantError(f"read at {offset} outside log {self._start}..{self._end}")
        i = self._index_of(offset)
        out = [self._data[i]]
        size = len(self._data[i])
        for j in range(i + 1, len(self._data)):
            size += len(self._data[j])
            if size > max_bytes:
                break
            out.append(self._data[j])
        return b"".join(out)

    def batches(self) -> Iterator[tuple[int, int, int, bytes]]:
        """(base, last, epoch, data) of every batch, for tests and invariant checks."""
        return zip(self._bases, self._lasts, self._epochs, self._data)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found = self._cache.end_offset_for(epoch, self._end)
        if found is not None:
            return found
        # every batch in the log has a larger epoch: the epoch asked for ended at the log start,
        # where the snapshot's epoch is the last one known below it
        if self._start_epoch <= epoch and (self._start > 0 or self._snapshots):
            return OffsetAndEpoch(self._start, self._start_epoch)
        if self._start == 0:
            return OffsetAndEpoch(0, 0)
        return OffsetAndEpoch(-1, -1)

    def epoch_for_offset(self, offset: int) -> int:
        if offset == self._start - 1:
            return self._start_epoch
        if offset < self._start or offset >= self._end:
            raise RaftInvariantError(f"offset {offset} outside log {self._start}..{self._end}")
        epoch = self._cache.epoch_for(offset)
        assert epoch is not None
        return epoch

    # -------------------------------------------------------------------------------- truncation
    def truncate_to(self, offset: int) -> None:
        if offset >= self._end:
            return
        if offset < self._hw:
            raise RaftInvariantError(f"truncation to {offset} below the high watermark {self._hw}")
        if offset < self._start:
            raise RaftInvariantError(f"truncation to {offset} below the log start {self._start}")
        i = bisect.bisect_left(self._bases, offset)
        if i >= len(self._bases) or self._bases[i] != offset:
            raise RaftInvariantError(f"truncation offset {offset} inside a batch")
        del self._bases[i:], self._lasts[i:], self._epochs[i:], self._data[i:]
        self._end = offset
        self._flushed = min(self._flushed, offset)
        self._cache.truncate_from_end(offset)

    def flush(self) -> None:
        self._flushed = self._end

    def update_high_watermark(self, offset: int) -> None:
        self._hw = offset

    # -------------------------------------------------------------------------------- snapshots
    def latest_snapshot_id(self) -> SnapshotId | None:
        return max(self._snapshots) if self._snapshots else None

    def earliest_snapshot_id(self) -> SnapshotId | None:
        return min(self._snapshots) if self._snapshots else None

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._snapshots[SnapshotId(*snapshot_id)] = bytes(data)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int = 0,
                      max_bytes: int | None = None) -> bytes | None:
        data = self._snapshots.get(SnapshotId(*snapshot_id))
        if data is None:
            return None
        end = len(data) if max_bytes is None else position + max_bytes
        return data[position:end]

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        data = self._snapshots.get(SnapshotId(*snapshot_id))
        return None if data is None else len(data)

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        offset = snapshot_id.offset
        if offset > self._end:
            return False
        if offset <= self._start:
            return True
        i = self._index_of(offset) if offset < self._end else len(self._bases)
        del self._bases[:i], self._lasts[:i], self._epochs[:i], self._data[:i]
        self._start = offset
        self._start_epoch = snapshot_id.epoch
        self._cache.truncate_from_start(offset)
        for sid in [s for s in self._snapshots if s.offset < offset]:
            del self._snapshots[sid]
        return True

    def truncate_fully_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        self._bases.clear(), self._lasts.clear(), self._epochs.clear(), self._data.clear()
        self._cache.clear()
        self._start = self._end = self._flushed = snapshot_id.offset
        self._start_epoch = snapshot_id.epoch
        for sid in [s for s in self._snapshots if s.offset < snapshot_id.offset]:
            del self._snapshots[sid]

    # -------------------------------------------------------------------------------- simulation
    def crash(self) -> None:
        """Lose everything not flushed, and the (volatile) high watermark."""
        if self._flushed < self._end:
            i = bisect.bisect_left(self._bases, self._flushed)
            del self._bases[i:], self._lasts[i:], self._epochs[i:], self._data[i:]
            self._end = self._flushed
            self._cache.truncate_from_end(self._flushed)
        self._hw = 0
